"""Recipe docs/recipes/rack-app: a link shortener as a Rack application;
links made by one request are found by every process and thread, codes do
not collide, bad input is refused, making links is bounded per address,
per day and by the size of the form."""

import collections
import http.client
import socket
import concurrent.futures
import re
import time
import urllib.parse

import pytest

from httpd import well_inside_window
from recipes import recipe_httpd, server_root

srv = recipe_httpd("rack-app")

CODE = re.compile(r"/links/[A-Za-z0-9]{6}")

# The script's limits.
LINKS_PER_CLIENT = 20
LINKS_PER_DAY = 500
MAX_BODY = 8192

# The links each server made, by day of the clock, for the daily limit.
made = collections.Counter()


def today():
    return int(time.time()) // 86400

FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def shorten(srv, url, source=None):
    r = srv.request("POST", "/links", body=urllib.parse.urlencode({"url": url}).encode(), headers=FORM,
                    source=source)
    made[server_root(srv), today()] += r.status == 201
    return r


def test_form(srv):
    r = srv.get("/links")
    assert r.status == 200 and r.headers["Content-Type"] == "text/html; charset=utf-8"
    assert b'<form method="post" action="/links">' in r.body
    assert srv.get("/links/").status == 200
    r = srv.request("HEAD", "/links")
    assert r.status == 200 and r.body == b""


def test_shorten_and_follow(srv):
    url = "https://example.com/docs/page?q=a+b&lang=en#part"
    r = shorten(srv, url)
    assert r.status == 201
    link = r.headers["Location"]
    assert CODE.fullmatch(link) and r.body == (link + "\n").encode()
    # Any process or thread finds it.
    for _ in range(30):
        r = srv.get(link)
        assert r.status == 302 and r.headers["Location"] == url


@pytest.mark.parametrize("url", ["", "example.com", "javascript:alert(1)", "ftp://example.com/f",
                                 "http://", "https://exa mple.com/", "https://example.com/" + "x" * 2000,
                                 # control characters: no Location header can carry them
                                 "https://example.com/a\x00b", "https://example.com/\x01", "https://example.com/\x7f",
                                 "https://exa\x1bmple.com/"])
def test_refused(srv, url):
    r = shorten(srv, url)
    assert r.status == 422 and r.body == b"url must be an http or https URL\n"


def test_unknown_links(srv):
    assert srv.get("/links/zzzzzz").status == 404
    assert srv.get("/links/abc").status == 404
    assert srv.get("/links/abcdefg").status == 404


def test_other_methods(srv):
    r = srv.request("PUT", "/links", body=b"x")
    assert r.status == 405 and r.headers["Allow"] == "GET, HEAD, POST"


def test_many_at_once(srv):
    urls = ["https://example.org/item/%d" % i for i in range(60)]
    # From 6 addresses, each within its hourly limit.
    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        links = list(pool.map(lambda i: shorten(srv, urls[i], source="127.0.1.%d" % (i % 6 + 1)).headers["Location"],
                              range(len(urls))))
    assert len(set(links)) == len(urls)
    for url, link in zip(urls, links):
        assert srv.get(link).headers["Location"] == url


def test_largest_form(srv):
    """The longest URL taken, every byte of it escaped, is within MAX_BODY."""
    url = "https://example.com/" + '"' * 1980
    r = shorten(srv, url, source="127.0.1.20")
    assert r.status == 201
    assert srv.get(r.headers["Location"]).headers["Location"] == url


def test_form_too_large(srv):
    body = b"url=https%3A%2F%2Fexample.com%2F" + b"a" * MAX_BODY
    r = srv.request("POST", "/links", body=body, headers=FORM, source="127.0.1.21")
    assert r.status == 413 and r.body == b"the form is larger than 8192 bytes\n"
    # Without a Content-Length: read no further than the limit.
    r = srv.post_chunked("/links", [body[:4000], body[4000:]], headers=FORM)
    assert r.status == 413


def test_links_per_client(srv):
    well_inside_window(3600, 30)  # the limits count per hour and day of the clock
    for i in range(LINKS_PER_CLIENT):
        assert shorten(srv, "https://example.com/%d" % i, source="127.0.1.30").status == 201
    r = shorten(srv, "https://example.com/more", source="127.0.1.30")
    assert r.status == 429 and r.body == b"no more than 20 links an hour from one address\n"
    assert 0 < int(r.headers["Retry-After"]) <= 3600
    # Another address is counted apart.
    assert shorten(srv, "https://example.com/other", source="127.0.1.31").status == 201


def test_links_per_day(srv):
    """All clients together make LINKS_PER_DAY links a day, then 507; the
    links made before are still followed. (Last of the file: no more links
    today.)"""
    well_inside_window(86400, 30)
    first = shorten(srv, "https://example.com/first", source="127.0.2.1")
    assert first.status == 201
    left = LINKS_PER_DAY - made[server_root(srv), today()]
    sources = ["127.0.2.%d" % (2 + i // LINKS_PER_CLIENT) for i in range(left + 5)]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(lambda a: shorten(srv, "https://example.com/x", source=a).status, sources))
    assert statuses.count(201) == left and statuses.count(507) == 5
    r = shorten(srv, "https://example.com/late", source="127.0.3.1")
    assert r.status == 507 and r.body == b"no more links today\n"
    assert 0 < int(r.headers["Retry-After"]) <= 86400
    assert srv.get(first.headers["Location"]).headers["Location"] == "https://example.com/first"


@pytest.mark.parametrize("chunked", [False, True], ids=["length", "chunked"])
def test_next_request_after_a_form_too_large(srv, chunked):
    """The rest of a refused form is never taken for a request: httpd
    closes the connection after a 413 (a status that drops it), so a
    request sent behind the form gets no answer."""
    body = b"url=" + b"a" * (4 * MAX_BODY)
    head = b"POST /links HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n"
    if chunked:
        size = b"%x\r\n" % (2 * MAX_BODY)
        data = head + b"Transfer-Encoding: chunked\r\n\r\n" + size + body[:2 * MAX_BODY] + b"\r\n" \
            + size + body[2 * MAX_BODY:] + b"\r\n0\r\n\r\n"
    else:
        data = head + b"Content-Length: %d\r\n\r\n" % len(body) + body
    data += b"GET /links/zzzzzz HTTP/1.1\r\nHost: x\r\n\r\n"
    with socket.create_connection(("127.0.0.1", srv.port), timeout=30) as sock:
        sock.sendall(data)
        first = http.client.HTTPResponse(sock, method="POST")
        first.begin()
        assert first.status == 413 and first.read() == b"the form is larger than 8192 bytes\n"
        assert first.getheader("Connection") == "close"
        assert sock.recv(1) == b""
    assert not srv.log_lines("AH00566|AH00567|request failed|invalid method")
