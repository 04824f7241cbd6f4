"""Recipe docs/recipes/routing: TranslateName picks a mod_proxy balancer by
host and path; the application servers are Unix-socket backends started
in httpd's runtime directory, where the recipe's balancers look for
them."""

import json

from recipes import recipe_httpd

FILES = {"htdocs/index.html": "static home\n"}

srv = recipe_httpd("routing", "", FILES, backends=("app-1", "app-2", "search"))


def backend_view(r):
    assert r.status == 200, r
    return json.loads(r.body)


def test_prefix_is_replaced(srv):
    seen = backend_view(srv.get("/app/orders?id=7&x=%2F"))
    assert seen["backend"] in ("app-1", "app-2")
    assert seen["path"] == "/orders?id=7&x=%2F"
    assert seen["headers"]["x-forwarded-prefix"] == "/app"
    assert seen["headers"]["x-forwarded-for"] == "127.0.0.1"
    assert seen["headers"]["x-forwarded-host"].startswith("127.0.0.1")


def test_app_requests_are_spread_over_its_members(srv):
    backends = {backend_view(srv.get("/app/n%d" % i))["backend"] for i in range(40)}
    assert backends == {"app-1", "app-2"}


def test_prefix_is_kept(srv):
    seen = backend_view(srv.get("/search/q?term=mod%20mruby"))
    assert seen["backend"] == "search"
    assert seen["path"] == "/search/q?term=mod%20mruby"
    assert "x-forwarded-prefix" not in seen["headers"]


def test_client_cannot_set_the_prefix(srv):
    """X-Forwarded-Prefix reaches the application from route.rb only: one a
    client sends would make it build its links (and the pages a cache
    keeps) with a prefix of the client's choosing."""
    forged = {"X-Forwarded-Prefix": "//evil.example"}
    seen = backend_view(srv.get("/search/q", headers=forged))
    assert "x-forwarded-prefix" not in seen["headers"]
    seen = backend_view(srv.get("/v1/users", headers=dict(forged, Host="api.example.com")))
    assert "x-forwarded-prefix" not in seen["headers"]
    seen = backend_view(srv.get("/app/x", headers=forged))
    assert seen["headers"]["x-forwarded-prefix"] == "/app"


def test_route_by_host(srv):
    seen = backend_view(srv.get("/v1/users", headers={"Host": "API.example.com"}))
    assert seen["backend"] in ("app-1", "app-2")
    assert seen["path"] == "/api/v1/users"
    # On another host the same path is not routed.
    assert srv.get("/v1/users", headers={"Host": "www.example.com"}).status == 404


def test_escaped_paths_stay_escaped(srv):
    assert backend_view(srv.get("/app/a%20b/c"))["path"] == "/a%20b/c"


def test_bodies_go_through(srv):
    seen = backend_view(srv.request("POST", "/app/upload", body=b"name=value&x=1",
                                    headers={"Content-Type": "application/x-www-form-urlencoded"}))
    assert seen["method"] == "POST" and seen["body"] == "name=value&x=1"


def test_unrouted_requests_stay_with_httpd(srv):
    before = sum(b.requests for b in srv.backends.values())
    assert srv.get("/").body == b"static home\n"
    assert srv.get("/app").status == 404
    assert srv.get("/apps/x").status == 404
    assert sum(b.requests for b in srv.backends.values()) == before
