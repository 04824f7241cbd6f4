"""Request#subrequest: httpd runs a subrequest (a handler of this server, a
static file, mod_proxy to a backend) and the script gets its status,
header fields and body; nothing of it reaches the client by itself."""

import os
import time

import pytest

from httpd import MPMS, Httpd, backend_httpd, measures_memory, serving

backend = backend_httpd("subreq-backend", r"""
<Location /api>
    SetHandler mruby-native-script
    mrubyHandlerCode "r = Apache::Request.new; r.headers_out['X-Backend'] = 'yes'; Apache.rputs 'backend ' + r.uri + ' ' + r.headers_in['X-Token'].to_s"
</Location>
<Location /api/echo>
    SetHandler mruby-native-script
    mrubyHandlerCode "r = Apache::Request.new; b = r.body.to_s; Apache.rputs [r.method, r.headers_in['Content-Length'], b.bytesize, b.bytes.inject(0) { |a, x| a + x }].join(' ')"
</Location>
""")

CONF = r"""
AddHandler mruby-script .mrb
<Location /inner>
    SetHandler mruby-native-script
    mrubyHandlerCode "r = Apache::Request.new; r.headers_out['X-Inner'] = r.method; r.content_type = 'text/x-inner'; Apache.rputs 'inner ' + r.headers_in['X-Token'].to_s"
</Location>
<Location /teapot>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.return 418"
</Location>
<Location /echo_body>
    SetHandler mruby-native-script
    mrubyHandlerCode "r = Apache::Request.new; b = r.body.to_s; Apache.rputs [r.method, b.bytesize, b.bytes.inject(0) { |a, x| a + x }, b[0, 12].inspect].join(' ')"
</Location>
<Location /big>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'z' * 100_000"
</Location>

ProxyPass /proxied/ http://127.0.0.1:{backend}/api/
"""

OUTER = r"""
r = Apache::Request.new
case r.args
when 'inner'
  s = r.subrequest('/inner', headers: {'X-Token' => 'tok'})
  Apache.rputs [s.status, s.headers['x-inner'], s.headers['Content-Type'], s.body].join('|')
when 'head'
  Apache.rputs r.subrequest('/inner', method: 'HEAD').headers['x-inner']
when 'file'
  s = r.subrequest('/static.txt')
  Apache.rputs [s.status, s.body].join('|')
when 'missing'
  Apache.rputs r.subrequest('/nothing-here.txt').status.to_s
when 'teapot'
  Apache.rputs r.subrequest('/teapot').status.to_s
when 'proxied'
  s = r.subrequest('/proxied/x', headers: {'X-Token' => 'via-proxy'})
  Apache.rputs [s.status, s.headers['X-Backend'], s.body].join('|')
when 'too_large'
  begin
    r.subrequest('/big', max_size: 1000)
  rescue Apache::HTTP::TooLarge => e
    Apache.rputs e.message
  end
when 'fields'
  # the static file's fields, read after the subrequest's pool is gone
  s = r.subrequest('/static.txt')
  Apache.rputs [s.headers['ETag'], s.headers['Content-Length'], s.headers['Content-Type']].join('|')
when 'override'
  Apache.rputs r.subrequest('/inner', headers: {'X-Token' => 'from-the-script'}).body
when 'post_inner'
  s = r.subrequest('/echo_body', method: 'POST', body: "a=1&b=\0\xff" + 'x' * 100_000)
  Apache.rputs s.body
when 'post_empty'
  Apache.rputs r.subrequest('/echo_body', method: 'PUT', body: '').body
when 'post_proxied'
  b = "p\r\n" * 30_000
  Apache.rputs r.subrequest('/proxied/echo', method: 'POST', body: b).body + ' ' + b.bytes.inject(0) { |a, x| a + x }.to_s
when 'client_body_first'
  mine = r.body.to_s
  s = r.subrequest('/echo_body', method: 'POST', body: 'from the script')
  Apache.rputs mine + '|' + s.body + '|' + r.body.to_s
when 'many'
  # 300 subrequests of 100 KB each: their bodies are not kept until the
  # request ends (30 MB if they were)
  rss = -> { File.read('/proc/self/status').split("\n").find { |l| l.start_with?('VmRSS:') }.split[1].to_i }
  3.times { r.subrequest('/big') }
  GC.start
  before = rss.call
  n = 0
  300.times do |i|
    n += r.subrequest('/big').body.bytesize
    GC.start if i % 10 == 9 # mruby counts objects, not bytes: 100 KB strings pile up
  end
  GC.start
  Apache.rputs "#{n} #{rss.call - before}"
when 'bad_body'
  begin
    r.subrequest('/echo_body', method: 'POST', body: 12)
  rescue TypeError => e
    Apache.rputs e.message
  end
when 'bad'
  out = []
  ["http://x/", "/inner\r\nX: y"].each do |u|
    begin
      r.subrequest(u)
    rescue ArgumentError => e
      out << e.message
    end
  end
  begin
    r.subrequest('/inner', headers: {'X-A' => "a\r\nb"})
  rescue ArgumentError => e
    out << e.message
  end
  Apache.rputs out.join('|')
end
"""


