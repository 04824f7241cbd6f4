Recipe json-api (json-api.md), as mod_mruby-test runs it: json_api.rb in
mruby/ under the ServerRoot, its snippet included at server level.
Run it: tools/mod_mruby-test docs/recipes/json-api.t

--- file mruby/json_api.rb < json-api/json_api.rb
--- file conf/mruby-json-api.conf < json-api/mruby-json-api.conf
--- server_config
Include conf/mruby-json-api.conf

=== the status, for monitoring
--- request
GET /api/status
--- status
200
--- response_headers
Content-Type: application/json; charset=utf-8
Cache-Control: no-store
--- response_body_like
\A\{"status":"ok","server":"Apache\\/2\.4\.[^"]*","mpm":"(prefork|worker|event)","threaded":(true|false),"uptime":[0-9.e-]+,"workers":\{"busy":\d+,"idle":\d+\},"load":\[[-0-9.e,]+\],"time":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"\}\n\Z

=== the echo of a request
JSON.generate(script_safe: true) escapes "/"; httpd keeps the last value
of a repeated query field.
--- request
GET /api/echo?a=1&a=2&b=x%20y
User-Agent: kit/1.0
--- status
200
--- response_body
{"method":"GET","path":"\/api\/echo","query":{"a":["2"],"b":["x y"]},"form":{},"user_agent":"kit\/1.0","client":"127.0.0.1"}
--- request
POST /api/echo
Content-Type: application/x-www-form-urlencoded
User-Agent: kit/1.0

name=caf%C3%A9&tag=%3C%2Fscript%3E
--- status
200
--- response_body_contains
"form":{"name":["café"],"tag":["<\/script>"]}

=== errors in JSON too
--- request
GET /api/nothing
--- status
404
--- response_body
{"error":"not found","path":"\/api\/nothing"}
--- request
DELETE /api/echo
--- status
405
--- response_headers
Allow: GET, HEAD, POST
--- response_body
{"error":"method not allowed","allowed":["GET","HEAD","POST"]}
--- raw_request
POST /api/echo HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n
Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 70000\r\n\r\n
--- status
413
--- response_body
{"error":"request body too large"}
