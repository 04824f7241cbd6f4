"""The Ruby API of the core: Apache.rputs/echo/return, the constants,
require, and Apache::Request with its header tables."""

from httpd import module_httpd

BODY = r"""
<Location /api>
    SetHandler mruby-native-script
    mrubyHandler {root}/scripts/api.rb
</Location>
"""

API = r'''
r = Apache::Request.new
case r.args
when "binary"
  Apache.rputs "a\0b\xff"
when "nonstring"
  Apache.rputs 42
  Apache.rputs nil
  Apache.rputs :sym
when "echo"
  Apache.echo "line"
  Apache.echo 7
when "constants"
  Apache.echo [Apache::OK, Apache::DECLINED, Apache::DONE, Apache::HTTP_OK,
               Apache::HTTP_NOT_FOUND, Apache::HTTP_SERVICE_UNAVAILABLE,
               Apache::HTTP_INTERNAL_SERVER_ERROR, Apache::M_GET, Apache::M_POST,
               Apache::APLOG_ERR, Apache::APLOG_DEBUG, Apache::PROXYREQ_REVERSE].join(",")
when "require"
  Apache.echo require('Apache').inspect
  begin
    require 'no_such_library'
  rescue LoadError => e
    Apache.echo "LoadError: #{e.message}"
  end
when "fields"
  %w[the_request protocol hostname method unparsed_uri uri filename path_info args content_type].each do |f|
    Apache.echo "#{f}=#{r.send(f).inspect}"
  end
when "set"
  r.filename = "/tmp/elsewhere"
  r.path_info = nil
  r.hostname = "example.test"
  Apache.echo [r.filename, r.path_info.inspect, r.hostname].join(",")
  begin
    r.uri = "a\0b"
  rescue ArgumentError => e
    Apache.echo "ArgumentError"
  end
  begin
    r.uri = nil
  rescue ArgumentError => e
    Apache.echo "nil refused"
  end
  begin
    r.uri = 5
  rescue TypeError => e
    Apache.echo "TypeError"
  end
when "headers"
  hin = r.headers_in
  Apache.echo hin["X-Token"]
  Apache.echo hin["x-token"]
  Apache.echo hin["No-Such-Header"].inspect
  Apache.echo Apache::Headers_in.new["X-Token"]
  Apache.echo hin.user_agent
  r.headers_out["X-Out"] = "out-value"
  r.headers_out["Set-Cookie"] = "a=1"
  r.headers_out["Set-Cookie"] = "b=2"
  r.err_headers_out["X-Err"] = "err"
  r.headers_out["X-Gone"] = "x"
  r.headers_out["X-Gone"] = nil
  Apache.echo r.headers_out.keys.sort.join(",")
when "inject"
  %W[a\r\nX-Evil:\ 1 a\nb a\rb].each do |v|
    begin
      r.headers_out["X-Test"] = v
      Apache.echo "accepted"
    rescue ArgumentError
      Apache.echo "refused"
    end
  end
  begin
    r.headers_out["Bad Name"] = "v"
  rescue ArgumentError
    Apache.echo "bad name refused"
  end
when "notes"
  r.notes["k"] = "v"
  Apache.echo Apache::Notes.new["k"]
  Apache.echo r.notes.to_h.inspect
when "method"
  Apache.echo r.method
when "stale"
  if $kept
    begin
      $kept.uri
    rescue RuntimeError => e
      Apache.echo "stale: #{e.class}"
    end
    begin
      $kept_table["X"]
    rescue RuntimeError => e
      Apache.echo "stale table: #{e.class}"
    end
  else
    $kept = r
    $kept_table = r.headers_in
    Apache.echo "kept #{r.uri}"
  end
when "server_class"
  Apache.echo get_server_class.name
else
  Apache.echo "unknown #{r.args.inspect}"
end
'''

server = module_httpd("api", BODY, files={"scripts/api.rb": API}, mpm_conf=None)


def body(server, args, **kw):
    r = server.get("/api?" + args, **kw)
    assert r.status == 200, (r, server.error_log()[-2000:])
    return r.body


def test_rputs_is_binary_safe(server):
    assert body(server, "binary") == b"a\x00b\xff"


def test_rputs_converts_with_to_s(server):
    assert body(server, "nonstring") == b"42sym"


def test_echo_adds_newline(server):
    assert body(server, "echo") == b"line\n7\n"


def test_constants_come_from_httpd_headers(server):
    assert body(server, "constants") == b"0,-1,-2,200,404,503,500,0,2,3,7,2\n"


def test_require(server):
    out = body(server, "require").decode()
    assert out.splitlines()[0] == "false"
    assert out.splitlines()[1].startswith("LoadError: cannot load such file -- no_such_library")


def test_request_fields(server):
    out = body(server, "fields").decode().splitlines()
    fields = dict(line.split("=", 1) for line in out)
    assert fields["the_request"] == '"GET /api?fields HTTP/1.1"'
    assert fields["protocol"] == '"HTTP/1.1"'
    assert fields["hostname"] == '"127.0.0.1"'
    assert fields["method"] == '"GET"'
    assert fields["unparsed_uri"] == '"/api?fields"'
    assert fields["uri"] == '"/api"'
    assert fields["filename"] == '"%s/api"' % server.docroot
    assert fields["args"] == '"fields"'
    assert fields["path_info"] in ('""', "nil")


def test_request_setters(server):
    out = body(server, "set").decode().splitlines()
    assert out == ["/tmp/elsewhere,nil,example.test", "ArgumentError", "nil refused", "TypeError"]


def test_headers(server):
    r = server.get("/api?headers", headers={"X-Token": "tok-1", "User-Agent": "pytest-agent"})
    assert r.status == 200
    assert r.body.decode().splitlines() == ["tok-1", "tok-1", "nil", "tok-1", "pytest-agent",
                                            "Set-Cookie,X-Out"]
    assert r.headers["X-Out"] == "out-value"
    assert r.headers.get_all("Set-Cookie") == ["a=1", "b=2"]
    assert r.headers["X-Err"] == "err"
    assert "X-Gone" not in r.headers


def test_header_injection_is_refused(server):
    r = server.get("/api?inject")
    assert r.body.decode().splitlines() == ["refused", "refused", "refused", "bad name refused"]
    assert "X-Evil" not in r.headers
    assert "X-Test" not in r.headers


def test_notes(server):
    assert body(server, "notes").decode().splitlines() == ["v", '{"k"=>"v"}']


def test_method_of_post(server):
    r = server.request("POST", "/api?method", body=b"x=1")
    assert (r.status, r.body) == (200, b"POST\n")


def test_request_objects_do_not_outlive_their_request(server):
    # Whatever thread serves them, each VM first keeps an object, then
    # finds it stale: never a crash.
    seen = set()
    for _ in range(80):
        out = body(server, "stale").decode()
        seen.add(out.splitlines()[0])
        if out.startswith("stale"):
            assert out.splitlines() == ["stale: RuntimeError", "stale table: RuntimeError"]
    assert "stale: RuntimeError" in seen


def test_get_server_class(server):
    assert body(server, "server_class") == b"Apache\n"
