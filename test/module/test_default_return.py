"""mrubyDefaultReturn: what a request phase's script that ends without
Apache.return answers. By default DECLINED; with OK, the original
mod_mruby's scripts of that form run as they did there: its proxying
TranslateName script (handler proxy-server, filename proxy:URL, no
Apache.return) reaches a backend httpd started here, and answers 403
without the directive (httpd's own mapping refuses a proxy request).
Then each phase with the directive, where OK changes what httpd does
(the phases where the first module to answer OK ends the phase) and where
it does not (every module runs), and the setting's inheritance: server,
virtual host, <Location>, nested <Location>, <If>."""

import pytest

from httpd import MPMS, Httpd, backend_httpd, serving

BACKEND = r"""
<Location /app>
    SetHandler mruby-native-script
    mrubyHandlerCode "r = Apache::Request.new; Apache.rputs 'backend ' + r.uri"
</Location>
"""

# The original mod_mruby's proxying script, in the form of its own test:
# no Apache.return.
PROXY = (
    'backend = "http://127.0.0.1:{backend}"\n'
    'r = Apache::Request.new\n'
    'r.handler  = "proxy-server"\n'
    'r.proxyreq = Apache::PROXYREQ_REVERSE\n'
    'r.filename = "proxy:" + backend + "/app" + r.uri\n'
)

SHOW_USER = ('SetHandler mruby-native-script\n'
             '    mrubyHandlerCode "Apache.rputs Apache::Request.new.user.to_s"')

BODY = r"""
# The first virtual host answers the requests of no other: with no
# mrubyDefaultReturn anywhere, it has the default, DECLINED.
<VirtualHost 127.0.0.1:{port}>
    ServerName plain.test
</VirtualHost>
<VirtualHost 127.0.0.1:{port}>
    ServerName legacy.test
    mrubyDefaultReturn OK
    <Location /strict>
        mrubyDefaultReturn DECLINED
        mrubyTranslateName {root}/mruby/proxy.rb
    </Location>
</VirtualHost>

<Location /proxy>
    mrubyTranslateName {root}/mruby/proxy.rb
</Location>

<Location /opted>
    mrubyDefaultReturn OK
    mrubyTranslateName {root}/mruby/proxy.rb
    <If "%{HTTP:X-Strict} == 'yes'">
        mrubyDefaultReturn DECLINED
    </If>
</Location>
<Location /opted/strict>
    mrubyDefaultReturn DECLINED
</Location>

<Location /handler>
    mrubyDefaultReturn DECLINED
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'the handler answers'"
</Location>

# QuickHandler: OK answers with what the script wrote.
mrubyQuickHandlerCode "Apache.return Apache::DECLINED unless Apache::Request.new.uri == '/quick'; Apache.rputs 'quick'"

# MapToStorage: OK skips the directory walk (and the <Directory> below).
mrubyMapToStorageCode "r = Apache::Request.new; Apache.return Apache::DECLINED unless r.uri.start_with?('/m2s/'); r.notes['m2s'] = 'ran'"
<Directory {docroot}/m2s>
    Require all denied
</Directory>
<Location /m2s>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'virtual ' + Apache::Request.new.notes['m2s'].to_s"
</Location>

# TypeChecker: OK keeps the type the script set (mod_mime does not run).
<Location /typed>
    mrubyTypeCheckerFirstCode "Apache::Request.new.content_type = 'text/x-legacy'"
</Location>

# CheckUserId: OK with a user set authenticates; else mod_auth_basic asks
# for credentials.
<Location /authn>
    AuthType Basic
    AuthName legacy
    AuthBasicProvider file
    AuthUserFile {root}/no-users
    Require valid-user
    mrubyCheckUserIdFirstCode "Apache::Request.new.user = 'legacy'"
    {show_user}
</Location>

<Location /authn-nobody>
    AuthType Basic
    AuthName legacy
    Require valid-user
    mrubyCheckUserIdFirstCode "Apache::Request.new.notes['looked'] = 'yes'"
</Location>

# AuthChecker: OK authorizes before mod_authz_core's Require.
<Location /authz>
    AuthType Basic
    AuthName legacy
    Require user nobody
    mrubyCheckUserIdFirstCode "Apache::Request.new.user = 'alice'; Apache.return Apache::OK"
    mrubyAuthCheckerFirstCode "Apache::Request.new.notes['authz'] = 'looked'"
    {show_user}
</Location>

# Where every module runs, OK and DECLINED are the same to httpd.
<Location /acl>
    mrubyAccessCheckerCode "r = Apache::Request.new; Apache.return Apache::HTTP_FORBIDDEN if r.headers_in['X-Deny'] == 'yes'; r.notes['acl'] = 'ran'"
</Location>
<Location /acl/denied>
    Require all denied
</Location>
<Location /acl/raises>
    mrubyAccessCheckerCode "raise 'broken'"
</Location>
<Location /fixups>
    mrubyFixupsFirstCode "Apache::Request.new.headers_out['X-First'] = 'yes'"
    mrubyFixupsCode "Apache::Request.new.headers_out['X-Middle'] = 'yes'"
    mrubyHeaderParserCode "Apache::Request.new.headers_out['X-Hp'] = 'yes'"
</Location>
""".replace("{show_user}", SHOW_USER)

