"""Recipe docs/recipes/rack-app: a link shortener as a Rack application;
links made by one request are found by every process and thread, codes do
not collide, bad input is refused."""

import concurrent.futures
import re
import urllib.parse

import pytest

from recipes import recipe_httpd

srv = recipe_httpd("rack-app")

CODE = re.compile(r"/links/[A-Za-z0-9]{6}")


def shorten(srv, url):
    return srv.request("POST", "/links", body=urllib.parse.urlencode({"url": url}).encode(),
                       headers={"Content-Type": "application/x-www-form-urlencoded"})


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
    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        links = list(pool.map(lambda u: shorten(srv, u).headers["Location"], urls))
    assert len(set(links)) == len(urls)
    for url, link in zip(urls, links):
        assert srv.get(link).headers["Location"] == url
