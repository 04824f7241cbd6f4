"""The Debian package as installed by script/test-deb: its files, a2enmod
and apache2ctl, and the system Apache serving Ruby. Skipped unless
script/test-deb runs them (MM_SYSTEM_APACHE); the recipe tests run
against the same server then too."""

import os
import re
import shutil
import subprocess

import pytest

import system_apache
from httpd import ROOT
from system_apache import SystemApache, apache2ctl

pytestmark = pytest.mark.skipif(not system_apache.enabled(),
                                reason="script/test-deb runs these against the installed package")

PACKAGE = "libapache2-mod-mruby"


def module_version():
    with open(os.path.join(ROOT, "src", "module", "mod_mruby.h")) as f:
        return re.search(r'#define MM_MODULE_VERSION "([^"]+)"', f.read()).group(1)


def output(*argv):
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout


def test_package_is_installed_with_its_files():
    assert output("dpkg-query", "-W", "-f=${Status} ${Version}", PACKAGE) == \
        "install ok installed " + module_version()
    files = set(output("dpkg", "-L", PACKAGE).split())
    modules_dir = output("apxs", "-q", "LIBEXECDIR").strip()
    for f in (modules_dir + "/mod_mruby.so",
              "/etc/apache2/mods-available/mruby.load",
              "/etc/apache2/mods-available/mruby.conf",
              "/usr/share/doc/%s/copyright" % PACKAGE,
              "/usr/share/doc/%s/README.md" % PACKAGE,
              "/usr/share/doc/%s/docs/directives.md" % PACKAGE,
              "/usr/share/doc/%s/docs/recipes/README.md" % PACKAGE,
              "/usr/share/doc/%s/docs/testing-your-scripts.md" % PACKAGE,
              "/usr/bin/mod_mruby-test",
              "/usr/share/man/man1/mod_mruby-test.1.gz"):
        assert f in files, f
    with open("/etc/apache2/mods-available/mruby.load") as f:
        assert f.read() == "LoadModule mruby_module %s/mod_mruby.so\n" % modules_dir


def test_depends_on_the_api_of_the_installed_httpd():
    depends = output("dpkg-query", "-W", "-f=${Depends}", PACKAGE)
    provided = output("dpkg-query", "-W", "-f=${Provides}", "apache2-bin")
    api = re.search(r"apache2-api-\d+", depends).group(0)
    assert api in [p.strip() for p in provided.split(",")]
    assert "libmruby" not in depends and "libc6" in depends
    assert "python3" in [d.strip().split()[0] for d in depends.split(",")]  # mod_mruby-test
    assert "liblmdb0" in depends  # mrubyCache's dictionary, linked by dpkg-shlibdeps
    assert "libcurl4" in depends  # Apache::HTTP
    assert "libhiredis" in depends  # Apache::Redis


def test_a2enmod_enabled_it():
    assert os.path.islink("/etc/apache2/mods-enabled/mruby.load")
    assert os.path.islink("/etc/apache2/mods-enabled/mruby.conf")
    assert re.search(r"^ mruby_module \(shared\)$", apache2ctl("-M").stdout, re.M)


def test_configtest_checks_inline_scripts():
    """apache2ctl -t compiles inline code: a syntax error fails it with
    the file and line, the fixed script passes."""
    srv = SystemApache("deb-configtest")
    try:
        srv.install("conf-available/mruby-smoke-check.conf",
                             "# a handler with a Ruby syntax error\n"
                             "<Location /smoke-check>\n"
                             "    mrubyHandlerCode \"Apache.rputs(1 +)\"\n"
                             "</Location>\n")
        srv.enable("conf", "mruby-smoke-check")
        p = apache2ctl("-t", check=False)
        assert p.returncode != 0
        out = p.stdout + p.stderr
        # httpd names the line, the Ruby error the file (through its link).
        assert "AH00526: Syntax error on line 3" in out
        assert "mruby-smoke-check.conf:3:17: syntax error" in out
        srv.install("conf-available/mruby-smoke-check.conf",
                    "<Location /smoke-check>\n"
                    "    mrubyHandlerCode \"Apache.rputs(1 + 1)\"\n"
                    "</Location>\n")
        p = apache2ctl("-t", check=False)
        assert p.returncode == 0, p.stdout + p.stderr
        assert "Syntax OK" in p.stderr
    finally:
        srv.restore()
        srv.cleanup()
    assert apache2ctl("-t", check=False).returncode == 0


