"""Authentication and authorization providers in Ruby: the `mruby` authn
provider for Basic (mrubyAuthnCheckPassword) and Digest
(mrubyAuthnGetRealmHash), end to end with real clients, and authz
providers (mrubyAuthzProvider) whose Require arguments stay with their own
line. Errors are never a grant."""

import base64
import concurrent.futures
import hashlib

import pytest

from auth_clients import basic, digest_get, md5
from httpd import module_httpd

AUTHN_BASIC = r"""
    AuthType Basic
    AuthName "ruby basic"
    AuthBasicProvider mruby
"""

# Authz refusals of an authenticated user answer 403, not 401 (the
# default, which asks the browser to log in again).
AUTHZ_BASIC = AUTHN_BASIC + r"""
    AuthzSendForbiddenOnFailure On
"""

HELLO = r"""
    SetHandler mruby-native-script
    mrubyHandlerCode "r = Apache::Request.new; Apache.rputs 'hello ' + r.user + ' via ' + r.ap_auth_type"
"""

BODY = r"""
mrubyAuthzProvider team {root}/scripts/team.rb
mrubyAuthzProviderCode broken "raise 'directory server down'"
mrubyAuthzProviderCode answers42 "Apache.return 42"
<AuthzProviderAlias team team-admins admins>
</AuthzProviderAlias>

<Location /basic>
""" + AUTHN_BASIC + r"""
    mrubyAuthnCheckPassword {root}/scripts/basic.rb
    Require valid-user
""" + HELLO + r"""
</Location>
<Location /chain>
    AuthType Basic
    AuthName "ruby then file"
    AuthBasicProvider mruby file
    AuthUserFile {root}/scripts/htpasswd
    mrubyAuthnCheckPassword {root}/scripts/basic.rb
    Require valid-user
""" + HELLO + r"""
</Location>
<Location /basic-raise>
""" + AUTHN_BASIC + r"""
    mrubyAuthnCheckPasswordCode "raise 'password store down'"
    Require valid-user
""" + HELLO + r"""
</Location>
<Location /basic-odd>
""" + AUTHN_BASIC + r"""
    mrubyAuthnCheckPasswordCode "Apache.return 42"
    Require valid-user
""" + HELLO + r"""
</Location>
<Location /basic-silent>
""" + AUTHN_BASIC + r"""
    mrubyAuthnCheckPasswordCode "Apache::AuthnProvider.new.user"
    Require valid-user
""" + HELLO + r"""
</Location>
<Location /basic-none>
""" + AUTHN_BASIC + r"""
    Require valid-user
""" + HELLO + r"""
</Location>

<Location /digest>
    AuthType Digest
    AuthName "hobbits"
    AuthDigestProvider mruby
    mrubyAuthnGetRealmHash {root}/scripts/digest.rb cache
    Require valid-user
""" + HELLO + r"""
</Location>
<Location /digest-stored>
    AuthType Digest
    AuthName "hobbits"
    AuthDigestProvider mruby
    mrubyAuthnGetRealmHashCode "a = Apache::AuthnProvider.new; if a.user == 'sam' then a.rethash = '{sam_ha1}'; Apache.return Apache::AuthnProvider::AUTH_USER_FOUND end"
    Require valid-user
""" + HELLO + r"""
</Location>
<Location /digest-nohash>
    AuthType Digest
    AuthName "hobbits"
    AuthDigestProvider mruby
    mrubyAuthnGetRealmHashCode "Apache.return Apache::AuthnProvider::AUTH_USER_FOUND"
    Require valid-user
""" + HELLO + r"""
</Location>

# One provider, two sections, different arguments.
<Location /admins>
""" + AUTHZ_BASIC + r"""
    mrubyAuthnCheckPassword {root}/scripts/basic.rb
    Require team admins
""" + HELLO + r"""
</Location>
<Location /staff>
""" + AUTHZ_BASIC + r"""
    mrubyAuthnCheckPassword {root}/scripts/basic.rb
    Require team staff "night shift"
""" + HELLO + r"""
</Location>
<Location /both>
""" + AUTHZ_BASIC + r"""
    mrubyAuthnCheckPassword {root}/scripts/basic.rb
    <RequireAll>
        Require team staff
        Require team admins staff
    </RequireAll>
""" + HELLO + r"""
</Location>
<Location /not-admins>
""" + AUTHZ_BASIC + r"""
    mrubyAuthnCheckPassword {root}/scripts/basic.rb
    <RequireAll>
        Require valid-user
        Require not team admins
    </RequireAll>
""" + HELLO + r"""
</Location>
<Location /alias>
""" + AUTHZ_BASIC + r"""
    mrubyAuthnCheckPassword {root}/scripts/basic.rb
    Require team-admins
""" + HELLO + r"""
</Location>
<Location /authz-raise>
    Require broken
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'must not be seen'"
</Location>
<Location /authz-odd>
    Require answers42
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'must not be seen'"
</Location>
"""

