"""Hostile or broken input: long and many headers, NUL and invalid UTF-8,
large bodies nobody reads, clients that go away mid-response. The server
answers what httpd's limits allow, refuses the rest, and never crashes."""

import socket
import time

from httpd import module_httpd

BODY = r"""
LimitRequestFieldSize 16384
<Location /headers>
    SetHandler mruby-native-script
    mrubyHandlerCode "h = Apache::Request.new.headers_in; Apache.rputs h.to_a.size.to_s + ':' + h['X-Long'].to_s.size.to_s"
</Location>
<Location /echo>
    SetHandler mruby-native-script
    mrubyHandlerCode "r = Apache::Request.new; Apache.rputs [r.args.to_s, r.headers_in['X-Bytes'].to_s, r.uri].join('|')"
</Location>
<Location /ignore>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'did not read it'"
</Location>
<Location /flood>
    SetHandler mruby-native-script
    mrubyHandlerCode "chunk = 'z' * 65536; 400.times { Apache.rputs chunk }; $flood = ($flood || 0) + 1"
</Location>
"""

server = module_httpd("badinput", BODY)


def test_a_long_header_line(server):
    r = server.get("/headers", headers={"X-Long": "a" * 12000})
    assert (r.status, r.body) == (200, b"3:12000")  # Host, Accept-Encoding, X-Long


def test_header_line_over_the_limit_is_refused_by_httpd(server):
    r = server.get("/headers", headers={"X-Long": "a" * 20000})
    assert r.status == 400


def test_many_headers(server):
    headers = {"X-H%03d" % i: "v%d" % i for i in range(98)}
    r = server.get("/headers", headers=headers)
    assert (r.status, r.body) == (200, b"100:0")  # LimitRequestFields' 100 exactly

    too_many = {"X-H%03d" % i: "v" for i in range(150)}
    assert server.get("/headers", headers=too_many).status == 400  # LimitRequestFields 100


def test_invalid_utf8_and_escaped_nul_pass_through_as_bytes(server):
    r = server.raw(b"GET /echo?q=%00%ff\xfe HTTP/1.0\r\nX-Bytes: \xff\xfe\x80\r\n\r\n")
    assert (r.status, r.body) == (200, b"q=%00%ff\xfe|\xff\xfe\x80|/echo")


def test_raw_nul_in_a_header_is_refused_by_httpd(server):
    assert server.raw(b"GET /echo HTTP/1.0\r\nX-Bytes: a\x00b\r\n\r\n").status == 400


def test_encoded_nul_in_the_path(server):
    assert server.raw(b"GET /echo%00x HTTP/1.0\r\n\r\n").status in (400, 404)
    assert server.get("/echo").status == 200


def test_a_large_body_nobody_reads(server):
    body = b"b" * (10 * 1024 * 1024)
    r = server.request("POST", "/ignore", body=body, headers={"Content-Type": "application/octet-stream"})
    assert (r.status, r.body) == (200, b"did not read it")


def test_bad_chunk_size_in_a_body_nobody_reads(server):
    r = server.raw(b"POST /ignore HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                   b"Connection: close\r\n\r\nzz\r\nhello\r\n0\r\n\r\n")
    assert r.status in (200, 400)
    assert server.get("/ignore").status == 200


def test_client_gone_in_the_middle_of_a_response(server):
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", server.port)) as s:
            s.sendall(b"GET /flood HTTP/1.0\r\n\r\n")
            s.recv(1000)  # the first bytes of 26 MB, then hang up
    time.sleep(1)
    r = server.get("/echo?after")
    assert (r.status, r.body) == (200, b"after||/echo")
