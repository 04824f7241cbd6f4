"""PostConfig runs in the parent at startup and restart (its failure stops
httpd), ChildInit once in each child; both without a request. Directives
are refused where their phase could not see them."""

import os
import re
import time

import pytest

from httpd import Httpd

POST_CONFIG_RB = r'''
# Runs in the parent, as root, before any child exists.
File.open("{root}/out/generation.txt", "a") { |f| f.puts "post_config" }
begin
  Apache::Request.new
rescue RuntimeError => e
  File.open("{root}/out/no_request.txt", "w") { |f| f.puts e.message }
end
'''

CHILD_INIT_RB = r'''
File.open("{root}/out/children.txt", "a") { |f| f.write "child\n" }
$child_init_ran = true
'''

BODY = r"""
mrubyPostConfig {root}/scripts/post_config.rb
mrubyPostConfigFirstCode "File.open('{root}/out/order.txt', 'a') { |f| f.write 'first,' }"
mrubyPostConfigLastCode "File.open('{root}/out/order.txt', 'a') { |f| f.write 'last,' }"
mrubyChildInit {root}/scripts/child_init.rb
<Location /state>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs File.read('{root}/out/generation.txt') + File.read('{root}/out/children.txt').lines.size.to_s"
</Location>
"""


def start(make_httpd, mpm, body=BODY, **kw):
    srv = make_httpd("server-phases", mpm, body, **kw)
    srv.write("scripts/post_config.rb", srv.fill(POST_CONFIG_RB))
    srv.write("scripts/child_init.rb", srv.fill(CHILD_INIT_RB))
    return srv


def read(srv, rel):
    with open(srv.path(rel)) as f:
        return f.read()


