"""Recipe docs/recipes/token-auth: bearer tokens checked in an
AccessChecker against api-tokens.txt; the client's name becomes the user,
subrequests pass the same check; the file is re-read without a reload."""

import os
import time

import pytest

import system_apache
from httpd import SINGLE_WORKER
from recipes import Recipe, recipe_httpd, replace_file, server_root, set_setting

# What the request looks like to the handler behind the check.
SITE = """
<Location /reports/whoami>
    SetHandler mruby-native-script
    mrubyHandlerCode "r = Apache::Request.new; Apache.rputs [r.user, r.ap_auth_type].join(' ')"
</Location>
"""

FILES = {"htdocs/reports/daily.csv": "day,visits\n2026-01-01,42\n", "htdocs/reports/index.html": "reports\n",
         "htdocs/index.html": "home\n"}



def quick_refresh(srv):
    set_setting(srv, "token_auth.rb", "REFRESH", 0.5)


_srv = recipe_httpd("token-auth", "DirectoryIndex index.html\n" + SITE, FILES, settings=quick_refresh)
# One worker thread in all: each request finds the tokens that the one VM
# read before (a thread that has read no token yet has none to keep).
one = recipe_httpd("token-auth", SITE, mpm_conf=SINGLE_WORKER, settings=quick_refresh)

# The recipe refuses the example tokens it ships: the tests have their own.
CLIENTS = {"dashboard": "d1" * 32, "nightly-export": "e2" * 32}
TOKENS = "# the tests' clients\n" + "".join("%s %s\n" % (t, n) for n, t in CLIENTS.items())
DASHBOARD = CLIENTS["dashboard"]

# The script reads the file again every REFRESH seconds (2 as shipped):
# the tests set 0.5, and wait twice that for every thread to have read it.
REFRESH = 1.0

SHIPPED = Recipe("token-auth").files["api-tokens.txt"]
EXAMPLES = dict(line.split()[::-1] for line in SHIPPED.splitlines() if line and not line.startswith("#"))


def tokens_path(srv):
    return os.path.join(server_root(srv), "mruby", "api-tokens.txt")


def replace_tokens(srv, text):
    replace_file(tokens_path(srv), text)


@pytest.fixture(scope="module")
def srv(_srv):
    replace_tokens(_srv, TOKENS)  # before any request reads the file
    return _srv


def bearer(token):
    return {"Authorization": "Bearer " + token}


def test_no_token(srv):
    r = srv.get("/reports/daily.csv")
    assert r.status == 401
    assert r.headers["WWW-Authenticate"] == 'Bearer realm="reports"'
    assert b"day,visits" not in r.body  # not "42": the error page names the port


def test_other_schemes(srv):
    for value in ("Basic ZGFzaGJvYXJkOnNlY3JldA==", "Bearer", "Bearer   ", DASHBOARD):
        r = srv.get("/reports/daily.csv", headers={"Authorization": value})
        assert r.status == 401, value
        assert r.headers["WWW-Authenticate"] == 'Bearer realm="reports"'


def test_wrong_token(srv):
    r, _ = srv.expect("/reports/daily.csv", 401,
                      r"\[mruby:warn\].*MRB00400: .*token_auth\.rb:\d+: "
                      r"invalid bearer token for /reports/daily\.csv",
                      headers=bearer(DASHBOARD[:-1] + "0"))
    assert r.headers["WWW-Authenticate"] == 'Bearer realm="reports", error="invalid_token"'
    # The log never shows the token itself.
    assert DASHBOARD[:-1] not in srv.error_log()
    # A known token's first part, or a known token and more, are no token.
    for given in (DASHBOARD[:32], DASHBOARD[:-1], DASHBOARD + "0", DASHBOARD + DASHBOARD):
        assert srv.get("/reports/daily.csv", headers=bearer(given)).status == 401, given


def test_right_token(srv):
    r = srv.get("/reports/daily.csv", headers=bearer(DASHBOARD))
    assert r.status == 200 and r.body == b"day,visits\n2026-01-01,42\n"
    # A lower-case scheme and extra blanks are fine.
    assert srv.get("/reports/daily.csv", headers={"Authorization": "bearer  " + DASHBOARD}).status == 200


def test_handler_sees_the_user(srv):
    r = srv.get("/reports/whoami", headers=bearer(CLIENTS["nightly-export"]))
    assert r.body == b"nightly-export Bearer"


