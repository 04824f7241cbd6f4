# rate_limit.rb: at most LIMIT requests per minute for each API key
# (X-Api-Key), or for each client address when there is no key; past it,
# 429 Too Many Requests with Retry-After. A fixed window: one counter per
# client and minute, in the "ratelimit" cache, gone when the minute is.
LIMIT = 60
WINDOW = 60 # seconds

r = Apache::Request.new
# httpd's own lookups (mod_dir finding index.html) are not requests of the
# client: count each request once.
return if r.sub_request?
key = r.headers_in["X-Api-Key"]
client = key ? "key:" + key[0, 64] : "ip:" + r.connection.useragent_ip
now = Time.now.to_i
window = now / WINDOW
begin
  count = Apache::Cache.named(:ratelimit).incr("#{client}:#{window}", ttl: WINDOW * 2)
rescue Apache::Cache::Error => e
  # Without its cache the limit cannot be counted: serve rather than
  # refuse everyone, and say so.
  r.log(Apache::APLOG_WARNING, "rate limit not applied: #{e.message}")
  return
end

reset = (window + 1) * WINDOW - now
out = r.err_headers_out
out["X-RateLimit-Limit"] = LIMIT.to_s
out["X-RateLimit-Remaining"] = [LIMIT - count, 0].max.to_s
out["X-RateLimit-Reset"] = reset.to_s
if count > LIMIT
  # Once per client and window, not on every refused request.
  if count == LIMIT + 1
    who = key ? "API key #{key[0, 6]}..." : r.connection.useragent_ip
    r.log(Apache::APLOG_WARNING, "#{who} is over #{LIMIT} requests a minute")
  end
  out["Retry-After"] = reset.to_s
  Apache.return Apache::HTTP_TOO_MANY_REQUESTS
end