SITE = r"""
<Location /hello>
    SetHandler mruby-native-script
    mrubyHandlerCode "r = Apache::Request.new; r.headers_out['X-Ruby'] = RUBY_ENGINE; Apache.rputs 'hello from ' + Apache.mpm"
</Location>
<Location /fails>
    SetHandler mruby-native-script
    mrubyHandlerCode "raise ArgumentError, 'smoke test exception'"
</Location>
<Directory "{docroot}/app">
    AddHandler mruby-script .mrb
</Directory>
"""

FILES = {
    "htdocs/page.mrb": "Apache.rputs 'ran'\n",
    "htdocs/app/page.mrb": "Apache.rputs 'ran ' + Apache::Request.new.uri\n",
}


@pytest.fixture(scope="module")
def srv():
    server = SystemApache("deb-smoke", SITE, files=FILES)
    try:
        yield server.start()
    finally:
        server.stop()
        server.cleanup()


def test_startup_line(srv):
    line = srv.wait_log("MRB00001")[0]
    assert "mod_mruby/%s mruby/3.1.0 ready" % module_version() in line


def test_inline_handler(srv):
    r = srv.get("/hello")
    assert r.status == 200
    assert r.body.startswith(b"hello from ")
    assert r.headers["X-Ruby"] == "mruby"
    # mrubyServerToken is off by default.
    assert "mod_mruby" not in r.headers["Server"]


def test_mrb_files_are_not_scripts_unless_configured(srv):
    # mruby.conf leaves AddHandler commented out: the file is sent as it is.
    r = srv.get("/page.mrb")
    assert r.status == 200 and r.body == b"Apache.rputs 'ran'\n"
    # A directory where the site enabled it runs them.
    assert srv.get("/app/page.mrb").body == b"ran /app/page.mrb"


def test_exception(srv):
    r = srv.get("/fails")
    assert r.status == 500 and b"smoke test exception" not in r.body
    srv.wait_log(r"\[mruby:error\].*MRB00030: Handler script .* raised ArgumentError .*smoke test exception")


# A user's test file for the installed kit: a script, a request, the log.
KIT_FILE = r"""
--- file scripts/hello.rb
r = Apache::Request.new
r.content_type = "text/plain"
Apache.rputs "hello #{r.args} from #{Apache.mpm}\n"

=== the script answers
--- config
<Location /hello>
    SetHandler mruby-native-script
    mrubyHandler scripts/hello.rb
</Location>
--- request
GET /hello?kit
--- status
200
--- response_headers
Content-Type: text/plain
--- response_body_like
\Ahello kit from (prefork|worker|event)\n\Z

=== an exception is logged
--- config
<Location /fails>
    SetHandler mruby-native-script
    mrubyHandlerCode "raise ArgumentError, 'kit exception'"
</Location>
--- request
GET /fails
--- status
500
--- error_log
MRB00030: .*raised ArgumentError .*kit exception
"""


def test_installed_kit(tmp_path):
    """/usr/bin/mod_mruby-test, as a user runs it: its own httpd from the
    system Apache's binary and modules, with the installed module."""
    path = tmp_path / "hello.t"
    path.write_text(KIT_FILE)
    p = subprocess.run(["/usr/bin/mod_mruby-test", "--keep", str(path)], capture_output=True, text=True,
                       timeout=300)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    points = re.findall(r"^(ok|not ok) \d+ - .*: (.*) \[(\w+)\]$", out, re.M)
    assert len(points) == 9 and all(ok == "ok" for ok, _, _ in points), out
    assert {m for _, _, m in points} == {"prefork", "worker", "event"}
    roots = re.findall(r"^# ServerRoot kept: (\S+)$", out, re.M)
    assert len(roots) == 3
    modules_dir = output("apxs", "-q", "LIBEXECDIR").strip()
    try:
        for root in roots:
            with open(os.path.join(root, "httpd.conf")) as f:
                assert 'LoadModule mruby_module "%s/mod_mruby.so"' % modules_dir in f.read()
            with open(os.path.join(root, "logs", "error.log")) as f:
                assert "mod_mruby/%s mruby/3.1.0 ready" % module_version() in f.read()
    finally:
        for root in roots:
            shutil.rmtree(root, ignore_errors=True)
    # A failing check fails the run, with what came back.
    path.write_text(KIT_FILE.replace("--- status\n200", "--- status\n201"))
    p = subprocess.run(["/usr/bin/mod_mruby-test", "--mpm", "event", str(path)], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "status: expected 201, got 200" in p.stdout