USERS = {"alice": "wonderland", "bob": "pass:with:colons", "carol": "night"}

FILES = {
    "scripts/basic.rb": (
        "users = %s\n"
        "a = Apache::AuthnProvider.new\n"
        "raise 'Basic has no realm' unless a.realm.nil?\n"
        "if !users.key?(a.user)\n"
        "  Apache.return Apache::AuthnProvider::AUTH_USER_NOT_FOUND\n"
        "elsif users[a.user] == a.password\n"
        "  Apache.return Apache::AuthnProvider::AUTH_GRANTED\n"
        "else\n"
        "  Apache.return Apache::AuthnProvider::AUTH_DENIED\n"
        "end\n" % "{%s}" % ", ".join("%r => %r" % kv for kv in USERS.items())
    ),
    "scripts/digest.rb": (
        "realms = { 'hobbits' => { 'frodo' => 'ring', 'sam' => 'potatoes' } }\n"
        "a = Apache::AuthnProvider.new\n"
        "password = (realms[a.realm] || {})[a.user]\n"
        "if password\n"
        "  a.rethash = a.realm_hash(password)\n"
        "  Apache.return Apache::AuthnProvider::AUTH_USER_FOUND\n"
        "else\n"
        "  Apache.return Apache::AuthnProvider::AUTH_USER_NOT_FOUND\n"
        "end\n"
    ),
    # Grants when the user is in one of the teams its Require line names;
    # shows which arguments it saw in a header named after the first.
    "scripts/team.rb": (
        "teams = { 'admins' => %w[alice], 'staff' => %w[bob], 'night shift' => %w[carol] }\n"
        "z = Apache::AuthzProvider.new\n"
        "Apache::Request.new.err_headers_out['X-Team-' + z.args.first.tr(' ', '-')] = z.args.join('|')\n"
        "if z.user.nil?\n"
        "  Apache.return Apache::AuthzProvider::AUTHZ_DENIED_NO_USER\n"
        "elsif z.args.any? { |t| (teams[t] || []).include?(z.user) }\n"
        "  Apache.return Apache::AuthzProvider::AUTHZ_GRANTED\n"
        "else\n"
        "  Apache.return Apache::AuthzProvider::AUTHZ_DENIED\n"
        "end\n"
    ),
    # authn_file's user, for a user the Ruby provider does not know.
    "scripts/htpasswd": "dave:{SHA}%s\n" % base64.b64encode(hashlib.sha1(b"filepass").digest()).decode(),
}

MODULES = ("auth_basic", "auth_digest", "authn_core", "authn_file", "authz_user")


srv = module_httpd("auth", BODY.replace("{sam_ha1}", md5("sam:hobbits:potatoes")), files=FILES,
                   modules=MODULES)


# --------------------------------------------------------------- Basic

def test_basic_grants_the_right_password(srv):
    for user, password in USERS.items():
        r = srv.get("/basic/", headers=basic(user, password))
        assert r.status == 200
        assert r.body == ("hello %s via Basic" % user).encode()


