"""Recipe docs/recipes/signed-session: a cookie signed with HMAC-SHA256
given at /login (after httpd's Basic authentication), checked by an
AccessChecker under /account, taken back at /logout. The tests make
cookies of their own with Python's hmac: valid ones let the user in;
tampered, expired, unsigned ones, and those of an unknown or retired
key, are sent to /login; a new key signs while the old one still checks."""

import base64
import hashlib
import hmac
import os
import re
import subprocess
import time

import pytest

import system_apache
from httpd import SINGLE_WORKER
from recipes import recipe_httpd, server_root, set_setting

SITE = """
<Location /account/whoami>
    SetHandler mruby-native-script
    mrubyHandlerCode "r = Apache::Request.new; Apache.rputs [r.user, r.ap_auth_type].join(' ')"
</Location>
"""

FILES = {"htdocs/account/index.html": "your account\n", "htdocs/index.html": "home\n"}



def quick_refresh(srv):
    set_setting(srv, "session.rb", "REFRESH", 0.5)


_srv = recipe_httpd("signed-session", "DirectoryIndex index.html\n" + SITE, FILES, settings=quick_refresh)
# One worker thread in all: each request finds the keys the one VM read.
_one = recipe_httpd("signed-session", SITE, mpm_conf=SINGLE_WORKER, settings=quick_refresh)

KEY_A = bytes(range(32))
KEY_B = bytes(range(100, 140))
PASSWORD = "correct horse"

# The script reads the keys again every REFRESH seconds (2 as shipped):
# the tests set 0.5, and wait twice that for every thread to have read it.
REFRESH = 1.0


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def cookie(user, expires, kid, key):
    data = "%s.%d.%s" % (b64(user.encode()), expires, kid)
    return data + "." + b64(hmac.new(key, data.encode(), hashlib.sha256).digest())


def mruby_path(srv, name):
    return os.path.join(server_root(srv), "mruby", name)


def write_keys(srv, lines):
    """As the page advises: a new file renamed over the old one."""
    path = mruby_path(srv, "session-keys.txt")
    with open(path + ".new", "w") as f:
        f.write("# the tests' keys\n" + "".join("%s %s\n" % (kid, key.hex()) for kid, key in lines))
    os.chmod(path + ".new", 0o644)
    os.rename(path + ".new", path)


def set_up(srv):
    """What the page asks of the administrator: a user, a key."""
    users = mruby_path(srv, "session-users")
    subprocess.run(["htpasswd", "-c", "-B", "-b", users, "alice", PASSWORD], check=True,
                   capture_output=True)
    os.chmod(users, 0o644)
    if hasattr(srv, "installed") and users not in srv.installed:
        srv.installed.append(users)  # the system Apache's stop removes it with the recipe's files
    write_keys(srv, [("a", KEY_A)])
    return srv


@pytest.fixture(scope="module")
def srv(_srv):
    return set_up(_srv)


@pytest.fixture(scope="module")
def one(_one):
    return set_up(_one)


