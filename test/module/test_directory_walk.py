"""mrubyDirectoryWalk Off: the requests of a <Location> are not mapped to
the file system, as mod_proxy's URLs are not. httpd's directory walk, and
with it the <Directory> sections and .htaccess files of the path, no
longer apply there; the <Location> sections still do, MapToStorage
scripts still run, and httpd still answers TRACE. Each MPM; then the
directive's contexts and values."""

import pytest

from httpd import MPMS, Httpd, serving

BODY = r"""
TraceEnable On
# the document root: refused, and its .htaccess broken
<Directory {docroot}>
    Require all denied
    AllowOverride All
</Directory>

<Location /walked>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'walked'"
</Location>
<Location /virtual>
    mrubyDirectoryWalk Off
    SetHandler mruby-native-script
    mrubyHandlerCode "r = Apache::Request.new; Apache.rputs ['virtual', r.filename, r.notes['m2s'].to_s].join(' ')"
</Location>
<Location /virtual/walked>
    mrubyDirectoryWalk On
</Location>
<Location /virtual/denied>
    Require all denied
</Location>

# files outside the document root
Alias /files {root}/files
<Directory {root}/files>
    Require all granted
</Directory>
<Location /files/off>
    mrubyDirectoryWalk Off
</Location>

# A MapToStorage script runs before the walk would (and is not skipped).
mrubyMapToStorageCode "r = Apache::Request.new; r.notes['m2s'] = 'm2s ran'; Apache.return Apache::DECLINED"
"""

FILES = {"htdocs/.htaccess": "NotADirective here\n", "files/on.txt": "walked", "files/off/page.txt": "not found"}


@pytest.fixture(scope="module", params=MPMS)
def server(request):
    yield from serving(Httpd("dirwalk", request.param, BODY, files=FILES))


def test_walked_location_meets_directory_and_htaccess(server):
    """Without the directive httpd reads the document root's .htaccess
    (broken here: 500, and httpd says why)."""
    server.expect("/walked", 500, log=r"\.htaccess: Invalid command 'NotADirective'")


def test_location_without_the_walk(server):
    """Neither the broken .htaccess nor the <Directory>'s Require applies;
    r.filename is still the translated path; the MapToStorage script ran."""
    r = server.ok("/virtual/page")
    assert r.text == "virtual %s/virtual/page m2s ran" % server.path("htdocs")


def test_files_are_not_served_without_the_walk(server):
    """httpd's own handler finds no file where nothing looked for one."""
    assert server.ok("/files/on.txt").body == b"walked"
    assert server.get("/files/off/page.txt").status == 404


def test_location_sections_still_apply(server):
    assert server.get("/virtual/denied/x").status == 403


def test_nested_location_turns_the_walk_back_on(server):
    assert server.get("/virtual/walked/x").status == 500


def test_trace_is_httpds(server):
    r = server.ok("/virtual/t", method="TRACE")
    assert r.headers.get("Content-Type") == "message/http"
    assert r.text.startswith("TRACE /virtual/t HTTP/1.1")


def test_contexts_and_values():
    srv = Httpd("dirwalk-config", "prefork")
    try:
        rc, out = srv.configtest("<Directory {docroot}>\n    mrubyDirectoryWalk Off\n</Directory>\n")
        assert rc != 0 and "mrubyDirectoryWalk cannot occur within <Directory> section" in out, out
        rc, out = srv.configtest("<Files x>\n    mrubyDirectoryWalk Off\n</Files>\n")
        assert rc != 0 and "mrubyDirectoryWalk cannot occur within <Files> section" in out, out
        rc, out = srv.configtest("<Location />\n    mrubyDirectoryWalk maybe\n</Location>\n")
        assert rc != 0 and "mrubyDirectoryWalk must be On or Off" in out, out
        rc, out = srv.configtest("mrubyDirectoryWalk Off\n<Location /x>\n    mrubyDirectoryWalk On\n</Location>\n")
        assert rc == 0, out
    finally:
        srv.cleanup()