def test_basic_refuses_a_wrong_password_and_an_unknown_user(srv):
    for user, password in (("alice", "nope"), ("mallory", "wonderland")):
        r = srv.get("/basic/", headers=basic(user, password))
        assert r.status == 401
        assert r.headers["WWW-Authenticate"] == 'Basic realm="ruby basic"'
    assert srv.get("/basic/").status == 401


def test_user_not_found_lets_the_next_provider_answer(srv):
    r = srv.get("/chain/", headers=basic("dave", "filepass"))
    assert r.status == 200
    assert r.body == b"hello dave via Basic"
    assert srv.get("/chain/", headers=basic("alice", "wonderland")).status == 200
    assert srv.get("/chain/", headers=basic("dave", "wrong")).status == 401


def test_basic_exception_is_a_general_error_never_a_grant(srv):
    r, _ = srv.expect("/basic-raise/", 500,
                      r"MRB00030: AuthnCheckPassword script .*raised RuntimeError .*password store down",
                      headers=basic("alice", "wonderland"))
    assert b"hello" not in r.body


def test_basic_odd_answer_is_a_general_error(srv):
    srv.expect("/basic-odd/", 500,
               r"MRB00531: mrubyAuthnCheckPassword script for /basic-odd/: Apache.return\(42\)",
               headers=basic("alice", "wonderland"))


def test_basic_without_an_answer_is_denied(srv):
    r = srv.get("/basic-silent/", headers=basic("alice", "wonderland"))
    assert r.status == 401


def test_provider_without_a_script_is_an_error(srv):
    srv.expect("/basic-none/", 500, r"MRB00530: the mruby authn provider is used for /basic-none/, "
                                    r"but no mrubyAuthnCheckPassword applies there",
               headers=basic("alice", "wonderland"))


# -------------------------------------------------------------- Digest

def test_digest_end_to_end_with_realm_hash(srv):
    for _ in range(2):
        r = digest_get(srv, "/digest/", "frodo", "ring")
        assert r.status == 200
        assert r.body == b"hello frodo via Digest"


def test_digest_wrong_password_and_unknown_user(srv):
    assert digest_get(srv, "/digest/", "frodo", "wrong").status == 401
    assert digest_get(srv, "/digest/", "gollum", "precious").status == 401


def test_digest_with_a_stored_hash(srv):
    r = digest_get(srv, "/digest-stored/", "sam", "potatoes")
    assert r.status == 200
    assert r.body == b"hello sam via Digest"
    assert digest_get(srv, "/digest-stored/", "frodo", "ring").status == 401


def test_digest_user_found_without_a_hash_is_an_error(srv):
    r = digest_get(srv, "/digest-nohash/", "frodo", "ring")
    assert r.status == 500
    srv.wait_log(r"MRB00532: mrubyAuthnGetRealmHash script for /digest-nohash/ returned AUTH_USER_FOUND")


# --------------------------------------------------------------- authz

def test_require_lines_keep_their_own_arguments(srv):
    # Interleaved, twice: a provider that mixed up the lines' arguments
    # (CVE-2014-8109 in mod_lua) would grant or deny the wrong users.
    for _ in range(2):
        r = srv.get("/admins/", headers=basic("alice", "wonderland"))
        assert r.status == 200 and r.body == b"hello alice via Basic"
        assert r.headers["X-Team-admins"] == "admins"

        r = srv.get("/staff/", headers=basic("alice", "wonderland"))
        assert r.status == 403
        assert r.headers["X-Team-staff"] == "staff|night shift"

        r = srv.get("/staff/", headers=basic("carol", "night"))
        assert r.status == 200 and r.body == b"hello carol via Basic"

        r = srv.get("/admins/", headers=basic("bob", "pass:with:colons"))
        assert r.status == 403
        assert r.headers["X-Team-admins"] == "admins"


def test_two_lines_of_one_provider_in_one_section(srv):
    r = srv.get("/both/", headers=basic("bob", "pass:with:colons"))
    assert r.status == 200
    assert r.headers["X-Team-staff"] == "staff"
    assert r.headers["X-Team-admins"] == "admins|staff"
    assert srv.get("/both/", headers=basic("alice", "wonderland")).status == 403