@pytest.fixture(scope="module", params=MPMS)
def server(request, backend):
    srv = Httpd("subreq", request.param, CONF.replace("{backend}", str(backend.port)),
                modules=("proxy", "proxy_http"))
    srv.write("htdocs/outer.mrb", OUTER)
    static = srv.write("htdocs/static.txt", "a static file\n")
    # httpd makes a file's ETag weak (W/) while it is less than a second
    # old: the first request could get a weak one and the next a strong one
    old = time.time() - 60
    os.utime(static, (old, old))
    yield from serving(srv)


def test_a_handler_of_this_server(server):
    r = server.ok("/outer.mrb?inner")
    assert r.text == "200|GET|text/x-inner|inner tok"
    assert "X-Inner" not in r.headers  # the subrequest's headers are the script's to use


def test_head_runs_the_handler_without_its_body(server):
    assert server.ok("/outer.mrb?head").text == "HEAD"


def test_a_static_file_and_a_missing_one(server):
    assert server.ok("/outer.mrb?file").text == "200|a static file\n"
    assert server.ok("/outer.mrb?missing").text == "404"


def test_a_status_returned_by_the_handler(server):
    assert server.ok("/outer.mrb?teapot").text == "418"


def test_mod_proxy_to_a_backend(server):
    assert server.ok("/outer.mrb?proxied").text == "200|yes|backend /api/x via-proxy"


def test_a_body_over_max_size_raises(server):
    assert server.ok("/outer.mrb?too_large").text == "subrequest: the response body is larger than max_size"


def test_bad_uris_and_headers_are_refused(server):
    parts = server.ok("/outer.mrb?bad").text.split("|")
    assert len(parts) == 3, parts
    assert "path of this server" in parts[0]
    assert "control" in parts[1] or "CR" in parts[1], parts
    assert "control" in parts[2] or "CR" in parts[2], parts


def test_response_fields_outlive_the_subrequest(server):
    direct = server.get("/static.txt")
    for _ in range(20):
        got = server.ok("/outer.mrb?fields").text
        assert got == "|".join([direct.headers["ETag"], direct.headers["Content-Length"],
                                direct.headers["Content-Type"]])


def test_a_request_body_goes_to_a_handler_of_this_server(server):
    body = b"a=1&b=\0\xff" + b"x" * 100000
    assert server.ok("/outer.mrb?post_inner").text == \
        "POST %d %d %s" % (len(body), sum(body), '"a=1&b=\\x00\\xffxxxx"')
    assert server.ok("/outer.mrb?post_empty").text == 'PUT 0 0 ""'


def test_a_request_body_goes_through_mod_proxy(server):
    body = b"p\r\n" * 30000
    assert server.ok("/outer.mrb?post_proxied").text == \
        "POST %d %d %d %d" % (len(body), len(body), sum(body), sum(body))


def test_a_subrequest_reads_its_own_body_not_the_clients(server):
    r = server.request("POST", "/outer.mrb?client_body_first", body=b"from the client")
    assert (r.status, r.text) == (200, "from the client|POST 15 %d \"from the scr\"|from the client"
                                  % (sum(b"from the script")))


@measures_memory
def test_subrequest_bodies_are_not_kept_until_the_request_ends(server):
    n, grown_kb = server.ok("/outer.mrb?many").text.split()
    assert int(n) == 300 * 100000
    assert int(grown_kb) < 8000, grown_kb


def test_a_body_that_is_not_a_string_is_refused(server):
    assert server.ok("/outer.mrb?bad_body").text == "subrequest: body must be a String or nil"


def test_a_script_header_replaces_the_clients(server):
    r = server.get("/outer.mrb?override", headers={"X-Token": "from-the-client"})
    assert (r.status, r.text) == (200, "inner from-the-script")