FILES = {
    "mruby/proxy.rb": PROXY,
    "no-users": "",
    "htdocs/typed/a.txt": "typed",
    "htdocs/m2s/page.txt": "a file",
    "htdocs/acl/a.txt": "acl",
    "htdocs/acl/denied/a.txt": "denied",
    "htdocs/acl/raises/a.txt": "raises",
    "htdocs/fixups/a.txt": "fixups",
    "htdocs/plain.txt": "plain",
}

MODULES = ("proxy", "proxy_http", "auth_basic", "authn_core", "authn_file", "authz_user")

LEGACY = {"Host": "legacy.test"}


backend = backend_httpd("return-backend", BACKEND)


def files_for(backend):
    """The files, the proxy script sending to the backend."""
    return {rel: text.replace("{backend}", str(backend.port)) for rel, text in FILES.items()}


@pytest.fixture(scope="module", params=MPMS)
def server(request, backend):
    yield from serving(Httpd("default-return", request.param, BODY, files=files_for(backend), modules=MODULES))


# --------------------------------------------- the original's proxy script

def test_proxy_script_declines_without_the_directive(server):
    """httpd maps the URI itself, and refuses the proxy request the
    script made of it."""
    assert server.get("/proxy/x").status == 403


def test_proxy_script_proxies_under_the_directive(server):
    r = server.ok("/opted/page")
    assert r.body == b"backend /app/opted/page"


def test_proxy_script_in_a_virtual_host_with_the_directive(server):
    """legacy.test sets OK: the main server's <Location /proxy> inherits
    it there."""
    assert server.ok("/proxy/y", headers=LEGACY).body == b"backend /app/proxy/y"
    assert server.get("/proxy/y", headers={"Host": "plain.test"}).status == 403
    assert server.get("/proxy/y").status == 403


# ------------------------------------------------------------ inheritance

def test_nested_location_inherits_or_overrides(server):
    assert server.ok("/opted/inherit/a").body == b"backend /app/opted/inherit/a"
    assert server.get("/opted/strict/a").status == 403


def test_if_section_overrides(server):
    assert server.get("/opted/page", headers={"X-Strict": "yes"}).status == 403
    assert server.ok("/opted/page", headers={"X-Strict": "no"}).body == b"backend /app/opted/page"


def test_location_in_virtual_host_overrides(server):
    assert server.get("/strict/a", headers=LEGACY).status == 403


