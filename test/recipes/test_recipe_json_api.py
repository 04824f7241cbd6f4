"""Recipe docs/recipes/json-api: the endpoints answer JSON that a JSON
parser reads back exactly, strings with quotes, backslashes, control
characters and UTF-8 included; unknown paths and methods get JSON errors."""

import json
import re
import urllib.parse

import pytest

from recipes import recipe_httpd

srv = recipe_httpd("json-api")

TRICKY = [
    'say "hi"',
    "back\\slash",
    "line\nbreak\ttab\rreturn",
    "bell\x07nul-less\x01\x1f\x7f",
    "</script><script>alert(1)</script>",
    "caf\u00e9 \u65e5\u672c \U0001F600",
    "",
]


def api(srv, path, method="GET", **kw):
    r = srv.request(method, path, **kw)
    assert r.headers["Content-Type"] == "application/json; charset=utf-8"
    assert r.headers["Cache-Control"] == "no-store"
    return r, json.loads(r.body)


def test_status_is_for_the_monitors(srv):
    """Another address (127.0.0.2: another client) learns nothing of the
    server."""
    r, doc = api(srv, "/api/status", source="127.0.0.2")
    assert r.status == 403 and doc == {"error": "forbidden"}
    r = srv.request("HEAD", "/api/status", source="127.0.0.2")
    assert r.status == 403 and r.body == b""


def test_status(srv):
    r, doc = api(srv, "/api/status")
    assert r.status == 200
    assert doc["status"] == "ok"
    assert doc["server"].startswith("Apache/2.4")
    if srv.mpm != "system":
        assert doc["mpm"] == srv.mpm and doc["threaded"] == (srv.mpm != "prefork")
    assert isinstance(doc["uptime"], (int, float)) and doc["uptime"] >= 0
    assert doc["workers"]["busy"] >= 1 and doc["workers"]["idle"] >= 0
    assert len(doc["load"]) == 3 and all(isinstance(x, (int, float)) for x in doc["load"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", doc["time"])


@pytest.mark.parametrize("text", TRICKY)
def test_strings_survive(srv, text):
    r, doc = api(srv, "/api/echo?text=" + urllib.parse.quote(text, safe=""))
    assert doc["query"] == {"text": [text]}
    assert doc["path"] == "/api/echo" and doc["method"] == "GET"


def test_escapes_on_the_wire(srv):
    r = srv.get("/api/echo?t=" + urllib.parse.quote('"\\\n\x01\x7f</\u2028'))
    # JSON's escapes, and script_safe's: "/" and the two line separators
    # that JavaScript does not allow in a string
    assert b'"t":["\\"\\\\\\n\\u0001\x7f<\\/\\u2028"]' in r.body
    # UTF-8 goes out as it is, not as \u escapes.
    assert "\u00e9".encode() in srv.get("/api/echo?t=%C3%A9").body


def test_a_request_that_is_not_utf8_is_refused_in_json(srv):
    r, doc = api(srv, "/api/echo?t=%FF")
    assert r.status == 400 and doc == {"error": "the request is not UTF-8"}


def test_repeated_fields_and_forms(srv):
    body = urllib.parse.urlencode([("a", "1"), ("a", "2"), ("b", "x y")]).encode()
    r, doc = api(srv, "/api/echo?q=1&q=2", "POST", body=body,
                 headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert r.status == 200
    # httpd keeps the last value of a repeated query field; forms keep all.
    assert doc["query"] == {"q": ["2"]}
    assert doc["form"] == {"a": ["1", "2"], "b": ["x y"]}
    assert doc["client"] == "127.0.0.1" and doc["user_agent"] is None


def test_form_with_a_file(srv):
    """A file field is echoed as its name, type and size."""
    body = (b'--XyZ\r\nContent-Disposition: form-data; name="note"\r\n\r\nhello\r\n'
            b'--XyZ\r\nContent-Disposition: form-data; name="f"; filename="a\\"b.txt"\r\n'
            b'Content-Type: text/plain\r\n\r\nfile body\r\n--XyZ--\r\n')
    r, doc = api(srv, "/api/echo", "POST", body=body,
                 headers={"Content-Type": "multipart/form-data; boundary=XyZ"})
    assert r.status == 200
    assert doc["form"] == {"note": ["hello"],
                           "f": [{"filename": 'a"b.txt', "content_type": "text/plain", "size": 9}]}


def test_bodies_are_bounded(srv):
    """/api/echo reads at most 64 KB of a body (an 8 MB form took seconds
    of a worker's time to echo); larger ones, and forms it cannot read,
    get JSON errors."""
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    r, doc = api(srv, "/api/echo", "POST", body=b"a=" + b"x" * 65000, headers=form)
    assert r.status == 200 and len(doc["form"]["a"][0]) == 65000
    r, doc = api(srv, "/api/echo", "POST", body=b"a=" + b"%01" * 40000, headers=form)
    assert r.status == 413 and doc == {"error": "request body too large"}
    r, doc = api(srv, "/api/echo", "POST", body=b"a=1", headers={"Content-Type": "multipart/form-data"})
    assert r.status == 400 and doc == {"error": "bad request"}


def test_not_found(srv):
    r, doc = api(srv, "/api/nothing")
    assert r.status == 404 and doc == {"error": "not found", "path": "/api/nothing"}


def test_method_not_allowed(srv):
    r, doc = api(srv, "/api/status", "DELETE")
    assert r.status == 405 and r.headers["Allow"] == "GET, HEAD"
    assert doc == {"error": "method not allowed", "allowed": ["GET", "HEAD"]}


def test_head(srv):
    r = srv.request("HEAD", "/api/status")
    assert r.status == 200 and r.body == b""
