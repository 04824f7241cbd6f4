"""Version information: the startup line names mod_mruby's and mruby's
versions; the Server header names mod_mruby only with mrubyServerToken On
(and httpd's ServerTokens Full), while the server description always can."""

import os
import re

import pytest

from httpd import ROOT



def module_version():
    with open(os.path.join(ROOT, "src", "module", "mod_mruby.h")) as f:
        return re.search(r'#define MM_MODULE_VERSION "([^"]+)"', f.read()).group(1)


TOKEN = "mod_mruby/" + module_version()

DESCRIBE = """
<Location /describe>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs Apache.server_version"
</Location>
"""


def test_startup_line_names_both_versions(make_httpd, mpm):
    srv = make_httpd("version", mpm, DESCRIBE).start()
    line = srv.wait_log("MRB00001")[0]
    assert "%s mruby/3.1.0 ready" % TOKEN in line
    srv.stop()
    # One line per start, not one per configuration pass.
    assert len(srv.log_lines("MRB00001")) == 1


def test_no_token_by_default(make_httpd, mpm):
    srv = make_httpd("version", mpm, DESCRIBE).start()
    r = srv.get("/describe")
    assert r.status == 200 and r.text.startswith("Apache/2.4")
    assert r.headers["Server"].startswith("Apache/2.4")
    assert "mod_mruby" not in r.headers["Server"]
    assert "mod_mruby" not in r.text


@pytest.mark.parametrize("setting", ["Off", "off"])
def test_token_off(make_httpd, mpm, setting):
    srv = make_httpd("version", mpm, "mrubyServerToken %s\n%s" % (setting, DESCRIBE)).start()
    r = srv.get("/describe")
    assert r.status == 200 and r.text.startswith("Apache/2.4")
    assert "mod_mruby" not in r.headers["Server"]
    assert "mod_mruby" not in r.text


def test_token_on(make_httpd, mpm):
    srv = make_httpd("version", mpm, "ServerTokens Full\nmrubyServerToken On\n" + DESCRIBE).start()
    r = srv.get("/describe")
    assert r.headers["Server"].endswith(" " + TOKEN)
    assert r.text.endswith(" " + TOKEN)
    # Also on error pages and answers of other handlers.
    assert srv.get("/missing").headers["Server"].endswith(" " + TOKEN)
    # And it stays there after a graceful restart rebuilt the banner.
    srv.graceful()
    assert srv.get("/describe").headers["Server"].endswith(" " + TOKEN)


def test_token_on_with_server_tokens_prod(make_httpd, mpm):
    """httpd hides every module's token unless ServerTokens is Full (Debian's
    security.conf says OS): the header stays short, the description (mod_status,
    Apache.server_version) still has it."""
    srv = make_httpd("version", mpm, "ServerTokens Prod\nmrubyServerToken On\n" + DESCRIBE).start()
    r = srv.get("/describe")
    assert r.headers["Server"] == "Apache"
    assert r.text.endswith(" " + TOKEN)


@pytest.mark.parametrize("body, message", [
    ("<VirtualHost 127.0.0.1:{port}>\n    mrubyServerToken On\n</VirtualHost>",
     "cannot occur within <VirtualHost> section"),
    ("<Location />\n    mrubyServerToken On\n</Location>", "not allowed in <Location> context"),
    ("mrubyServerToken yes", "must be On or Off"),
])
def test_token_refused(make_httpd, body, message):
    srv = make_httpd("version", "event")
    code, out = srv.configtest(srv.fill(body))
    assert code != 0
    assert "mrubyServerToken" in out and message in out
