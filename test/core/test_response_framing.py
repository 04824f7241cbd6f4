"""What a script cannot do to the framing of the response on the
connection: a Content-Length of its own, Transfer-Encoding and the other
hop-by-hop headers, a 1xx status as the final answer. Each was a way to
make a keep-alive client read the rest of one answer as the next one
(response splitting); checked with a second request pipelined behind."""

import socket

import pytest

from httpd import module_httpd

BIG = 20000

BODY = r"""
<Location /wrong-length>
    SetHandler mruby-native-script
    mrubyHandlerCode "r = Apache::Request.new; r.headers_out['Content-Length'] = r.args || '3'; Apache.rputs 'x' * %(big)d"
</Location>
<Location /wrong-length-small>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache::Request.new.err_headers_out['Content-Length'] = '3'; Apache.rputs 'twelve bytes'"
</Location>
<Location /set>
    SetHandler mruby-native-script
    mrubyHandlerCode "r = Apache::Request.new; name, value = r.args.split('=', 2); begin; r.headers_out[name] = value; Apache.rputs 'set'; rescue ArgumentError => e; Apache.rputs e.message; end"
</Location>
<Location /add-err>
    SetHandler mruby-native-script
    mrubyHandlerCode "r = Apache::Request.new; begin; r.err_headers_out.add('Transfer-Encoding', 'chunked'); Apache.rputs 'added'; rescue ArgumentError => e; Apache.rputs e.message; end"
</Location>
<Location /close>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache::Request.new.headers_out['Connection'] = 'close'; Apache.rputs 'closing'"
</Location>
<Location /status>
    SetHandler mruby-native-script
    mrubyHandlerCode "r = Apache::Request.new; begin; r.status = r.args.to_i; rescue ArgumentError => e; Apache.rputs e.message; end"
</Location>
<Location /return>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'body'; Apache.return Apache::Request.new.args.to_i"
</Location>
<Location /rack-status>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache::Rack.run(lambda { |env| [101, {'Upgrade' => 'x'}, ['switched']] })"
</Location>
<Location /rack-framing>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache::Rack.run(lambda { |env| [200, {'Content-Length' => '3', 'Transfer-Encoding' => 'chunked', 'Connection' => 'keep-alive', 'X-Kept' => 'yes'}, ['y' * %(big)d]] })"
</Location>
<Location /fast>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'fast'"
</Location>
""" % {"big": BIG}

server = module_httpd("framing", BODY)


def read_response(f):
    """One response from the file f, framed as HTTP/1.1 says: (status,
    headers with lower-case names, body)."""
    status = int(f.readline().split()[1])
    headers = {}
    while True:
        line = f.readline()
        assert line, "the connection ended inside the headers"
        if line == b"\r\n":
            break
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding") == "chunked":
        body = b""
        while True:
            size = int(f.readline().split(b";")[0], 16)
            chunk = f.read(size + 2)
            if size == 0:
                break
            body += chunk[:-2]
    elif "content-length" in headers:
        body = f.read(int(headers["content-length"]))
    else:
        body = f.read()
    return status, headers, body


