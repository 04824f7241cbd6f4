"""The Rack interface: `run app` in handler scripts, the env, the
response triple (Hash or pair headers, each-able bodies, close), invalid
responses (500 and a log line), rack.input and rack.errors."""

import json

from httpd import module_httpd

BODY = r"""
# A proxy on 127.0.0.1 names the client it serves in X-Real-IP.
RemoteIPHeader X-Real-IP
RemoteIPInternalProxy 127.0.0.1
<Location /rack_base>
    mrubyHandlerCode 'class RackTest; def call(env); [200, {"x-hoge" => "foo"}, ["rack body"]]; end; end; run RackTest.new'
</Location>
<Location /rack_pairs>
    mrubyHandlerCode 'run Proc.new { |env| [200, [["x-hoge", "foo"], ["x-foo", "hoge"]], ["rack", " body"]] }'
</Location>
<Location /rack_404>
    mrubyHandlerCode 'run Proc.new { |env| [404, [], []] }'
</Location>
<Location /rack_404_body>
    mrubyHandlerCode 'run Proc.new { |env| [404, {"Content-Type" => "text/plain"}, ["not here"]] }'
</Location>
<Location /rack_redirect>
    mrubyHandlerCode 'run Proc.new { |env| [302, {"Location" => "/elsewhere"}, []] }'
</Location>
<Location /rack_declined>
    mrubyHandlerCode 'run Proc.new { |env| [Apache::DECLINED, {}, []] }'
</Location>
<Location /rack_env>
    mrubyHandler {root}/scripts/env.rb
</Location>
<Location /rack_input>
    mrubyHandler {root}/scripts/input.rb
</Location>
<Location /rack_body>
    mrubyHandler {root}/scripts/body.rb
</Location>
<Location /rack_bad>
    mrubyHandler {root}/scripts/bad.rb
</Location>
<Location /rack_2phase>
    mrubyAccessCheckerCode 'run(Proc.new { |env| env["HTTP_AUTH_TOKEN"] == "good" ? [Apache::DECLINED, {"x-client-ip" => env["REMOTE_ADDR"], "x-phase" => Apache.phase}, []] : [403, {}, ["ignored"]] })'
    mrubyHandlerCode 'run Proc.new { |env| [200, [], ["OK"]] }'
</Location>
<Location /rack_errors>
    mrubyHandler {root}/scripts/errors.rb
</Location>
"""

FILES = {
    "scripts/env.rb": r'''
class EnvApp
  def call(env)
    out = {}
    env.each do |k, v|
      out[k] = case v
               when String, Integer, true, false, nil then v
               when Array then v.join(".")
               else v.class.to_s
               end
    end
    [200, { "Content-Type" => "application/x-env" }, out.keys.sort.map { |k| "#{k}\t#{out[k].inspect}\n" }]
  end
end
run EnvApp.new
''',
    "scripts/input.rb": r'''
run(lambda do |env|
  input = env["rack.input"]
  first = input.read
  input.rewind
  again = input.read(3)
  input.rewind
  lines = []
  while (l = input.gets)
    lines << l
  end
  [200, {}, ["#{first.size}|#{again}|#{lines.size}|#{first == lines.join}"]]
end)
''',
    "scripts/body.rb": r'''
class Body
  def each
    yield "chunk1,"
    yield "chunk2"
  end

  def close
    Apache.errlogger Apache::APLOG_WARNING, "rack body closed"
  end
end
run Proc.new { |env| [200, { "X-Multi" => "a\nb", "X-Arr" => ["c", "d"] }, Body.new] }
''',
    "scripts/bad.rb": r'''
kind = Apache::Request.new.args
run(Proc.new do |env|
  case kind
  when "notarray" then "just a string"
  when "status" then [999, {}, []]
  when "headers" then [200, 42, []]
  when "body" then [200, {}, 42]
  when "chunk" then [200, {}, ["ok", :symbol]]
  when "crlf" then [200, { "X-Evil" => "a\r\nInjected: yes" }, ["x"]]
  when "raise" then raise "app failed"
  else [200, {}, ["fine"]]
  end
end)
''',
    "scripts/errors.rb": r'''
run Proc.new { |env| env["rack.errors"].puts("rack error line"); env["rack.errors"].write("second"); [200, {}, ["logged"]] }
''',
}

server = module_httpd("rack", BODY, files=FILES, modules=["remoteip"])


def test_rack_hash_headers(server):
    r = server.get("/rack_base")
    assert (r.status, r.body, r.headers["x-hoge"]) == (200, b"rack body", "foo")


def test_rack_pair_headers(server):
    r = server.get("/rack_pairs")
    assert (r.status, r.body) == (200, b"rack body")
    assert (r.headers["x-hoge"], r.headers["x-foo"]) == ("foo", "hoge")


def test_rack_statuses(server):
    assert server.get("/rack_404").status == 404
    r = server.get("/rack_404_body")
    assert (r.status, r.body, r.headers["Content-Type"]) == (404, b"not here", "text/plain")
    r = server.get("/rack_redirect")
    assert r.status == 302 and r.headers["Location"].endswith("/elsewhere")
    # declining lets the next handler answer: here the default handler, no such file
    assert server.get("/rack_declined").status == 404


def env_of(server, path, **kw):
    r = server.request("POST" if kw.get("body") else "GET", path, **kw)
    assert r.status == 200, server.error_log()[-3000:]
    assert r.headers["Content-Type"] == "application/x-env"
    return dict(line.split("\t", 1) for line in r.text.splitlines())


