# rate_limit.rb: at most LIMIT requests per minute for each API key
# (X-Api-Key), or for each client address when there is no key; past it,
# 429 Too Many Requests with Retry-After. A fixed window: one counter per
# client and minute, in the "ratelimit" cache, gone when the minute is.
LIMIT = 60
WINDOW = 60 # seconds
# Keys are not checked here: a key is a name the client chooses, and one
# that sent a new key with every request would never be limited. So the
# requests of one address with keys, whatever the keys, are counted too:
# at most ADDRESS_LIMIT a minute (room for many clients behind one NAT).
ADDRESS_LIMIT = 600

# The log names a key by a fingerprint, never by any of its characters:
# the log is no place for secrets. The first 8 hex digits of its SHA-256:
# two keys almost never share them, and they tell nothing of the key.
def rate_limit_fingerprint(key)
  Digest::SHA256.hexdigest(key)[0, 8]
end

r = Apache::Request.new
# httpd's own lookups (mod_dir finding index.html) are not requests of the
# client: count each request once.
return if r.sub_request?
key = r.headers_in["X-Api-Key"]
ip = r.connection.useragent_ip
# The counters of this request: [name, limit, what the log says past it
# (made only then)].
counters =
  if key
    key = key[0, 64]
    [["key:" + key, LIMIT,
      -> { "API key ##{rate_limit_fingerprint(key)} from #{ip} is over #{LIMIT} requests a minute" }],
     ["keys:" + ip, ADDRESS_LIMIT, -> { "#{ip} is over #{ADDRESS_LIMIT} requests a minute with API keys" }]]
  else
    [["ip:" + ip, LIMIT, -> { "#{ip} is over #{LIMIT} requests a minute" }]]
  end
now = Time.now.to_i
window = now / WINDOW
cache = Apache::Cache.named(:ratelimit)
begin
  counts = counters.map { |name, _, _| cache.incr("#{name}:#{window}", ttl: WINDOW * 2) }
rescue Apache::Cache::Error => e
  # Without its cache the limit cannot be counted: serve rather than
  # refuse everyone, and say so.
  r.log(Apache::APLOG_WARNING, "rate limit not applied: #{e.message}")
  return
end

# The headers tell of the counter closest to its limit.
tightest = (0...counters.size).min_by { |i| counters[i][1] - counts[i] }
limit = counters[tightest][1]
count = counts[tightest]
reset = (window + 1) * WINDOW - now
out = r.err_headers_out
out["X-RateLimit-Limit"] = limit.to_s
out["X-RateLimit-Remaining"] = [limit - count, 0].max.to_s
out["X-RateLimit-Reset"] = reset.to_s
if count > limit
  # Once per counter and window, not on every refused request.
  counters.each_with_index do |(_, max, message), i|
    r.log(Apache::APLOG_WARNING, message.call) if counts[i] == max + 1
  end
  out["Retry-After"] = reset.to_s
  Apache.return Apache::HTTP_TOO_MANY_REQUESTS
end
