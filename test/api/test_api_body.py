"""The request body: Request#body, Apache::Input (read/gets/each/rewind),
the limits (mrubyRequestBodyLimit, LimitRequestBody), and above all that
reading it in Ruby consumes nothing: a request proxied by mod_proxy after
a script read its body arrives complete at the backend."""

import hashlib
import os

import pytest

from httpd import MPMS, Httpd, backend_httpd, serving

BACKEND_BODY = r"""
<Location /echo>
    SetHandler mruby-native-script
    mrubyHandlerCode "r = Apache::Request.new; b = r.body.to_s; r.headers_out['X-Backend-Length'] = b.size.to_s; r.headers_out['X-Backend-TE'] = r.headers_in['Transfer-Encoding'].to_s; r.headers_out['X-Backend-CL'] = r.headers_in['Content-Length'].to_s; Apache.rputs b"
</Location>
"""

BODY = r"""
AddHandler mruby-script .mrb
<Location /proxied>
    ProxyPass http://127.0.0.1:{backend}/echo
</Location>
<Location /checked>
    mrubyAccessCheckerCode "r = Apache::Request.new; b = r.body.to_s; r.notes['len'] = b.size.to_s; Apache.return(b.include?('forbidden') ? Apache::HTTP_FORBIDDEN : Apache::OK)"
    ProxyPass http://127.0.0.1:{backend}/echo
</Location>
<Location /peeked>
    mrubyFixupsCode "Apache::Request.new.input.read(7)"
    ProxyPass http://127.0.0.1:{backend}/echo
</Location>
<Location /peek>
    mrubyFixupsCode "Apache::Request.new.input.read(7)"
</Location>
mrubyTranslateNameCode "r = Apache::Request.new; r.reverse_proxy('http://127.0.0.1:{backend}/echo') if r.uri == '/rp'"

<Location /small>
    mrubyRequestBodyLimit 10
</Location>
<Location /limited>
    LimitRequestBody 20
</Location>
"""

FILES = {
    "htdocs/body.mrb": (
        'b = Apache::Request.new.body\n'
        'Apache::Request.new.headers_out["X-Class"] = b.class.to_s\n'
        'Apache.rputs b.to_s\n'
    ),
    "htdocs/twice.mrb": (
        'r = Apache::Request.new\n'
        'Apache.rputs r.body == r.body ? r.body : "differs"\n'
    ),
    "htdocs/stream.mrb": (
        'input = Apache::Request.new.input\n'
        'n = 0; chunks = 0\n'
        'input.each { |c| n += c.size; chunks += 1 }\n'
        'Apache.echo "#{n} #{chunks > 1}"\n'
        'Apache.echo input.read(5).inspect\n'
        'Apache.echo input.read.inspect\n'
        'input.rewind\n'
        'Apache.echo input.read(5).inspect\n'
        'Apache.echo input.eof?\n'
    ),
    "htdocs/lines.mrb": (
        'input = Apache::Request.new.input\n'
        'out = []\n'
        'while (line = input.gets)\n  out << line\nend\n'
        'Apache.rputs out.inspect\n'
    ),
    "htdocs/read_n.mrb": (
        'input = Apache::Request.new.input\n'
        'buf = ""\n'
        'parts = []\n'
        'while input.read(3, buf)\n  parts << buf.dup\nend\n'
        'out = parts.join("|") + "|" + input.read(0).inspect + input.read(1).inspect\n'
        'input.rewind\n'
        'out << "|" + input.read(2**62 + 5).to_s\n'
        'begin; input.read(-1); rescue ArgumentError; out << "|negative"; end\n'
        'input.rewind\n'
        'begin; input.read(1, 5); rescue TypeError; out << "|buffer"; end\n'
        'Apache.rputs out\n'
    ),
    "htdocs/then_proxy.mrb": (
        'r = Apache::Request.new\n'
        'b = r.body\n'
        'r.notes["seen"] = b.size.to_s\n'
        'r.internal_redirect "/proxied"\n'
    ),
    "htdocs/partial_then_proxy.mrb": (
        'r = Apache::Request.new\n'
        'r.input.read(10)\n'
        'r.internal_redirect "/proxied"\n'
    ),
    "htdocs/then_ruby.mrb": (
        'r = Apache::Request.new\n'
        'r.input.read(4)\n'
        'r.internal_redirect "/body.mrb"\n'
    ),
    "htdocs/input.mrb": 'Apache.rputs Apache::Request.new.input.read\n',
    "htdocs/peek/input.mrb": 'Apache.rputs Apache::Request.new.input.read\n',
    "htdocs/then_input.mrb": (
        'r = Apache::Request.new\n'
        'r.input.read(4)\n'
        'r.internal_redirect "/input.mrb"\n'
    ),
    "htdocs/small/body.mrb": (
        'begin\n'
        '  Apache::Request.new.body\n'
        'rescue Apache::HTTPError => e\n'
        '  Apache.rputs "#{e.status} #{e.message}"\n'
        'end\n'
    ),
    "htdocs/small/unrescued.mrb": 'Apache::Request.new.body\nApache.rputs "not reached"\n',
    "htdocs/limited/body.mrb": 'Apache.rputs Apache::Request.new.body.to_s\n',
    "htdocs/limited/rescued.mrb": (
        'begin\n  Apache::Request.new.body\nrescue Apache::HTTPError\n  Apache.rputs "rescued"\nend\n'
    ),
}