def test_virtual_host_inherits_the_main_servers(backend, make_httpd, mpm):
    """Set in the main server, the directive holds in a virtual host that
    does not set it, and one that sets DECLINED has the default back."""
    body = ("mrubyDefaultReturn OK\n"
            "<Location /proxy>\n    mrubyTranslateName {root}/mruby/proxy.rb\n</Location>\n"
            "<VirtualHost 127.0.0.1:{port}>\n    ServerName inherits.test\n</VirtualHost>\n"  # the default
            "<VirtualHost 127.0.0.1:{port}>\n    ServerName strict.test\n"
            "    mrubyDefaultReturn DECLINED\n</VirtualHost>\n")
    srv = make_httpd("default-return-main", mpm, body, files=files_for(backend), modules=MODULES).start()
    assert srv.ok("/proxy/i", headers={"Host": "inherits.test"}).body == b"backend /app/proxy/i"
    assert srv.get("/proxy/s", headers={"Host": "strict.test"}).status == 403


# ------------------------------------------------------------- the phases

def test_quick_handler(server):
    assert server.ok("/quick", headers=LEGACY).body == b"quick"
    assert server.get("/quick").status == 404  # declined: there is no such file


def test_map_to_storage_skips_the_directory_walk(server):
    assert server.ok("/m2s/page.txt", headers=LEGACY).body == b"virtual ran"
    assert server.get("/m2s/page.txt").status == 403  # the <Directory> applies


def test_type_checker_keeps_the_scripts_type(server):
    assert server.ok("/typed/a.txt", headers=LEGACY).headers["Content-Type"] == "text/x-legacy"
    assert server.ok("/typed/a.txt").headers["Content-Type"] == "text/plain"


def test_check_user_id_authenticates(server):
    assert server.ok("/authn/x", headers=LEGACY).body == b"legacy"
    assert server.get("/authn/x").status == 401  # declined: mod_auth_basic asks
    # OK without a user: httpd refuses to go on without one
    assert server.get("/authn-nobody/x", headers=LEGACY).status == 500


def test_auth_checker_authorizes(server):
    """`Require user nobody` would refuse alice; the script that says
    nothing authorizes her first, as in the original."""
    assert server.ok("/authz/x", headers=LEGACY).body == b"alice"
    assert server.get("/authz/x").status == 401  # declined: Require refuses her


def test_access_checker_passes_and_still_denies(server):
    assert server.ok("/acl/a.txt", headers=LEGACY).body == b"acl"
    assert server.ok("/acl/a.txt").body == b"acl"
    assert server.get("/acl/a.txt", headers=dict(LEGACY, **{"X-Deny": "yes"})).status == 403
    # OK from an access script does not override mod_authz_core's Require
    assert server.get("/acl/denied/a.txt", headers=LEGACY).status == 403
    # an exception still denies
    assert server.get("/acl/raises/a.txt", headers=LEGACY).status == 500


def test_fixups_and_header_parser_let_every_module_run(server):
    for headers in (LEGACY, {}):
        r = server.ok("/fixups/a.txt", headers=headers)
        assert r.body == b"fixups"
        assert [r.headers["X-" + h] for h in ("Hp", "First", "Middle")] == ["yes"] * 3


def test_content_handler_is_not_affected(server):
    """The content handler's script answers without Apache.return whatever
    the directive says."""
    assert server.ok("/handler").body == b"the handler answers"
    assert server.ok("/handler", headers=LEGACY).body == b"the handler answers"


def test_bad_value_is_refused(backend):
    srv = Httpd("default-return-bad", "prefork")
    try:
        rc, out = srv.configtest("mrubyDefaultReturn DONE\n")
        assert rc != 0 and "mrubyDefaultReturn: 'DONE' is neither OK nor DECLINED" in out
        rc, out = srv.configtest("<Location />\n  <Limit GET>\n    mrubyDefaultReturn OK\n  </Limit>\n</Location>\n")
        assert rc != 0 and "mrubyDefaultReturn" in out
        rc, out = srv.configtest("<Location />\n    mrubyDefaultReturn ok\n</Location>\n")
        assert rc == 0, out
    finally:
        srv.cleanup()