def test_require_not(srv):
    r = srv.get("/not-admins/", headers=basic("bob", "pass:with:colons"))
    assert r.status == 200
    assert r.body == b"hello bob via Basic"
    assert srv.get("/not-admins/", headers=basic("alice", "wonderland")).status == 403


def test_no_user_yet_asks_for_authentication(srv):
    r = srv.get("/admins/")
    assert r.status == 401
    assert r.headers["WWW-Authenticate"] == 'Basic realm="ruby basic"'


def test_authz_provider_alias(srv):
    assert srv.get("/alias/", headers=basic("alice", "wonderland")).status == 200
    r = srv.get("/alias/", headers=basic("bob", "pass:with:colons"))
    assert r.status == 403
    assert r.headers["X-Team-admins"] == "admins"


def test_authz_exception_is_a_general_error(srv):
    r, _ = srv.expect("/authz-raise/", 500,
                      r"MRB00030: AuthzProvider script .*raised RuntimeError .*directory server down")
    assert b"must not be seen" not in r.body


def test_authz_odd_answer_is_a_general_error(srv):
    srv.expect("/authz-odd/", 500, r"MRB00540: authz provider answers42 .*Apache.return\(42\)")


def test_many_clients_each_get_their_own_answer(srv):
    cases = [
        ("/admins/", "alice", "wonderland", 200), ("/admins/", "bob", "pass:with:colons", 403),
        ("/staff/", "bob", "pass:with:colons", 200), ("/staff/", "alice", "wonderland", 403),
        ("/basic/", "carol", "night", 200), ("/basic/", "carol", "day", 401),
    ]

    def client(n):
        wrong = []
        for i in range(len(cases) * 3):
            path, user, password, status = cases[(n + i) % len(cases)]
            r = srv.get(path, headers=basic(user, password))
            if r.status != status or (status == 200 and r.body != ("hello %s via Basic" % user).encode()):
                wrong.append((path, user, r.status))
            if i % 6 == 0 and digest_get(srv, "/digest/", "sam", "potatoes").status != 200:
                wrong.append(("/digest/", "sam"))
        return wrong

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        wrong = [w for ws in pool.map(client, range(16)) for w in ws]
    assert wrong == []


# mod_authz_core parses an alias's arguments after the directives inside
# it: with one there, the alias must still be of its own provider, not of
# the provider of the last Require line read before it.
ALIAS_WITH_DIRECTIVES = r"""
mrubyAuthzProviderCode team "z = Apache::AuthzProvider.new; Apache::Request.new.err_headers_out['X-Asked'] = 'team ' + z.args.join(','); Apache.return Apache::AuthzProvider::AUTHZ_DENIED"
mrubyAuthzProviderCode everyone "Apache::Request.new.err_headers_out['X-Asked'] = 'everyone'; Apache.return Apache::AuthzProvider::AUTHZ_GRANTED"
<Location /open>
    Require everyone
</Location>
<AuthzProviderAlias team staff admins>
    AuthName "staff only"
    <IfModule authn_core_module>
        AuthType Basic
    </IfModule>
</AuthzProviderAlias>
<Location /staff>
    Require staff
</Location>
"""


def test_authz_provider_alias_with_directives_inside(make_httpd, mpm):
    srv = make_httpd("alias-inside", mpm, ALIAS_WITH_DIRECTIVES, modules=("authn_core",))
    srv.write("htdocs/staff/index.html", "secret")
    srv.write("htdocs/open/index.html", "open")
    srv.start()
    r = srv.get("/staff/")
    assert (r.status, r.headers["X-Asked"]) == (403, "team admins"), r
    assert b"secret" not in r.body
    assert srv.get("/open/").status == 200


def test_authz_provider_alias_with_directives_inside_and_no_require_before(make_httpd):
    srv = make_httpd("alias-first", "event", modules=("authn_core",))
    code, out = srv.configtest(ALIAS_WITH_DIRECTIVES.replace("Require everyone", "Require all granted"))
    assert code == 0, out