backend = backend_httpd("backend", BACKEND_BODY)


@pytest.fixture(scope="module", params=MPMS)
def server(request, backend):
    yield from serving(Httpd("body", request.param, BODY.replace("{backend}", str(backend.port)), files=FILES,
                             modules=("proxy", "proxy_http")))


BINARY = bytes(range(256)) * 4 + b"\x00\r\n\x00"


def test_body_is_binary_safe(server):
    r = server.request("POST", "/body.mrb", body=BINARY)
    assert (r.status, r.body) == (200, BINARY)
    assert r.headers["X-Class"] == "String"


def test_no_body_is_nil(server):
    r = server.get("/body.mrb")
    assert (r.status, r.body, r.headers["X-Class"]) == (200, b"", "NilClass")


def test_body_can_be_read_twice(server):
    r = server.request("POST", "/twice.mrb", body=b"same twice")
    assert r.body == b"same twice"


def test_5mb_chunked_upload(server):
    data = os.urandom(5 * 1024 * 1024)
    r = server.post_chunked("/body.mrb", data)
    assert r.status == 200
    assert hashlib.sha256(r.body).hexdigest() == hashlib.sha256(data).hexdigest()


def test_streaming_each_read_rewind(server):
    data = b"0123456789" * 5000
    r = server.post_chunked("/stream.mrb", data)
    assert r.status == 200
    assert r.text.splitlines() == ["50000 true", "nil", '""', '"01234"', "false"]


def test_gets(server):
    r = server.request("POST", "/lines.mrb", body=b"one\ntwo\r\n\nlast")
    assert r.body == b'["one\\n", "two\\r\\n", "\\n", "last"]'


def test_read_n_with_buffer(server):
    r = server.request("POST", "/read_n.mrb", body=b"abcdefgh")
    # a buffer that is not a String is a TypeError, as for IO#read
    assert r.body == b'abc|def|gh|""nil|abcdefgh|negative|buffer'


