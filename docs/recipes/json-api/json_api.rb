# json_api.rb: a JSON API, GET /api/status (what the server is doing, for
# monitoring) and GET or POST /api/echo (the request as JSON: its fields,
# for trying clients out).

def reply(r, status, body, headers = {})
  json = JSON.generate(body, script_safe: true)
  r.status = status
  r.content_type = "application/json; charset=utf-8"
  r.headers_out["Cache-Control"] = "no-store"
  headers.each { |name, value| r.headers_out[name] = value }
  Apache.rputs json
  Apache.rputs "\n"
end

# A form's file field is echoed as what it is, not as its bytes.
def fields(params)
  params.keys.map do |k|
    values = params.values_of(k).map do |v|
      next v unless v.is_a?(Apache::FormFile)
      { "filename" => v.filename, "content_type" => v.content_type, "size" => v.size }
    end
    [k, values]
  end.to_h
end

def utc_iso8601(t)
  t = t.utc
  format("%04d-%02d-%02dT%02d:%02d:%02dZ", t.year, t.month, t.day, t.hour, t.min, t.sec)
end

ENDPOINTS = {
  "/api/status" => %w[GET HEAD],
  "/api/echo" => %w[GET HEAD POST],
}
# Who may read /api/status: it tells which httpd runs (its full description,
# whatever ServerTokens says), its load and its workers, which is for the
# monitoring system, not for everyone. Addresses as httpd sees them.
MONITORS = %w[127.0.0.1 ::1]

r = Apache::Request.new
begin
  allowed = ENDPOINTS[r.uri]
  if allowed.nil?
    reply(r, 404, { "error" => "not found", "path" => r.uri })
  elsif !allowed.include?(r.method)
    reply(r, 405, { "error" => "method not allowed", "allowed" => allowed }, "Allow" => allowed.join(", "))
  elsif r.uri == "/api/status" && !MONITORS.include?(r.connection.useragent_ip)
    reply(r, 403, { "error" => "forbidden" })
  elsif r.uri == "/api/status"
    board = Apache::Scoreboard.new
    reply(r, 200, {
      "status" => "ok",
      "server" => Apache.server_version,
      "mpm" => Apache.mpm,
      "threaded" => Apache.threaded?,
      "uptime" => board.uptime,
      "workers" => { "busy" => board.busy_worker, "idle" => board.idle_worker },
      "load" => board.loadavg,
      "time" => utc_iso8601(Time.now),
    })
  else
    reply(r, 200, {
      "method" => r.method,
      "path" => r.uri,
      "query" => fields(r.query_params),
      "form" => r.method == "POST" ? fields(r.form_params) : {},
      "user_agent" => r.headers_in["User-Agent"],
      "client" => r.connection.useragent_ip,
    })
  end
rescue Apache::HTTPError => e
  # What the API refuses while reading the request (a body over
  # mrubyRequestBodyLimit: 413; a multipart form without a boundary: 400)
  # is answered in JSON too. No output was written yet: reply comes last.
  reply(r, e.status, { "error" => e.status == 413 ? "request body too large" : "bad request" })
rescue JSON::GeneratorError
  # A field that is not UTF-8 has no JSON.
  reply(r, 400, { "error" => "the request is not UTF-8" })
end