def wait_lines(srv, rel, n, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if os.path.exists(srv.path(rel)) and len(read(srv, rel).splitlines()) >= n:
            return read(srv, rel).splitlines()
        time.sleep(0.05)
    raise AssertionError("%s: fewer than %d lines" % (rel, n))


def test_post_config_and_child_init_effects_are_visible_to_requests(make_httpd, mpm):
    srv = start(make_httpd, mpm, mpm_conf=dict(StartServers=2, MinSpareServers=2, MaxSpareServers=2,
                                                  ServerLimit=2, MaxRequestWorkers=2, ThreadsPerChild=1,
                                                  MinSpareThreads=1, MaxSpareThreads=2)).start()
    # Once per startup, not once per configuration pass.
    assert read(srv, "out/generation.txt") == "post_config\n"
    assert read(srv, "out/order.txt") == "first,last,"
    assert "needs a request" in read(srv, "out/no_request.txt")
    children = wait_lines(srv, "out/children.txt", 2)
    assert children == ["child", "child"]  # once per child process
    r = srv.get("/state")
    assert r.status == 200
    assert r.body == b"post_config\n2"


def test_post_config_runs_again_on_graceful_restart(make_httpd, mpm):
    srv = start(make_httpd, mpm).start()
    assert read(srv, "out/generation.txt") == "post_config\n"
    srv.graceful()
    assert read(srv, "out/generation.txt") == "post_config\npost_config\n"
    assert srv.get("/state").status == 200


def test_post_config_failure_stops_httpd(make_httpd, mpm):
    srv = make_httpd("post-config-fails", mpm,
                     'mrubyPostConfigCode "raise IOError, %q(cannot reach the config store)"\n')
    with pytest.raises(RuntimeError, match="httpd exited"):
        srv.start()
    log = srv.error_log()
    assert "MRB00031: PostConfig script" in log
    assert "IOError" in log and "cannot reach the config store" in log
    assert "MRB00050: a PostConfig script failed" in log


def test_post_config_returning_an_error_stops_httpd(make_httpd, mpm):
    srv = make_httpd("post-config-refuses", mpm,
                     'mrubyPostConfigCode "Apache.return Apache::HTTP_SERVICE_UNAVAILABLE"\n')
    with pytest.raises(RuntimeError, match="httpd exited"):
        srv.start()
    assert "MRB00050: a PostConfig script failed (503)" in srv.error_log()


def test_child_init_exception_is_logged_and_the_child_serves(make_httpd, mpm):
    srv = make_httpd("child-init-raises", mpm, r"""
mrubyChildInitCode "raise 'child setup failed'"
<Location /ok>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'serving'"
</Location>
""").start()
    r = srv.get("/ok")
    assert (r.status, r.body) == (200, b"serving")
    srv.wait_log(r"MRB00031: ChildInit script .* child setup failed")


@pytest.mark.parametrize("directive,section", [
    ("mrubyPostConfigCode", "<VirtualHost 127.0.0.1:{port}>"),
    ("mrubyChildInitCode", "<Location /x>"),
    ("mrubyQuickHandlerCode", "<Location /x>"),
    ("mrubyPostReadRequestCode", "<Directory /tmp>"),
    ("mrubyMapToStorageCode", "<Location /x>"),
    ("mrubyTranslateNameCode", "<Directory /tmp>"),
    ("mrubyTranslateNameCode", '<Files "x">'),
])
def test_directive_refused_where_its_phase_cannot_see_it(make_httpd, directive, section):
    srv = make_httpd("context", "event")
    kind = section.strip("<>").split()[0]
    code, out = srv.configtest('%s\n%s "Apache.rputs 1"\n</%s>\n' % (section, directive, kind))
    assert code != 0
    assert re.search(r"%s .*(cannot occur within|not allowed in) <%s>" % (directive, kind), out), out


def test_translate_name_refused_in_proxy_and_in_if_within_files(make_httpd):
    srv = make_httpd("context-proxy", "event", modules=("proxy",))
    code, out = srv.configtest("""
<Proxy "http://127.0.0.1:1/">
    mrubyTranslateNameCode "Apache.rputs 1"
</Proxy>
""")
    assert code != 0
    assert "mrubyTranslateNameCode cannot occur within <Proxy> section" in out, out
    code, out = srv.configtest("""
<Files "x">
    <If "true">
        mrubyTranslateNameCode "Apache.rputs 1"
    </If>
</Files>
""")
    assert code != 0
    assert "mrubyTranslateNameCode cannot occur within <Files> section" in out, out


# <If> sections apply before TranslateName runs, as <Location> ones do.
TRANSLATE_IN_IF = r"""
<If "%{HTTP:X-Variant} == 'b'">
    mrubyTranslateNameCode "r = Apache::Request.new; r.filename = '{root}/scripts/b.txt'; Apache.return Apache::OK"
</If>
<Location /loc>
    <If "%{HTTP:X-Variant} == 'c'">
        mrubyTranslateNameCode "r = Apache::Request.new; r.filename = '{root}/scripts/c.txt'; Apache.return Apache::OK"
    </If>
</Location>
<Directory {root}/scripts>
    Require all granted
</Directory>
"""


def test_translate_name_in_if_runs(make_httpd, mpm):
    srv = make_httpd("translate-if", mpm, TRANSLATE_IN_IF)
    srv.write("htdocs/page.txt", "docroot")
    srv.write("htdocs/loc/page.txt", "docroot loc")
    srv.write("scripts/b.txt", "mapped b")
    srv.write("scripts/c.txt", "mapped c")
    srv.start()
    assert srv.get("/page.txt").body == b"docroot"
    assert srv.get("/page.txt", headers={"X-Variant": "b"}).body == b"mapped b"
    assert srv.get("/loc/page.txt").body == b"docroot loc"
    assert srv.get("/loc/page.txt", headers={"X-Variant": "c"}).body == b"mapped c"
    assert srv.get("/page.txt", headers={"X-Variant": "c"}).body == b"docroot"


def test_translate_name_is_allowed_in_location_and_virtual_host(make_httpd):
    srv = make_httpd("context-ok", "event")
    code, out = srv.configtest("""
<Location /x>
    mrubyTranslateNameCode "Apache.return Apache::DECLINED"
</Location>
<VirtualHost 127.0.0.1:{port}>
    mrubyQuickHandlerCode "Apache.return Apache::DECLINED"
    mrubyMapToStorageCode "Apache.return Apache::DECLINED"
</VirtualHost>
""")
    assert code == 0, out