def pipelined(server, first, then="/fast"):
    """GETs first and then on one keep-alive connection, the second sent
    before the first is answered; both answers as HTTP/1.1 frames them."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\n\r\nGET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                   % (first, then)).encode())
        f = s.makefile("rb")
        answers = [read_response(f)]
        if answers[0][1].get("connection") == "close":
            answers.append((None, {}, None))  # httpd ends the connection after a 500
        else:
            answers.append(read_response(f))
        assert f.read() == b""  # nothing left over
    return answers


@pytest.mark.parametrize("declared", ["3", "0", "25000", "20000"])
def test_a_scripts_content_length_is_replaced_by_the_bodys(server, declared):
    (st, h, body), second = pipelined(server, "/wrong-length?" + declared)
    assert st == 200
    assert body == b"x" * BIG
    assert h.get("content-length", str(BIG)) == str(BIG)
    assert second[0] == 200 and second[2] == b"fast"


def test_a_content_length_in_err_headers_out_too(server):
    (st, h, body), second = pipelined(server, "/wrong-length-small")
    assert (st, body, h["content-length"]) == (200, b"twelve bytes", "12")
    assert second[2] == b"fast"


@pytest.mark.parametrize("header", ["Transfer-Encoding=chunked", "TE=trailers", "Trailer=X-Sum",
                                    "Upgrade=websocket", "Keep-Alive=timeout=5", "Proxy-Connection=keep-alive",
                                    "transfer-encoding=gzip"])
def test_headers_that_frame_the_response_are_refused(server, header):
    name = header.split("=")[0]
    (st, h, body), second = pipelined(server, "/set?" + header)
    assert st == 200
    assert body.decode() == ("Apache::Headers_out: %s is httpd's to send: it frames the response on "
                             "the connection" % name)
    assert name.lower() not in h or name.lower() == "keep-alive"
    assert second[2] == b"fast"


def test_err_headers_out_add_is_refused_the_same(server):
    r = server.get("/add-err")
    assert r.body == b"Apache::Err_headers_out: Transfer-Encoding is httpd's to send: it frames the " \
                     b"response on the connection"


@pytest.mark.parametrize("value, answer", [
    ("Connection=keep-alive", 'Apache::Headers_out: Connection may only be "close": httpd manages the connection'),
    ("Connection=upgrade", 'Apache::Headers_out: Connection may only be "close": httpd manages the connection'),
    ("Content-Length=abc", "Apache::Headers_out: Content-Length must be a decimal number of bytes"),
    ("Content-Length=-1", "Apache::Headers_out: Content-Length must be a decimal number of bytes"),
    ("Content-Length=", "Apache::Headers_out: Content-Length must be a decimal number of bytes"),
    ("Content-Length=12", "set"),
    ("X-Other=fine", "set"),
])
def test_what_connection_and_content_length_may_be(server, value, answer):
    r = server.get("/set?" + value)
    assert (r.status, r.text) == (200, answer)


def test_connection_close_is_honoured(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(b"GET /close HTTP/1.1\r\nHost: x\r\n\r\nGET /fast HTTP/1.1\r\nHost: x\r\n\r\n")
        f = s.makefile("rb")
        st, h, body = read_response(f)
        assert (st, body, h["connection"]) == (200, b"closing", "close")
        assert f.read() == b""  # httpd closed: the second request is not answered


@pytest.mark.parametrize("status", [100, 101, 103, 199])
def test_a_1xx_status_is_refused(server, status):
    (st, h, body), second = pipelined(server, "/status?%d" % status)
    assert st == 200
    assert body.decode() == ("Apache::Request#status=: %d is not a final status (1xx are httpd's to send)"
                             % status)
    assert second[2] == b"fast"


@pytest.mark.parametrize("status", [100, 101, 103])
def test_apache_return_of_a_1xx_status_is_an_error(server, status):
    mark = len(server.error_log())
    (st, h, body), second = pipelined(server, "/return?%d" % status)
    assert (st, h["connection"]) == (500, "close")
    assert body.startswith(b"<!DOCTYPE")  # httpd's error page, not the script's output
    server.wait_log(r"MRB00030: Handler script .* raised ArgumentError .*Apache.return: %d is not a final status"
                    % status)
    assert "MRB00030" in server.error_log()[mark:]


def test_rack_1xx_status_is_an_error(server):
    (st, h, body), second = pipelined(server, "/rack-status")
    assert (st, h["connection"]) == (500, "close")
    assert b"switched" not in body
    server.wait_log(r"Rack response status 101 is not an HTTP status")


def test_rack_framing_headers_are_httpds(server):
    (st, h, body), second = pipelined(server, "/rack-framing")
    assert (st, body, h["x-kept"]) == (200, b"y" * BIG, "yes")
    assert h.get("content-length", str(BIG)) == str(BIG)
    assert h.get("connection") != "keep-alive" or h.get("transfer-encoding") is None
    assert second[2] == b"fast"
