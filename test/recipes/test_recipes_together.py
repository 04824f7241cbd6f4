"""Every recipe enabled at once, as an administrator may, with the
combining snippet of docs/recipes/README.md as the site's own
configuration: each recipe still does its job, and the scripts of one
phase listed together in a section all run."""

import json
import os
import re
import time
import urllib.parse

import pytest

from cache_servers import backend_fixture
from loopback import free_port
from recipes import RECIPES_DIR, fenced_blocks, names, read, recipe_httpd, server_root, set_setting

README = read(os.path.join(RECIPES_DIR, "README.md"))
COMBINED, = [text for lang, text in fenced_blocks(README) if lang == "apache"]

# The Redis of redis-flags.
REDIS_PORT = free_port()
redis = backend_fixture("redis", port=REDIS_PORT)

_srv = recipe_httpd(names(), COMBINED, {"htdocs/index.html": "home\n"},
                    backends=("app-1", "app-2", "search", "shop-stable", "shop-canary"),
                    settings=lambda srv: set_setting(srv, "redis_flags.rb", "PORT", REDIS_PORT))

# A client of /reports: token-auth refuses the example tokens it ships.
TOKEN = "5e" * 32
# Past redis-flags' RedisFlags::TTL: every thread has read the flags again.
FLAGS_SETTLE = 1.3
OUTSIDER = "127.0.0.2"


@pytest.fixture(scope="module")
def srv(redis, _srv):
    path = os.path.join(server_root(_srv), "mruby", "api-tokens.txt")
    with open(path + ".new", "w") as f:
        f.write("%s reports-client\n" % TOKEN)
    os.chmod(path + ".new", 0o644)
    os.rename(path + ".new", path)
    return _srv


def test_each_recipe_does_its_job(srv):
    r = srv.get("/api/status")
    assert r.status == 200 and json.loads(r.body)["status"] == "ok"
    assert r.headers["X-RateLimit-Limit"] == "60"
    assert srv.get("/reports/x").status == 401
    assert srv.get("/reports/x", headers={"Authorization": "Bearer " + TOKEN}).status == 404
    assert srv.get("/intranet/", source=OUTSIDER).status == 403
    r = srv.get("/account/")
    assert r.status == 302 and r.headers["Location"].endswith("/login")
    assert json.loads(srv.get("/app/x").body)["backend"] in ("app-1", "app-2")
    assert json.loads(srv.get("/search/x").body)["backend"] == "search"
    assert json.loads(srv.get("/shop/").body)["backend"].startswith("shop-")
    r = srv.request("POST", "/links", body=urllib.parse.urlencode({"url": "https://example.com/"}).encode(),
                    headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert r.status == 201
    assert srv.get(r.headers["Location"]).headers["Location"] == "https://example.com/"
    r = srv.get("/metrics")
    assert r.status == 200 and r.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    # the other recipes' scripts ran, and used their caches
    assert re.search(r"^mod_mruby_runs_total [1-9]", r.text, re.M)
    assert re.search(r"^mod_mruby_cache_ops_total [1-9]", r.text, re.M)
    assert srv.get("/metrics", source=OUTSIDER).status == 403


def test_security_headers_on_everything(srv):
    for path in ("/", "/api/status", "/reports/x", "/app/x", "/shop/", "/links", "/metrics", "/nothing"):
        assert srv.get(path).headers.get_all("X-Content-Type-Options") == ["nosniff"], path


def test_combined_access_checkers(srv):
    """Under /api the section names both AccessChecker scripts: the
    scanner is refused there too, and the limit is still counted."""
    assert srv.get("/api/status", headers={"User-Agent": "sqlmap/1.7"}).status == 403
    # Elsewhere under a Location with its own AccessChecker, only that one.
    assert srv.get("/reports/x", headers={"User-Agent": "sqlmap/1.7"}).status == 401


def test_maintenance_covers_everything(srv):
    flag = os.path.join(server_root(srv), "mruby", "maintenance.on")
    with open(flag, "w") as f:
        f.write("back soon\n")
    try:
        for path in ("/", "/api/status", "/app/x", "/shop/", "/links"):
            assert srv.get(path, source=OUTSIDER).status == 503, path
        assert srv.get("/api/status").status == 200
    finally:
        os.unlink(flag)
    assert srv.get("/", source=OUTSIDER).status == 200


def test_redis_flags_on_every_path(srv, redis):
    """The flags reach the balancers' backends; the Redis kill switch
    covers every recipe's paths, and administrators still get through."""
    redis.cli("HSET", "flags", "new-checkout", "on")
    try:
        time.sleep(FLAGS_SETTLE)
        assert json.loads(srv.get("/app/x").body)["headers"]["x-feature-new-checkout"] == "on"
        redis.cli("HSET", "flags", "maintenance", "on")
        time.sleep(FLAGS_SETTLE)
        for path in ("/", "/api/status", "/app/x", "/shop/", "/links", "/reports/x"):
            r = srv.get(path, source=OUTSIDER)
            assert r.status == 503 and b"Down for maintenance" in r.body, path
        assert srv.get("/api/status").status == 200
        assert srv.get("/flags").text == "maintenance on\nnew-checkout on\n"
    finally:
        redis.cli("DEL", "flags")
    time.sleep(FLAGS_SETTLE)
    assert srv.get("/", source=OUTSIDER).status == 200
