"""Recipe docs/recipes/security-headers: the header policy set in Fixups
reaches pages, error pages and redirects, once each, with the per-path
exceptions."""

import pytest

from recipes import recipe_httpd

FILES = {
    "htdocs/index.html": "home\n",
    "htdocs/embed/index.html": "a widget\n",
    "htdocs/api-docs/index.html": "<script>inline()</script>\n",
}

SITE = """
DirectoryIndex index.html
<Location /private>
    Require all denied
</Location>
"""

srv = recipe_httpd("security-headers", SITE, FILES)

COMMON = {
    "Strict-Transport-Security": "max-age=31536000; includeSubDomains",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "strict-origin-when-cross-origin",
    "Permissions-Policy": "camera=(), microphone=(), geolocation=()",
}
CSP = "default-src 'self'; object-src 'none'; base-uri 'self'; frame-ancestors 'none'"


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
    headers_once(r, dict(COMMON, **{"X-Frame-Options": "DENY", "Content-Security-Policy": CSP}))


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
