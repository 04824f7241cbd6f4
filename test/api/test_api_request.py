"""Apache::Request: every string field with its writer, the integer
flags, the relations (main?/prev?/next?), document_root (per request),
scheme, content_length, response_time, error_log, internal_redirect and
the objects it hands out; its header tables and notes; request objects
kept past their request. And what request scripts use around it:
Apache.rputs and Apache.echo, the constants, require, get_server_class."""

from httpd import module_httpd

BODY = r"""
AddHandler mruby-script .mrb
<Files "*.shtml">
    Options +Includes
    SetOutputFilter INCLUDES
</Files>
<Location /target>
    SetHandler mruby-native-script
    mrubyHandlerCode "r = Apache::Request.new; Apache.rputs [r.uri, r.prev?, r.internal_redirect?, r.method].join(',')"
</Location>
<Files "buffered_then_redirect.mrb">
    SetOutputFilter mruby
    mrubyOutputFilterCode "f = Apache::Filter.new; f.body = f.body.upcase"
</Files>
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
  r.headers_out["SET-COOKIE"] = "c=3"
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
    [:query_params, :form_params, :cookies].each do |m|
      begin
        Apache.echo "#{m}: #{$kept.send(m).inspect}"
      rescue RuntimeError => e
        Apache.echo "stale #{m}: #{e.class}"
      end
    end
  else
    $kept = r
    $kept_table = r.headers_in
    r.query_params
    r.form_params
    r.cookies
    Apache.echo "kept #{r.uri}"
  end
when "server_class"
  Apache.echo get_server_class.name
else
  Apache.echo "unknown #{r.args.inspect}"
end
'''

FIELDS = ("the_request protocol hostname method unparsed_uri uri filename canonical_filename path_info "
          "args content_type handler content_encoding status_line vlist_validator user ap_auth_type range")

FILES = {
    "scripts/api.rb": API,
    "htdocs/fields.mrb": (
        'r = Apache::Request.new\n'
        '%w[' + FIELDS + '].each { |f| Apache.echo "#{f}=#{r.send(f).inspect}" }\n'
    ),
    "htdocs/setters.mrb": (
        'r = Apache::Request.new\n'
        'out = []\n'
        '%w[' + FIELDS + '].each do |f|\n'
        '  next if %w[method content_type].include?(f)\n'
        '  r.send("#{f}=", "v-#{f}")\n'
        '  out << (r.send(f) == "v-#{f}")\n'
        'end\n'
        '%w[canonical_filename handler content_encoding status_line vlist_validator user ap_auth_type range path_info args].each do |f|\n'
        '  r.send("#{f}=", nil); out << r.send(f).nil?\n'
        'end\n'
        '%w[uri filename the_request].each do |f|\n'
        '  begin; r.send("#{f}=", nil); out << :accepted; rescue ArgumentError; out << true; end\n'
        'end\n'
        '%w[content_encoding status_line user handler args].each do |f|\n'
        '  begin; r.send("#{f}=", "a\\r\\nX-Evil: 1"); out << :accepted; rescue ArgumentError; out << true; end\n'
        'end\n'
        'begin; r.filename = "a\\0b"; out << :accepted; rescue ArgumentError; out << true; end\n'
        'begin; r.uri = "a\\0b"; out << :accepted; rescue ArgumentError; out << true; end\n'
        'begin; r.uri = 12; out << :accepted; rescue TypeError; out << true; end\n'
        'r.uri = "/fields.mrb"\n'
        'r.handler = "mruby-script"\n'
        'r.status_line = nil\n'
        'Apache.rputs out.uniq.inspect\n'
    ),
    "htdocs/ints.mrb": (
        'r = Apache::Request.new\n'
        '%w[assbackwards proxyreq header_only proto_num method_number chunked read_body read_chunked'
        ' used_path_info eos_sent no_cache no_local_copy].each { |f| Apache.echo "#{f}=#{r.send(f)}" }\n'
        'r.proxyreq = Apache::PROXYREQ_REVERSE\n'
        'Apache.echo "proxyreq=#{r.proxyreq}"\n'
        'r.proxyreq = Apache::PROXYREQ_NONE\n'
        'begin; r.proxyreq = 77; rescue ArgumentError; Apache.echo "bad proxyreq"; end\n'
        'Apache.echo [r.main?, r.sub_request?, r.prev?, r.internal_redirect?, r.next?, r.external_redirect?].inspect\n'
        'r.headers_out["X-Header-Only"] = r.header_only.to_s\n'
    ),
    "htdocs/docroot.mrb": (
        'r = Apache::Request.new\n'
        'orig = r.document_root\n'
        'r.document_root = "/tmp"\n'
        'Apache.echo orig\n'
        'Apache.echo r.document_root\n'
        'Apache.echo Apache::Server.new.document_root\n'
        'begin; r.document_root = nil; rescue TypeError; Apache.echo "nil refused"; end\n'
    ),
    "htdocs/misc.mrb": (
        'r = Apache::Request.new\n'
        'Apache.echo r.scheme\n'
        'Apache.echo r.response_time.is_a?(Float) && r.response_time >= 0\n'
        'Apache.echo r.status\n'
        'r.content_type = "text/x-test"\n'
        'begin; r.status = 42; rescue ArgumentError; Apache.echo "bad status"; end\n'
        'begin; r.status = 2**32 + 200; rescue ArgumentError => e; Apache.echo e.message; end\n'
        'begin; r.content_length = -1; rescue ArgumentError; Apache.echo "bad length"; end\n'
        'Apache.echo [r.finfo.class, r.connection.class, r.server.class, r.subprocess_env.class].join(",")\n'
    ),
    "htdocs/length.mrb": 'r = Apache::Request.new\nr.content_length = 5\nApache.rputs r.content_length.to_s + "!!!!"\n',
    "htdocs/errorlog.mrb": (
        'r = Apache::Request.new\n'
        'r.error_log Apache::APLOG_ERR, "request-log-line"\n'
        'r.log Apache::APLOG_WARNING, :symbol_message\n'
        'Apache.rputs "logged"\n'
    ),
    "htdocs/redirect.mrb": (
        'r = Apache::Request.new\n'
        'Apache.rputs "discarded"\n'
        'r.internal_redirect "/target?from=redirect"\n'
        'Apache.errlogger Apache::APLOG_WARNING, "after redirect: next?=#{r.next?} external_redirect?=#{r.external_redirect?}"\n'
        'Apache.rputs "also discarded" * 10_000\n'
    ),
    "htdocs/redirect_bad.mrb": (
        'r = Apache::Request.new\n'
        'out = []\n'
        'begin; r.internal_redirect "relative"; rescue ArgumentError; out << "relative"; end\n'
        'begin; r.internal_redirect "/a\\nb"; rescue ArgumentError; out << "newline"; end\n'
        'begin; r.internal_redirect nil; rescue TypeError; out << "nil"; end\n'
        'Apache.rputs out.join(",")\n'
    ),
    "htdocs/page.shtml": 'before <!--#include virtual="/sub.mrb?x=1" --> after',
    "htdocs/sub.mrb": (
        'r = Apache::Request.new\n'
        'Apache.rputs [r.main?, r.sub_request?, r.prev?, r.args, r.status].join(",")\n'
    ),
    "htdocs/reverse_proxy.mrb": (
        'r = Apache::Request.new\n'
        'r.reverse_proxy "http://backend.test/app" + r.uri\n'
        'Apache.echo [r.handler, r.proxyreq == Apache::PROXYREQ_REVERSE, r.filename].join(",")\n'
        'begin; r.reverse_proxy nil; rescue TypeError; Apache.echo "nil refused"; end\n'
        'r.handler = "mruby-script"\n'
        'r.proxyreq = Apache::PROXYREQ_NONE\n'
    ),
    "htdocs/big_then_redirect.mrb": (
        'r = Apache::Request.new\n'
        'Apache.rputs "x" * 100_000\n'
        'begin; r.internal_redirect "/target"; rescue RuntimeError => e; Apache.rputs "|refused"; end\n'
    ),
    "htdocs/buffered_then_redirect.mrb": (
        'r = Apache::Request.new\n'
        'Apache.rputs "x" * 100_000\n'
        'begin; r.internal_redirect "/target"; rescue RuntimeError => e; Apache.rputs "|refused"; end\n'
    ),
}

server = module_httpd("request", BODY, files=FILES, modules=("include",))


def test_string_fields(server):
    f = dict(l.split("=", 1) for l in server.lines("/fields.mrb?a=1"))
    assert f["the_request"] == '"GET /fields.mrb?a=1 HTTP/1.1"'
    assert f["protocol"] == '"HTTP/1.1"'
    assert f["hostname"] == '"127.0.0.1"'
    assert f["method"] == '"GET"'
    assert f["unparsed_uri"] == '"/fields.mrb?a=1"'
    assert f["uri"] == '"/fields.mrb"'
    assert f["filename"] == '"%s/fields.mrb"' % server.docroot
    assert f["canonical_filename"] == '"%s/fields.mrb"' % server.docroot
    assert f["args"] == '"a=1"'
    assert f["path_info"] in ('""', "nil")
    assert f["handler"] == '"mruby-script"'
    # unset fields are nil, not a crash
    for name in ("content_encoding", "status_line", "vlist_validator", "user", "ap_auth_type", "range"):
        assert f[name] == "nil", name


def test_range_request_of_script_output(server):
    # r.range is filled by httpd's byterange filter, after the script: the
    # script's output is cut to the range.
    r = server.get("/fields.mrb", headers={"Range": "bytes=0-4"})
    assert (r.status, r.body) == (206, b"the_r")


def test_setters_copy_validate_and_accept_nil(server):
    assert server.lines("/setters.mrb") == ["[true]"]


def test_integer_flags_and_relations(server):
    out = server.lines("/ints.mrb")
    f = dict(l.split("=", 1) for l in out[:12])
    assert f["assbackwards"] == "0"
    assert f["header_only"] == "0"
    assert f["proto_num"] == "1001"
    assert f["method_number"] == "0"
    assert f["proxyreq"] == "0"
    assert f["chunked"] == "0" and f["eos_sent"] == "0"
    assert out[12] == "proxyreq=2"
    assert out[13] == "bad proxyreq"
    assert out[14] == "[false, false, false, false, false, false]"


def test_head_sets_header_only(server):
    r = server.request("HEAD", "/ints.mrb")
    assert r.status == 200 and r.body == b""
    assert r.headers["X-Header-Only"] == "1"


def test_document_root_is_per_request(server):
    out = server.lines("/docroot.mrb")
    assert out == [server.docroot, "/tmp", server.docroot, "nil refused"]
    # the next request sees the configured root again
    assert server.lines("/docroot.mrb")[0] == server.docroot


def test_scheme_status_objects(server):
    r = server.get("/misc.mrb")
    assert r.status == 200
    assert r.headers["Content-Type"] == "text/x-test"
    assert r.text.splitlines() == ["http", "true", "200", "bad status",
                                   "Apache::Request#status=: 4294967496 is not an HTTP status", "bad length",
                                   "Apache::Finfo,Apache::Connection,Apache::Server,Apache::Env"]


def test_content_length_setter(server):
    r = server.get("/length.mrb")
    assert r.status == 200
    assert r.body == b"5!!!!"


def test_error_log_names_client_and_script_line(server):
    assert server.lines("/errorlog.mrb") == ["logged"]
    line = server.wait_log(r"MRB00400: .*request-log-line")[-1]
    assert "[client 127.0.0.1:" in line and "/errorlog.mrb:2: request-log-line" in line
    assert server.wait_log(r"\[mruby:warn\] .*errorlog.mrb:3: symbol_message")


def test_reverse_proxy_sets_the_fields_mod_proxy_reads(server):
    # (mod_proxy acts on them when they are set before the content handler,
    # e.g. in translate_name)
    assert server.lines("/reverse_proxy.mrb") == [
        "proxy-server,true,proxy:http://backend.test/app/reverse_proxy.mrb", "nil refused"]


def test_internal_redirect(server):
    r, _ = server.expect("/redirect.mrb", 200,
                         r"MRB00400: .*after redirect: next\?=true external_redirect\?=true")
    assert r.body == b"/target,true,true,GET"


def test_script_in_a_subrequest(server):
    # mod_include runs /sub.mrb as a subrequest, inside the page's response
    r = server.get("/page.shtml")
    assert (r.status, r.body) == (200, b"before true,true,false,x=1,200 after")


def test_internal_redirect_of_a_post(server):
    # the redirected request keeps the method
    r = server.request("POST", "/redirect.mrb", body=b"x=1")
    assert (r.status, r.body) == (200, b"/target,true,true,POST")


def test_internal_redirect_refuses_bad_uris(server):
    assert server.lines("/redirect_bad.mrb") == ["relative,newline,nil"]


def test_internal_redirect_after_output_was_sent_is_refused(server):
    r = server.get("/big_then_redirect.mrb")
    assert r.status == 200
    assert r.body.endswith(b"|refused") and len(r.body) == 100_000 + len(b"|refused")


def test_internal_redirect_after_output_a_filter_holds(server):
    """100 KB went down the chain, but a buffering output filter holds it
    all: nothing was sent, so the redirect is made, and the filter's
    request with what it holds is left behind."""
    r = server.get("/buffered_then_redirect.mrb")
    assert (r.status, r.body) == (200, b"/target,true,true,GET")


def test_headers(server):
    r = server.get("/api?headers", headers={"X-Token": "tok-1", "User-Agent": "pytest-agent"})
    assert r.status == 200
    assert r.text.splitlines() == ["tok-1", "tok-1", "nil", "tok-1", "pytest-agent",
                                   "SET-COOKIE,Set-Cookie,X-Out"]
    assert r.headers["X-Out"] == "out-value"
    # each Set-Cookie is a header of its own, whatever the case of its name
    assert r.headers.get_all("Set-Cookie") == ["a=1", "b=2", "c=3"]
    assert r.headers["X-Err"] == "err"
    assert "X-Gone" not in r.headers


def test_header_injection_is_refused(server):
    r = server.get("/api?inject")
    assert r.status == 200
    assert r.text.splitlines() == ["refused", "refused", "refused", "bad name refused"]
    assert "X-Evil" not in r.headers
    assert "X-Test" not in r.headers


def test_notes(server):
    assert server.lines("/api?notes") == ["v", '{"k"=>"v"}']


def test_request_objects_do_not_outlive_their_request(server):
    # Whatever thread serves them, each VM first keeps an object, then
    # finds it stale: never a crash.
    seen = set()
    for _ in range(80):
        out = server.lines("/api?stale")
        seen.add(out[0])
        if out[0].startswith("stale"):
            # what the Ruby half keeps of a request (parsed fields,
            # cookies) is stale with it
            assert out == ["stale: RuntimeError", "stale table: RuntimeError",
                           "stale query_params: RuntimeError", "stale form_params: RuntimeError",
                           "stale cookies: RuntimeError"]
    assert "stale: RuntimeError" in seen


def test_rputs_is_binary_safe(server):
    r = server.get("/api?binary")
    assert (r.status, r.body) == (200, b"a\x00b\xff")


def test_rputs_converts_with_to_s(server):
    r = server.get("/api?nonstring")
    assert (r.status, r.body) == (200, b"42sym")


def test_echo_adds_newline(server):
    r = server.get("/api?echo")
    assert (r.status, r.body) == (200, b"line\n7\n")


def test_constants_come_from_httpd_headers(server):
    r = server.get("/api?constants")
    assert (r.status, r.body) == (200, b"0,-1,-2,200,404,503,500,0,2,3,7,2\n")


def test_require(server):
    out = server.lines("/api?require")
    assert out[0] == "false"
    assert out[1].startswith("LoadError: cannot load such file -- no_such_library")


def test_get_server_class(server):
    r = server.get("/api?server_class")
    assert (r.status, r.body) == (200, b"Apache\n")
