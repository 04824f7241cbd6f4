"""Recipe docs/recipes/token-auth: bearer tokens checked in an
AccessChecker against api-tokens.txt; the client's name becomes the user,
subrequests pass the same check; the file is re-read without a reload."""

import os
import time

from recipes import Recipe, recipe_httpd, server_root

# What the request looks like to the handler behind the check.
SITE = """
<Location /reports/whoami>
    SetHandler mruby-native-script
    mrubyHandlerCode "r = Apache::Request.new; Apache.rputs [r.user, r.ap_auth_type].join(' ')"
</Location>
"""

FILES = {"htdocs/reports/daily.csv": "day,visits\n2026-01-01,42\n", "htdocs/reports/index.html": "reports\n",
         "htdocs/index.html": "home\n"}

srv = recipe_httpd("token-auth", "DirectoryIndex index.html\n" + SITE, FILES)

EXAMPLES = dict(line.split()[::-1] for line in Recipe("token-auth").files["api-tokens.txt"].splitlines()
                if line and not line.startswith("#"))
DASHBOARD = EXAMPLES["dashboard"]


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
    r = srv.get("/reports/daily.csv", headers=bearer(DASHBOARD[:-1] + "0"))
    assert r.status == 401
    assert r.headers["WWW-Authenticate"] == 'Bearer realm="reports", error="invalid_token"'
    srv.wait_log(r"\[mruby:warn\].*MRB00400: .*token_auth\.rb:\d+: invalid bearer token for /reports/daily\.csv")
    # The log never shows the token itself.
    assert DASHBOARD[:-1] not in srv.error_log()


def test_right_token(srv):
    r = srv.get("/reports/daily.csv", headers=bearer(DASHBOARD))
    assert r.status == 200 and r.body == b"day,visits\n2026-01-01,42\n"
    # A lower-case scheme and extra blanks are fine.
    assert srv.get("/reports/daily.csv", headers={"Authorization": "bearer  " + DASHBOARD}).status == 200


def test_handler_sees_the_user(srv):
    r = srv.get("/reports/whoami", headers=bearer(EXAMPLES["nightly-export"]))
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
    script's REFRESH (2 s), on every thread, without a reload."""
    path = os.path.join(server_root(srv), "mruby", "api-tokens.txt")
    with open(path) as f:
        original = f.read()
    fresh = "7" * 64
    try:
        with open(path, "w") as f:
            f.write("%s ci-runner\n" % fresh)
        time.sleep(2.5)
        for _ in range(20):
            assert srv.get("/reports/whoami", headers=bearer(fresh)).body == b"ci-runner Bearer"
            assert srv.get("/reports/whoami", headers=bearer(DASHBOARD)).status == 401
    finally:
        with open(path, "w") as f:
            f.write(original)
    time.sleep(2.5)
    assert srv.get("/reports/daily.csv", headers=bearer(DASHBOARD)).status == 200
