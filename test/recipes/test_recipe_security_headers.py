"""Recipe docs/recipes/security-headers: the header policy set in Fixups
reaches pages, error pages and redirects, once each, with the per-path
and per-site exceptions."""

import pytest

from recipes import recipe_httpd

FILES = {
    "htdocs/index.html": "home\n",
    "htdocs/embed/index.html": "a widget\n",
    "htdocs/api-docs/index.html": "<script>inline()</script>\n",
    "htdocs/errors/too-long.html": "too long\n",
}

SITE = """
DirectoryIndex index.html
<Location /private>
    Require all denied
</Location>
# httpd's answer to a request line over LimitRequestLine, served as a page:
# an internal redirect, which runs Fixups.
ErrorDocument 414 /errors/too-long.html
"""

srv = recipe_httpd("security-headers", SITE, FILES)

COMMON = {
    "Strict-Transport-Security": "max-age=86400",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "strict-origin-when-cross-origin",
    "Permissions-Policy": "camera=(), microphone=(), geolocation=()",
}
CSP = "default-src 'self'; object-src 'none'; base-uri 'self'; frame-ancestors 'none'"
EVERYWHERE = dict(COMMON, **{"X-Frame-Options": "DENY", "Content-Security-Policy": CSP})


def headers_once(r, expected):
    for name, value in expected.items():
        assert r.headers.get_all(name) == [value], (name, r.headers.get_all(name))


@pytest.mark.parametrize("path, status", [
    ("/", 200),                # through DirectoryIndex (a subrequest)
    ("/index.html", 200),
    ("/no/such/page", 404),    # httpd's error page
    ("/embed", 301),           # mod_dir's redirect to /embed/
    ("/private/x", 403),       # refused before Fixups: PostReadRequest set them
])
def test_policy_everywhere(srv, path, status):
    r = srv.get(path)
    assert r.status == status
    headers_once(r, EVERYWHERE)


def test_embeddable_pages(srv):
    r = srv.get("/embed/")
    assert r.status == 200 and r.body == b"a widget\n"
    headers_once(r, dict(COMMON, **{
        "X-Frame-Options": "SAMEORIGIN",
        "Content-Security-Policy": CSP.replace("frame-ancestors 'none'", "frame-ancestors 'self'"),
    }))


@pytest.mark.parametrize("path", [
    "/api-docs/",
    # PostReadRequest sees the path as the client wrote it, Fixups as httpd
    # mapped it: the exception holds however the path is spelt.
    "/%61pi-docs/",
    "/./api-docs/index.html",
    "/x/../api-docs/index.html",
])
def test_pages_without_a_content_security_policy(srv, path):
    r = srv.get(path)
    assert r.status == 200 and r.body == b"<script>inline()</script>\n"
    assert "Content-Security-Policy" not in r.headers
    headers_once(r, dict(COMMON, **{"X-Frame-Options": "DENY"}))


# What httpd answers while it reads a request, before the PostReadRequest
# hooks: no script runs, and the response has none of the policy (as the
# page says).
BEFORE_POST_READ_REQUEST = [
    ("no-host", b"GET / HTTP/1.1\r\n\r\n", 400),
    ("bad-host", b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400),
    ("bad-request-line", b"GET / HTTP/1.1 x\r\nHost: x\r\n\r\n", 400),
    ("field-too-long", b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 9000 + b"\r\n\r\n", 400),
    ("bad-content-length", b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n\r\n", 400),
    ("not-chunked", b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 400),
    ("unknown-expect", b"GET / HTTP/1.1\r\nHost: x\r\nExpect: something\r\n\r\n", 417),
]


@pytest.mark.parametrize("data, status", [c[1:] for c in BEFORE_POST_READ_REQUEST],
                         ids=[c[0] for c in BEFORE_POST_READ_REQUEST])
def test_answers_before_post_read_request_have_none(srv, data, status):
    r = srv.raw(data)
    assert r.status == status
    assert [name for name in EVERYWHERE if name in r.headers] == []


def test_refused_by_httpd_after_post_read_request(srv):
    """httpd refuses a scheme other than http(s) once the PostReadRequest
    hooks have run: the script has set the headers."""
    r = srv.raw(b"GET ftp://127.0.0.1/ HTTP/1.1\r\nHost: x\r\n\r\n")
    assert r.status == 400
    headers_once(r, EVERYWHERE)


def test_a_local_error_document_has_them(srv):
    """An ErrorDocument that is a local page is served by an internal
    redirect, whose Fixups run the script."""
    r = srv.raw(b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    assert (r.status, r.body) == (414, b"too long\n")
    headers_once(r, EVERYWHERE)


WITHOUT_HSTS = {name: value for name, value in EVERYWHERE.items() if name != "Strict-Transport-Security"}


@pytest.mark.parametrize("data, hsts", [
    (b"GET /index.html HTTP/1.1\r\nHost: downloads.example.com\r\n\r\n", False),
    # httpd lowers the host name and drops the port before any script runs
    (b"GET /index.html HTTP/1.1\r\nHost: DownLoads.Example.COM:8080\r\n\r\n", False),
    (b"GET http://downloads.example.com/index.html HTTP/1.1\r\nHost: x\r\n\r\n", False),
    (b"GET /index.html HTTP/1.1\r\nHost: www.example.com\r\n\r\n", True),
    (b"GET /index.html HTTP/1.1\r\nHost: downloads.example.com.evil\r\n\r\n", True),
    # HTTP/1.0 may name no host: the policy as is
    (b"GET /index.html HTTP/1.0\r\n\r\n", True),
])
def test_a_site_without_strict_transport_security(srv, data, hsts):
    r = srv.raw(data)
    assert (r.status, r.body) == (200, b"home\n")
    headers_once(r, EVERYWHERE if hsts else WITHOUT_HSTS)
    if not hsts:
        assert "Strict-Transport-Security" not in r.headers


def test_a_path_exception_on_a_site_exception(srv):
    r = srv.raw(b"GET /api-docs/ HTTP/1.1\r\nHost: downloads.example.com\r\n\r\n")
    assert r.status == 200
    assert "Strict-Transport-Security" not in r.headers
    assert "Content-Security-Policy" not in r.headers
    headers_once(r, {"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff"})