def basic(user, password):
    return {"Authorization": "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode()}


def with_cookie(value):
    return {"Cookie": "theme=dark; session=%s" % value}


def refused(srv, value, why):
    r = srv.get("/account/whoami", headers=with_cookie(value))
    assert r.status == 302 and r.headers["Location"].endswith("/login"), (value, r)
    # the bad cookie is taken back
    assert re.match(r"session=; Path=/; Max-Age=0", r.headers["Set-Cookie"]), r.headers["Set-Cookie"]
    if why:
        srv.wait_log(r"\[mruby:warn\].*session\.rb:\d+: %s for /account/whoami: sent to /login" % why)


def test_no_cookie_goes_to_login(srv):
    r = srv.get("/account/")
    assert r.status == 302 and r.headers["Location"].endswith("/login")
    assert "Set-Cookie" not in r.headers
    assert srv.ok("/").body == b"home\n"  # elsewhere, nothing is asked


def test_login_gives_a_signed_cookie(srv):
    assert srv.get("/login").status == 401
    assert srv.get("/login", headers=basic("alice", "wrong")).status == 401
    before = int(time.time())
    r = srv.get("/login", headers=basic("alice", PASSWORD))
    assert r.status == 303 and r.headers["Location"].endswith("/account/")
    set_cookie = r.headers["Set-Cookie"]
    m = re.fullmatch(r"session=([^;]+); Path=/; Max-Age=28800; Secure; HttpOnly; SameSite=Lax", set_cookie)
    assert m, set_cookie
    value = m.group(1)
    user64, expires, kid, _ = value.split(".")
    assert base64.urlsafe_b64decode(user64 + "==") == b"alice" and kid == "a"
    assert before + 28800 <= int(expires) <= int(time.time()) + 28800
    assert value == cookie("alice", int(expires), "a", KEY_A)
    r = srv.ok("/account/whoami", headers=with_cookie(value))
    assert r.body == b"alice session"
    # a directory index, found through a subrequest, passes the same check
    assert srv.ok("/account/", headers=with_cookie(value)).body == b"your account\n"


def test_cookie_made_with_the_key_is_accepted(srv):
    value = cookie("bob@example.com", int(time.time()) + 60, "a", KEY_A)
    assert srv.ok("/account/whoami", headers=with_cookie(value)).body == b"bob@example.com session"


def test_tampered_cookies_are_refused(srv):
    good = cookie("bob", int(time.time()) + 60, "a", KEY_A)
    user64, expires, kid, mac = good.split(".")
    why = "a session cookie whose signature does not match"
    refused(srv, ".".join([b64(b"admin"), expires, kid, mac]), why)  # another user
    refused(srv, ".".join([user64, str(int(expires) + 3600), kid, mac]), why)  # a later end
    flipped = mac[:-2] + ("A" if mac[-2] != "A" else "B") + mac[-1]
    refused(srv, ".".join([user64, expires, kid, flipped]), why)
    refused(srv, ".".join([user64, expires, kid, mac[:-1]]), why)  # cut short
    refused(srv, ".".join([user64, expires, kid, ""]), why)
    refused(srv, cookie("bob", int(time.time()) + 60, "a", KEY_B), why)  # another key, same id


def test_unsigned_cookies_are_refused(srv):
    why = "a session cookie that is not signed"
    refused(srv, "bob", why)
    refused(srv, b64(b"bob") + "." + str(int(time.time()) + 60), why)
    refused(srv, cookie("bob", int(time.time()) + 60, "a", KEY_A) + ".x", why)
    refused(srv, cookie("bob", int(time.time()) + 60, "nokey", KEY_A), "a session cookie of an unknown key")


def test_expired_cookie_is_refused(srv):
    refused(srv, cookie("bob", int(time.time()) - 1, "a", KEY_A), "an expired session cookie")


def test_logout_takes_the_cookie_back(srv):
    r = srv.get("/logout", headers=with_cookie(cookie("bob", int(time.time()) + 60, "a", KEY_A)))
    assert r.status == 303
    assert r.headers["Set-Cookie"].startswith("session=; Path=/; Max-Age=0")


def test_key_rotation(srv):
    """A new key first signs the new cookies; the old one still checks
    those it signed until it is removed."""
    old = cookie("carol", int(time.time()) + 600, "a", KEY_A)
    try:
        write_keys(srv, [("b", KEY_B), ("a", KEY_A)])
        time.sleep(REFRESH)
        r = srv.get("/login", headers=basic("alice", PASSWORD))
        new = re.match(r"session=([^;]+);", r.headers["Set-Cookie"]).group(1)
        assert new.split(".")[2] == "b"
        for _ in range(4):  # several threads
            assert srv.ok("/account/whoami", headers=with_cookie(new)).body == b"alice session"
            assert srv.ok("/account/whoami", headers=with_cookie(old)).body == b"carol session"
        write_keys(srv, [("b", KEY_B)])
        time.sleep(REFRESH)
        refused(srv, old, "a session cookie of an unknown key")
        assert srv.ok("/account/whoami", headers=with_cookie(new)).body == b"alice session"
    finally:
        write_keys(srv, [("a", KEY_A)])
        time.sleep(REFRESH)


# The tests below use a second server of the recipe beside the first; the
# system Apache of script/test-deb is one server at a time, so they run on
# the test servers only.
second_server = pytest.mark.skipif(system_apache.enabled(),
                                   reason="a second server beside the first: not with the one system Apache")


@second_server
def test_no_key_at_all_denies(_one):
    """The file as the recipe ships it has no key: a cookie to check makes
    the request fail (500, logged), nobody gets in."""
    value = cookie("eve", int(time.time()) + 60, "a", KEY_A)
    _one.expect("/account/whoami", 500, r"session-keys\.txt has no key: add one \(the file says how\)",
                headers=with_cookie(value))


@second_server
def test_keys_file_without_a_key(one):
    """A file left with no valid key: the keys read before stay in use,
    and the log says why."""
    value = cookie("dave", int(time.time()) + 60, "a", KEY_A)
    assert one.ok("/account/whoami", headers=with_cookie(value)).body == b"dave session"
    try:
        write_keys(one, [("a", b"short")])
        time.sleep(REFRESH)
        assert one.ok("/account/whoami", headers=with_cookie(value)).body == b"dave session"
        one.wait_log(r"\[mruby:error\].*session-keys\.txt: a: a key is 64 hex digits or more: "
                     r"keeping the keys read before")
        os.unlink(mruby_path(one, "session-keys.txt"))
        time.sleep(REFRESH)
        assert one.ok("/account/whoami", headers=with_cookie(value)).body == b"dave session"
        one.wait_log(r"\[mruby:error\].*: open .*session-keys\.txt: keeping the keys read before")
    finally:
        write_keys(one, [("a", KEY_A)])