def test_proxy_after_body_read_gets_whole_body(server, backend):
    data = b"field=value&other=" + b"x" * 100000
    r = server.request("POST", "/then_proxy.mrb", body=data,
                       headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert r.status == 200, server.error_log()[-3000:]
    assert r.body == data
    assert r.headers["X-Backend-Length"] == str(len(data))


def test_proxy_after_5mb_chunked_body_read(server, backend):
    data = os.urandom(5 * 1024 * 1024)
    r = server.post_chunked("/then_proxy.mrb", data)
    assert r.status == 200, server.error_log()[-3000:]
    assert r.headers["X-Backend-Length"] == str(len(data))
    assert hashlib.sha256(r.body).hexdigest() == hashlib.sha256(data).hexdigest()


def test_proxy_after_partial_read(server, backend):
    data = b"0123456789abcdefghij" * 1000
    r = server.post_chunked("/partial_then_proxy.mrb", data)
    assert r.status == 200, server.error_log()[-3000:]
    assert r.body == data


def test_body_read_in_access_checker_then_proxied(server, backend):
    # mod_mruby issue #71: the body read by an access phase script must
    # still reach the backend, whole
    data = os.urandom(5 * 1024 * 1024)
    r = server.post_chunked("/checked", data)
    assert r.status == 200, server.error_log()[-3000:]
    assert r.headers["X-Backend-Length"] == str(len(data))
    assert hashlib.sha256(r.body).hexdigest() == hashlib.sha256(data).hexdigest()
    r = server.request("POST", "/checked", body=b"this is forbidden")
    assert r.status == 403


def test_body_partly_read_in_fixups_then_proxied(server, backend):
    data = b"partial-" + b"z" * 70000
    r = server.request("POST", "/peeked", body=data)
    assert (r.status, r.body) == (200, data)
    assert r.headers["X-Backend-CL"] == str(len(data))


def test_reverse_proxy_in_translate_name(server, backend):
    data = b"through reverse_proxy"
    r = server.request("POST", "/rp", body=data)
    assert (r.status, r.body) == (200, data), server.error_log()[-3000:]


def test_ruby_after_ruby_across_internal_redirect(server):
    r = server.request("POST", "/then_ruby.mrb", body=b"whole body")
    assert r.body == b"whole body"


def test_each_script_reads_input_from_the_start(server):
    # a fixup script, and the request before an internal redirect, read
    # part of the body: the next script's Apache::Input still starts at
    # the first byte
    data = b"0123456789abcdef"
    assert server.request("POST", "/peek/input.mrb", body=data).body == data
    assert server.request("POST", "/then_input.mrb", body=data).body == data


def test_body_over_our_limit_raises_413(server):
    r = server.request("POST", "/small/body.mrb", body=b"x" * 11)
    assert r.status == 200
    assert r.body.startswith(b"413 ") and b"mrubyRequestBodyLimit" in r.body
    r = server.post_chunked("/small/body.mrb", b"y" * 100)
    assert r.body.startswith(b"413 ")
    assert server.request("POST", "/small/body.mrb", body=b"x" * 10).body == b""


def test_unrescued_limit_answers_413(server):
    r = server.request("POST", "/small/unrescued.mrb", body=b"x" * 50)
    assert r.status == 413
    assert b"not reached" not in r.body


def test_limit_request_body_with_content_length(server):
    r = server.request("POST", "/limited/body.mrb", body=b"z" * 21)
    assert r.status == 413
    assert server.request("POST", "/limited/body.mrb", body=b"z" * 20).body == b"z" * 20


def test_limit_request_body_chunked_answered_by_httpd(server):
    r = server.post_chunked("/limited/rescued.mrb", b"z" * 100)
    assert r.status == 413
    assert b"rescued" not in r.body
    r = server.post_chunked("/limited/body.mrb", b"z" * 100)
    assert r.status == 413


def test_malformed_chunked_body(server):
    r = server.raw(b"POST /limited/rescued.mrb HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                   b"Connection: close\r\n\r\nzz\r\nabc\r\n0\r\n\r\n")
    assert r.status == 400
    assert b"rescued" not in r.body


def test_client_gone_in_the_middle_of_the_body(server):
    import socket
    for path in ("/body.mrb", "/stream.mrb", "/then_proxy.mrb"):
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
            s.sendall(b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n"
                      + b"x" * 1000)
    # the server goes on serving (and stop() checks the log for crashes)
    r = server.request("POST", "/body.mrb", body=b"after")
    assert (r.status, r.body) == (200, b"after")
    server.wait_log(r"MRB00030: .*HTTPError.*could not be read")