def test_subrequests(srv):
    """mod_dir looks up index.html with a subrequest, checked again."""
    assert srv.get("/reports/", headers=bearer(DASHBOARD)).body == b"reports\n"
    assert srv.get("/reports/").status == 401


def test_other_paths_are_open(srv):
    r = srv.get("/")
    assert (r.status, r.body) == (200, b"home\n")


def test_tokens_file_is_read_again(srv):
    """A new token works and a removed one stops working within the
    script's REFRESH, on every thread, without a reload."""
    path = os.path.join(server_root(srv), "mruby", "api-tokens.txt")
    with open(path) as f:
        original = f.read()
    fresh = "7" * 64
    try:
        with open(path, "w") as f:
            f.write("%s ci-runner\n" % fresh)
        time.sleep(REFRESH)
        for _ in range(20):
            assert srv.get("/reports/whoami", headers=bearer(fresh)).body == b"ci-runner Bearer"
            assert srv.get("/reports/whoami", headers=bearer(DASHBOARD)).status == 401
    finally:
        with open(path, "w") as f:
            f.write(original)
    time.sleep(REFRESH)
    assert srv.get("/reports/daily.csv", headers=bearer(DASHBOARD)).status == 200


def write_in_place(srv, text):
    """As `>` or an editor writing over the file: truncated, then written."""
    with open(tokens_path(srv), "w") as f:
        f.write(text)


@pytest.mark.skipif(system_apache.enabled(), reason="the system Apache runs many threads, each with its tokens")
def test_file_rewritten_in_place(one):
    """A file found empty or missing leaves the tokens read before in use,
    and says so; a file with text is taken as it is."""
    old, new = "1" * 64, "2" * 64

    def whoami(token):
        r = one.get("/reports/whoami", headers=bearer(token))
        return r.body if r.status == 200 else r.status

    write_in_place(one, "%s old-client\n" % old)
    assert whoami(old) == b"old-client Bearer"
    # Caught between truncation and writing.
    write_in_place(one, "")
    time.sleep(REFRESH)
    assert whoami(old) == b"old-client Bearer"
    one.wait_log(r"\[mruby:warn\].*MRB00400: .*token_auth\.rb:\d+: .*api-tokens\.txt is empty or being written: "
                 r"keeping the 1 token\(s\) read before")
    # Replaced by removing it first.
    os.rename(tokens_path(one), tokens_path(one) + ".away")
    time.sleep(REFRESH)
    assert whoami(old) == b"old-client Bearer"
    one.wait_log(r"\[mruby:error\].*api-tokens\.txt cannot be read \(.*\): keeping the 1 token\(s\) read before")
    os.rename(tokens_path(one) + ".away", tokens_path(one))
    # Written: the new list applies, the old token is gone.
    write_in_place(one, "# our clients\n%s new-client\n" % new)
    time.sleep(REFRESH)
    assert whoami(new) == b"new-client Bearer"
    assert whoami(old) == 401
    # A comment only is a list of nobody.
    write_in_place(one, "# nobody for now\n")
    time.sleep(REFRESH)
    assert whoami(new) == 401
    one.wait_log(r"\[mruby:warn\].*api-tokens\.txt has no token: every client is refused")


def test_example_tokens_are_refused(srv):
    """The file as shipped, with a token of our own added: the examples let
    nobody in, and the log says which lines hold them."""
    fresh = "7" * 64
    try:
        replace_tokens(srv, SHIPPED + "%s ci-runner\n" % fresh)
        time.sleep(REFRESH)
        for _ in range(10):
            for token in EXAMPLES.values():
                r = srv.get("/reports/whoami", headers=bearer(token))
                assert r.status == 401
                assert r.headers["WWW-Authenticate"] == 'Bearer realm="reports", error="invalid_token"'
            assert srv.get("/reports/whoami", headers=bearer(fresh)).body == b"ci-runner Bearer"
        for line, name in ((5, "dashboard"), (6, "nightly-export")):
            srv.wait_log(r"\[mruby:warn\].*MRB00400: .*token_auth\.rb:\d+: .*api-tokens\.txt:%d: "
                         r"the recipe's example token \(%s\) is refused: replace it" % (line, name))
    finally:
        replace_tokens(srv, TOKENS)
    time.sleep(REFRESH)
    assert srv.get("/reports/daily.csv", headers=bearer(DASHBOARD)).status == 200
