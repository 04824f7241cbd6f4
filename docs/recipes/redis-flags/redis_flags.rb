# redis_flags.rb: feature flags in the Redis hash "flags" (field: a flag's
# name, value: its value). As a QuickHandler, for every request: the
# flag "maintenance" set to "on" answers 503 with a page (administrators
# get through), and every other flag goes to the backend as a request
# header: new-checkout=on is "X-Feature-New-Checkout: on". As the Handler
# of /flags (administrators only): GET lists the flags, POST name=...&
# value=... sets one (an empty value removes it).
module RedisFlags
  HOST = "127.0.0.1"
  PORT = 6379
  KEY = "flags"
  # Milliseconds to connect, and for each command's whole exchange: what a
  # request waits at most when Redis is down or hangs.
  CONNECT_TIMEOUT = 100
  TIMEOUT = 100
  # Each thread keeps what it read for this many seconds: Redis sees at
  # most one HGETALL a second from each thread of each server.
  TTL = 1.0
  # The flags while Redis cannot be read. {}: fail open, every flag off
  # and no maintenance. To fail closed: {"maintenance" => "on"}.
  WHEN_DOWN = {}
  ADMINS = %w[127.0.0.1 ::1]
  # What a flag may be: a name that makes a header name, a short
  # printable value. Fields of the hash that are not are left out.
  NAME = /\A[a-z0-9][a-z0-9-]{0,39}\z/
  VALUE = /\A[ -~]{1,100}\z/

  def self.redis
    Apache::Redis.new(host: HOST, port: PORT, connect_timeout: CONNECT_TIMEOUT, timeout: TIMEOUT)
  end

  # Every valid flag of the hash, as a Hash.
  def self.read
    db = redis
    fields = db.hgetall(KEY)
    db.close
    flags = {}
    fields.each_slice(2) { |name, value| flags[name] = value if name =~ NAME && value =~ VALUE }
    flags
  end

  # The flags as this thread last read them, read again when older than
  # TTL. When Redis cannot be read: WHEN_DOWN, a warning in the log, and
  # the next try a TTL later (a Redis that hangs costs each thread one
  # timeout a second, not one per request).
  def self.current(r)
    now = Time.now.to_f
    return @flags if @flags && now - @read_at < TTL
    @read_at = now
    @flags =
      begin
        read
      rescue Apache::Socket::Error, Apache::Redis::Error => e
        r.log(Apache::APLOG_WARNING, "redis-flags: cannot read #{KEY} from Redis at #{HOST}:#{PORT} " \
                                     "(#{e.class}: #{e.message}): using #{WHEN_DOWN.inspect}")
        WHEN_DOWN
      end
  end

  def self.forget
    @flags = nil
  end

  def self.admin?(r)
    ADMINS.include?(r.connection.useragent_ip)
  end

  def self.maintenance_page(r)
    r.status = Apache::HTTP_SERVICE_UNAVAILABLE
    r.content_type = "text/html; charset=utf-8"
    r.err_headers_out["Retry-After"] = "60"
    r.err_headers_out["Cache-Control"] = "no-store"
    Apache.rputs "<!DOCTYPE html>\n<html><head><title>Down for maintenance</title></head>\n" \
                 "<body><h1>Down for maintenance</h1><p>We will be back shortly.</p></body></html>\n"
    Apache.return Apache::OK
  end

  # /flags: "NAME VALUE" lines, read from Redis now (not this thread's copy).
  def self.admin_page(r)
    return Apache.return(Apache::HTTP_FORBIDDEN) unless admin?(r)
    if r.method == "POST"
      # A browser sends Origin with a form another site makes it POST
      # here; curl does not. No flag is set on a page's behalf.
      return Apache.return(Apache::HTTP_FORBIDDEN) if r.headers_in["Origin"]
      form = r.form_params
      name, value = form["name"].to_s, form["value"].to_s
      return Apache.return(Apache::HTTP_BAD_REQUEST) unless name =~ NAME && (value.empty? || value =~ VALUE)
    end
    begin
      db = redis
      if name && value.empty?
        db.hdel(KEY, name)
      elsif name
        db.hset(KEY, name, value)
      end
      r.log(Apache::APLOG_NOTICE, "redis-flags: #{name} set to #{value.inspect} by #{r.connection.useragent_ip}") if name
      forget
      flags = read
    rescue Apache::Socket::Error, Apache::Redis::Error => e
      r.log(Apache::APLOG_ERR, "redis-flags: Redis at #{HOST}:#{PORT}: #{e.class}: #{e.message}")
      return Apache.return(Apache::HTTP_SERVICE_UNAVAILABLE)
    end
    r.content_type = "text/plain; charset=utf-8"
    r.headers_out["Cache-Control"] = "no-store"
    flags.keys.sort.each { |n| Apache.rputs "#{n} #{flags[n]}\n" }
  end
end

r = Apache::Request.new
if Apache.phase == "Handler"
  RedisFlags.admin_page(r)
else
  flags = RedisFlags.current(r)
  return RedisFlags.maintenance_page(r) if flags["maintenance"] == "on" && !RedisFlags.admin?(r)
  # The backend believes these headers: none may come from the client.
  r.headers_in.keys.each { |h| r.headers_in.delete(h) if h.downcase.start_with?("x-feature-") }
  flags.each do |name, value|
    next if name == "maintenance"
    r.headers_in["X-Feature-" + name.split("-").map(&:capitalize).join("-")] = value
  end
end