def test_rack_env(server):
    e = env_of(server, "/rack_env/sub?a=1&b=2", headers={"Host": "apache.example.test:8080",
                                                         "X-Hoge": "foo", "Content-Type": "text/x"},
               body=b"payload")
    assert e["REQUEST_METHOD"] == '"POST"'
    assert e["SCRIPT_NAME"] == '""'
    assert e["PATH_INFO"] == '"/rack_env/sub"'
    assert e["QUERY_STRING"] == '"a=1&b=2"'
    assert e["REQUEST_URI"] == '"/rack_env/sub?a=1&b=2"'
    assert e["SERVER_NAME"] == '"apache.example.test"'
    assert e["SERVER_PORT"] == '"%d"' % server.port
    assert e["SERVER_PROTOCOL"] == '"HTTP/1.1"'
    assert e["REMOTE_ADDR"] == '"127.0.0.1"'
    assert e["HTTP_HOST"] == '"apache.example.test:8080"'
    assert e["HTTP_X_HOGE"] == '"foo"'
    assert e["CONTENT_TYPE"] == '"text/x"'
    assert e["CONTENT_LENGTH"] == '"7"'
    assert "HTTP_CONTENT_TYPE" not in e
    assert e["rack.version"] == '"1.3"'
    assert e["rack.url_scheme"] == '"http"'
    assert e["rack.input"] == '"Apache::Input"'
    assert e["rack.errors"] == '"Apache::Rack::Errors"'
    assert e["rack.multithread"] == ("false" if server.mpm == "prefork" else "true")
    assert e["rack.multiprocess"] == "true"
    assert e["rack.run_once"] == "false"
    assert e["rack.hijack?"] == "false"
    assert e["server.name"] == '"Apache"'
    assert e["server.version"].startswith('"Apache/2.4')


def test_rack_env_without_query(server):
    assert env_of(server, "/rack_env")["QUERY_STRING"] == '""'


def raw_env(server, request):
    r = server.raw(request)
    assert r.status == 200, server.error_log()[-3000:]
    return dict(line.split("\t", 1) for line in r.text.splitlines())


def test_rack_env_leaves_out_header_names_that_are_not_cgi_names(server):
    # "Content_Length" must not pass for CONTENT_LENGTH, nor "X_Forwarded_For"
    # join X-Forwarded-For (httpd leaves such names out of CGI variables too)
    e = raw_env(server, b"GET /rack_env HTTP/1.1\r\nHost: h\r\nContent_Length: 99\r\n"
                        b"Content_Type: evil\r\nX_Forwarded_For: 6.6.6.6\r\n"
                        b"X-Forwarded-For: 10.0.0.1\r\nX.Dot: 1\r\nConnection: close\r\n\r\n")
    assert "CONTENT_LENGTH" not in e and "CONTENT_TYPE" not in e
    assert e["HTTP_X_FORWARDED_FOR"] == '"10.0.0.1"'
    assert not [k for k in e if k.startswith("HTTP_X") and k != "HTTP_X_FORWARDED_FOR"]


def test_rack_env_server_name_without_a_host_header(server):
    # HTTP/1.0 without Host: SERVER_NAME is the server's name, never ""
    e = raw_env(server, b"GET /rack_env HTTP/1.0\r\n\r\n")
    assert e["SERVER_NAME"] == '"127.0.0.1"'
    assert "HTTP_HOST" not in e


def test_rack_input_is_rewindable(server):
    data = b"line one\nline two\nend"
    r = server.request("POST", "/rack_input", body=data)
    assert (r.status, r.body) == (200, b"21|lin|3|true")


def test_rack_body_each_and_close(server):
    r = server.get("/rack_body")
    assert (r.status, r.body) == (200, b"chunk1,chunk2")
    assert r.headers.get_all("X-Multi") == ["a", "b"]
    assert r.headers.get_all("X-Arr") == ["c", "d"]
    server.wait_log(r"MRB00400: .*body\.rb:\d+: rack body closed")


def test_invalid_responses_are_500_and_logged(server):
    for kind, message in (("notarray", "not \\[status, headers, body\\]"),
                          ("status", "999 is not an HTTP status"),
                          ("headers", "must be a Hash or an Array"),
                          ("body", "does not respond to each"),
                          ("chunk", "yielded a Symbol"),
                          ("crlf", "must not contain CR, LF"),
                          ("raise", "app failed")):
        r, _ = server.expect("/rack_bad?" + kind, 500, r"MRB00030: .*%s" % message)
        assert b"Injected" not in r.body and "Injected" not in r.headers, kind
    assert server.get("/rack_bad?fine").body == b"fine"


def test_rack_in_an_access_phase(server):
    r = server.get("/rack_2phase", headers={"Auth-Token": "good"})
    assert (r.status, r.body) == (200, b"OK")
    assert (r.headers["x-client-ip"], r.headers["x-phase"]) == ("127.0.0.1", "AccessChecker")
    r = server.get("/rack_2phase", headers={"Auth-Token": "bad"})
    assert r.status == 403 and b"ignored" not in r.body


def test_rack_errors_goes_to_the_error_log(server):
    assert server.get("/rack_errors").body == b"logged"
    line = server.wait_log(r"MRB00400: .*rack error line")[-1]
    assert "errors.rb:2: rack error line" in line
    server.wait_log(r"MRB00400: .*errors.rb:2: second")


def test_rack_env_remote_addr_behind_a_proxy(server):
    """REMOTE_ADDR is the client httpd's CGI variables name, which
    mod_remoteip takes from a trusted proxy's header."""
    e = env_of(server, "/rack_env", headers={"X-Real-IP": "203.0.113.7"})
    assert e["REMOTE_ADDR"] == '"203.0.113.7"'
    assert int(e["REMOTE_PORT"].strip('"')) > 0
    assert "HTTP_X_REAL_IP" not in e  # mod_remoteip took it
    assert env_of(server, "/rack_env")["REMOTE_ADDR"] == '"127.0.0.1"'
