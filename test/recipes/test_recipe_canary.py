"""Recipe docs/recipes/canary: a cookie splits the users of /shop between
two releases (Unix-socket backends); the split is random for new users,
sticky afterwards, and testers can switch."""

import json

from httpd import SINGLE_WORKER
from recipes import recipe_httpd

FILES = {"htdocs/index.html": "home\n"}

srv = recipe_httpd("canary", "", FILES, backends=("shop-stable", "shop-canary"))


# In the script's TESTERS (the tests' default address), and not.
TESTER = "127.0.0.1"
OTHER = "127.0.0.2"


def shop(srv, path="/shop/", cookie=None, source=None):
    r = srv.get(path, headers={"Cookie": "shop_release=" + cookie} if cookie else {}, source=source)
    assert r.status == 200, r
    return r, json.loads(r.body)["backend"]


def set_cookie(r):
    return r.headers.get_all("Set-Cookie") or []


def test_new_users_are_split(srv):
    counts = {"shop-stable": 0, "shop-canary": 0}
    for _ in range(300):
        r, backend = shop(srv)
        counts[backend] += 1
        release = backend[len("shop-"):]
        cookie, = set_cookie(r)
        assert cookie.startswith("shop_release=%s;" % release)
        for attribute in ("Path=/shop", "Max-Age=2592000", "HttpOnly", "SameSite=Lax"):
            assert attribute in cookie
        assert r.headers["Vary"] == "Cookie"
    # 10 %: 30 expected of 300; the bounds are 5 standard deviations away.
    assert 5 <= counts["shop-canary"] <= 60, counts


def test_users_stay_on_their_release(srv):
    for release in ("stable", "canary"):
        for _ in range(20):
            r, backend = shop(srv, cookie=release)
            assert backend == "shop-" + release
            assert set_cookie(r) == []


def test_testers_switch(srv):
    r, backend = shop(srv, "/shop/?release=canary", cookie="stable", source=TESTER)
    assert backend == "shop-canary"
    assert set_cookie(r)[0].startswith("shop_release=canary;")
    r, backend = shop(srv, "/shop/?release=stable", cookie="canary", source=TESTER)
    assert backend == "shop-stable"
    assert set_cookie(r)[0].startswith("shop_release=stable;")
    # An unknown release is not one.
    r, backend = shop(srv, "/shop/?release=beta", cookie="stable", source=TESTER)
    assert backend == "shop-stable" and set_cookie(r) == []


def test_others_cannot_choose(srv):
    """?release= from an address that is not in TESTERS is ignored: users
    stay on their release, new users are drawn as any other."""
    for cookie in ("stable", "canary"):
        asked = "canary" if cookie == "stable" else "stable"
        r, backend = shop(srv, "/shop/?release=" + asked, cookie=cookie, source=OTHER)
        assert backend == "shop-" + cookie and set_cookie(r) == []
    canary = 0
    for _ in range(100):
        r, backend = shop(srv, "/shop/?release=canary", source=OTHER)
        assert set_cookie(r)[0].startswith("shop_release=%s;" % backend[len("shop-"):])
        canary += backend == "shop-canary"
    # 10 % drawn, as for anyone: 10 expected of 100, 100 if the query counted.
    assert canary <= 40, canary


def test_a_bad_cookie_is_replaced(srv):
    r, backend = shop(srv, cookie="nightly")
    assert set_cookie(r)[0].startswith("shop_release=%s;" % backend[len("shop-"):])


def test_paths_and_queries_reach_the_backend(srv):
    r = srv.get("/shop/cart?item=3&qty=2", headers={"Cookie": "shop_release=stable"})
    assert json.loads(r.body)["path"] == "/shop/cart?item=3&qty=2"


def test_the_rest_of_the_site_is_not_split(srv):
    r = srv.get("/")
    assert r.body == b"home\n" and set_cookie(r) == []


def test_every_vm_draws_its_own_numbers(make_httpd, mpm):
    """mod_mruby seeds each VM's generator (docs/ruby-api.md): here one
    thread whose VM is replaced after each run."""
    first = make_httpd("rand", mpm, """
mrubyMaxRequestsPerVM 1
<Location /rand>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs Array.new(5) { rand(1000000) }.join(',')"
</Location>
""", mpm_conf=SINGLE_WORKER[mpm]).start()
    draws = {first.get("/rand").body for _ in range(4)}
    assert len(draws) == 4

