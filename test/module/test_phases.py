"""Every request phase is scriptable: one behavioural test per phase, the
defaults of Apache.return, First/Middle/Last order, and exceptions in the
access phases denying the request."""

import base64
import os
import time

from httpd import module_httpd, restarts

BODY = r"""
AddHandler mruby-script .mrb

# Before sections apply: server level only.
mrubyPostReadRequestCode "r = Apache::Request.new; r.notes['prr'] = 'read ' + r.method if r.uri.start_with?('/phase/')"
mrubyQuickHandlerCode "r = Apache::Request.new; if r.uri == '/quick' then Apache.rputs 'quick answer'; Apache.return Apache::OK end"
mrubyQuickHandlerFirstCode "r = Apache::Request.new; Apache.return Apache::HTTP_SERVICE_UNAVAILABLE if r.uri == '/quick/closed'"
# MapToStorage: answering OK skips the directory walk (and its Require).
mrubyMapToStorageCode "Apache.return Apache::OK if Apache::Request.new.uri == '/m2s/virtual'"

<Location /quick>
    Require all denied
</Location>

<Location /phase/prr>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs Apache::Request.new.notes['prr'].to_s"
</Location>

# TranslateName: map a URI to a file, or to a file and another handler.
<Location /translate>
    mrubyTranslateNameCode "r = Apache::Request.new; case r.uri; when '/translate/mapped' then r.filename = '{root}/scripts/mapped.txt'; Apache.return Apache::OK; when '/translate/script' then r.filename = '{root}/scripts/page.rb'; r.handler = 'mruby-script'; Apache.return Apache::OK; when '/translate/renamed' then r.uri = '/translate/plain.txt'; end"
</Location>
<Directory {root}/scripts>
    Require all granted
</Directory>

<Directory {docroot}/m2s>
    Require all denied
</Directory>
<Location /m2s>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'virtual resource'"
</Location>

<Location /hp>
    mrubyHeaderParserCode "r = Apache::Request.new; r.notes['hp'] = 'header ' + r.headers_in['X-Hp'].to_s"
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs Apache::Request.new.notes['hp']"
</Location>

# TypeChecker: content type of a static file; a handler for an extension.
<Location /tc>
    mrubyTypeCheckerFirstCode "r = Apache::Request.new; if r.uri.end_with?('.rb') then r.handler = 'mruby-script' else r.content_type = 'application/x-typed-by-ruby' end; Apache.return Apache::OK"
</Location>

<Location /acl>
    mrubyAccessCheckerCode "Apache.return Apache::HTTP_FORBIDDEN unless Apache::Request.new.headers_in['X-Allow'] == 'yes'"
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'allowed'"
</Location>
<Location /acl_raise>
    mrubyAccessCheckerCode "raise 'bug in the access rule'"
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'must not be seen'"
</Location>

# Basic authentication done in Ruby.
<Location /auth>
    AuthType Basic
    AuthName "ruby realm"
    Require valid-user
    mrubyCheckUserId {root}/scripts/authn.rb
    mrubyAuthCheckerFirstCode "Apache.return(%w[alice bob].include?(Apache::Request.new.user) ? Apache::OK : Apache::HTTP_FORBIDDEN)"
    SetHandler mruby-native-script
    mrubyHandlerCode "r = Apache::Request.new; Apache.rputs 'hello ' + r.user + ' (' + r.ap_auth_type + ')'"
</Location>
<Location /authn_raise>
    AuthType Basic
    AuthName "ruby realm"
    Require valid-user
    mrubyCheckUserIdCode "raise 'authn backend down'"
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'must not be seen'"
</Location>
<Location /authz_raise>
    AuthType Basic
    AuthName "ruby realm"
    Require valid-user
    mrubyCheckUserId {root}/scripts/authn.rb
    mrubyAuthCheckerFirstCode "raise 'authz backend down'"
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'must not be seen'"
</Location>

<Location /fixups>
    mrubyFixupsCode "r = Apache::Request.new; r.notes['fx'] = 'fixed up'; r.headers_out['X-Fixups'] = 'ran'"
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs Apache::Request.new.notes['fx']"
</Location>
<Location /fixups_raise>
    mrubyFixupsCode "raise 'fixups failed'"
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'must not be seen'"
</Location>

<Location /order>
    mrubyFixupsLastCode "n = Apache::Request.new.notes; n['o'] = n['o'].to_s + 'last,'"
    mrubyFixupsMiddleCode "n = Apache::Request.new.notes; n['o'] = n['o'].to_s + 'middle1,'"
    mrubyFixupsFirstCode "n = Apache::Request.new.notes; n['o'] = n['o'].to_s + 'first,'"
    mrubyFixupsCode "n = Apache::Request.new.notes; n['o'] = n['o'].to_s + 'middle2,'"
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs Apache::Request.new.notes['o']"
</Location>

<Location /logged>
    mrubyLogTransactionCode "r = Apache::Request.new; File.open('{root}/out/transactions.log', 'a') { |f| f.puts r.uri + ' ' + r.status.to_s + ' ' + r.notes['fx'].to_s }"
    mrubyFixupsCode "Apache::Request.new.notes['fx'] = 'note-from-fixups'"
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'logged'"
</Location>
<Location /logged_raise>
    mrubyLogTransactionCode "raise 'logging failed'"
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'still fine'"
</Location>
<Location /logged_rputs>
    mrubyLogTransactionCode "begin; Apache.rputs 'late'; rescue RuntimeError => e; File.open('{root}/out/late.log', 'a') { |f| f.puts e.message }; end"
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'on time'"
</Location>

<Location /filtered>
    mrubyInsertFilterCode "Apache::Request.new.add_output_filter('CaseFilter')"
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'make me loud'"
</Location>
<Location /filter_unknown>
    mrubyInsertFilterCode "begin; Apache::Request.new.add_output_filter('NoSuchFilter'); rescue ArgumentError => e; Apache::Request.new.notes['e'] = e.message; end"
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs Apache::Request.new.notes['e']"
</Location>

<Location /default_declined>
    mrubyTranslateNameCode "Apache::Request.new.notes['t'] = 'translate ran'"
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs Apache::Request.new.notes['t'] + ' and declined'"
</Location>
"""

AUTHN_RB = r'''
r = Apache::Request.new
auth = r.headers_in["Authorization"].to_s
if auth.start_with?("Basic ")
  user, password = auth[6, auth.size].unpack("m")[0].split(":", 2)
  if password == "secret-#{user}"
    r.user = user
    r.ap_auth_type = "Basic"
    Apache.return Apache::OK
  else
    Apache.return Apache::HTTP_UNAUTHORIZED
  end
else
  r.err_headers_out["WWW-Authenticate"] = 'Basic realm="ruby realm"'
  Apache.return Apache::HTTP_UNAUTHORIZED
end
'''

FILES = {
    "scripts/mapped.txt": "mapped file\n",
    "scripts/page.rb": 'Apache.rputs "script at " + Apache::Request.new.uri\n',
    "scripts/authn.rb": AUTHN_RB,
    "htdocs/translate/plain.txt": "plain static\n",
    "htdocs/tc/file.txt": "typed\n",
    "htdocs/m2s/other": "on disk, but denied\n",
    "htdocs/tc/run.rb": 'Apache.rputs "ran by the type checker\'s handler"\n',
}

server = module_httpd("phases", BODY, files=FILES, modules=("authn_core", "authz_user", "case_filter"))


def basic(user, password):
    return {"Authorization": "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode()}


def test_post_read_request_sees_every_request(server):
    r = server.get("/phase/prr")
    assert (r.status, r.body) == (200, b"read GET")


def test_quick_handler_answers_before_uri_mapping_and_access_checks(server):
    r = server.get("/quick")
    assert (r.status, r.body) == (200, b"quick answer")


def test_quick_handler_declines_by_default(server):
    r = server.get("/quick/other")  # declined: normal processing, denied by Require
    assert r.status == 403


def test_quick_handler_first_can_refuse(server):
    r = server.get("/quick/closed")
    assert r.status == 503
    assert b"quick answer" not in r.body


def test_translate_name_maps_a_uri_to_a_file(server):
    r = server.get("/translate/mapped")
    assert (r.status, r.body) == (200, b"mapped file\n")


def test_translate_name_maps_to_a_file_and_a_handler(server):
    r = server.get("/translate/script")
    assert (r.status, r.body) == (200, b"script at /translate/script")


def test_translate_name_rewrites_the_uri_for_httpd_mapping(server):
    r = server.get("/translate/renamed")
    assert (r.status, r.body) == (200, b"plain static\n")


def test_translate_name_declined_passes_through(server):
    r = server.get("/translate/plain.txt")
    assert (r.status, r.body) == (200, b"plain static\n")


def test_map_to_storage_ok_skips_the_directory_walk(server):
    assert server.get("/m2s/other").status == 403
    r = server.get("/m2s/virtual")
    assert (r.status, r.body) == (200, b"virtual resource")


def test_header_parser(server):
    r = server.get("/hp", headers={"X-Hp": "value-1"})
    assert (r.status, r.body) == (200, b"header value-1")


def test_type_checker_sets_content_type(server):
    r = server.get("/tc/file.txt")
    assert (r.status, r.body) == (200, b"typed\n")
    assert r.headers["Content-Type"] == "application/x-typed-by-ruby"


def test_type_checker_sets_handler(server):
    r = server.get("/tc/run.rb")
    assert (r.status, r.body) == (200, b"ran by the type checker's handler")


def test_access_checker_allows_and_denies(server):
    assert server.get("/acl").status == 403
    r = server.get("/acl", headers={"X-Allow": "yes"})
    assert (r.status, r.body) == (200, b"allowed")


def test_access_checker_exception_denies(server):
    r, _ = server.expect("/acl_raise", 500, r"MRB00030: AccessChecker script .* raised RuntimeError at .*: "
                                            r"bug in the access rule")
    assert b"must not be seen" not in r.body


def test_basic_auth_in_ruby(server):
    r = server.get("/auth")
    assert r.status == 401
    assert r.headers["WWW-Authenticate"] == 'Basic realm="ruby realm"'
    assert server.get("/auth", headers=basic("alice", "wrong")).status == 401
    r = server.get("/auth", headers=basic("alice", "secret-alice"))
    assert (r.status, r.body) == (200, b"hello alice (Basic)")
    # authenticated, but not authorized
    assert server.get("/auth", headers=basic("mallory", "secret-mallory")).status == 403


def test_authentication_exception_denies(server):
    r, _ = server.expect("/authn_raise", 500, r"MRB00030: CheckUserId script .* authn backend down",
                         headers=basic("alice", "secret-alice"))
    assert b"must not be seen" not in r.body


def test_authorization_exception_denies(server):
    r, _ = server.expect("/authz_raise", 500, r"MRB00030: AuthChecker script .* authz backend down",
                         headers=basic("alice", "secret-alice"))
    assert b"must not be seen" not in r.body


def test_fixups_note_is_read_by_the_handler(server):
    r = server.get("/fixups")
    assert (r.status, r.body) == (200, b"fixed up")
    assert r.headers["X-Fixups"] == "ran"


def test_fixups_exception_is_500(server):
    r = server.get("/fixups_raise")
    assert r.status == 500 and b"must not be seen" not in r.body


def test_first_middle_last_order(server):
    r = server.get("/order")
    assert (r.status, r.body) == (200, b"first,middle1,middle2,last,")


def wait_for_file(path, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if os.path.exists(path) and open(path).read():
            return open(path).read()
        time.sleep(0.05)
    raise AssertionError("%s was not written" % path)


def test_log_transaction_runs_after_the_response(server):
    r = server.get("/logged")
    assert (r.status, r.body) == (200, b"logged")
    text = wait_for_file(server.path("out/transactions.log"))
    assert "/logged 200 note-from-fixups" in text


def test_log_transaction_exception_is_only_logged(server):
    r = server.get("/logged_raise")
    assert (r.status, r.body) == (200, b"still fine")
    server.wait_log(r"MRB00030: LogTransaction script .* logging failed")


def test_output_after_the_response_is_refused(server):
    r = server.get("/logged_rputs")
    assert (r.status, r.body) == (200, b"on time")
    assert "the response has already been sent" in wait_for_file(server.path("out/late.log"))
    assert server.get("/logged").status == 200  # the connection's next response is intact


def test_insert_filter_adds_a_filter(server):
    r = server.get("/filtered")
    assert (r.status, r.body) == (200, b"MAKE ME LOUD")


def test_insert_filter_unknown_filter_raises(server):
    r = server.get("/filter_unknown")
    assert (r.status, r.body) == (200, b"no output filter named 'NoSuchFilter' is registered")


def test_phases_default_to_declined(server):
    # TranslateName did not call Apache.return: DECLINED, so httpd's own
    # translation still ran and the handler answered.
    r = server.get("/default_declined")
    assert (r.status, r.body) == (200, b"translate ran and declined")


# A phase's hook is registered only while some section scripts it: the
# hooks must follow the configuration through graceful restarts.
OPEN = """
<Location /gate>
    SetHandler mruby-native-script
    mrubyHandlerCode "r = Apache::Request.new; Apache.rputs 'open ' + r.notes['fixed'].to_s"
</Location>
"""

GATED = OPEN + """
<Location /gate>
    mrubyAccessCheckerLastCode "Apache.return Apache::HTTP_FORBIDDEN unless Apache::Request.new.headers_in['X-Key'] == 'k'"
    mrubyFixupsFirstCode "Apache::Request.new.notes['fixed'] = 'fixed'"
</Location>
"""


@restarts
def test_phase_hooks_follow_the_configuration_across_restarts(make_httpd, mpm):
    srv = make_httpd("hooks-restart", mpm, OPEN).start()
    r = srv.get("/gate")
    assert (r.status, r.body) == (200, b"open ")

    srv.body = GATED
    srv.write_config()
    srv.graceful()
    assert srv.get("/gate").status == 403
    r = srv.get("/gate", headers={"X-Key": "k"})
    assert (r.status, r.body) == (200, b"open fixed")

    srv.body = OPEN
    srv.write_config()
    srv.graceful()
    r = srv.get("/gate")
    assert (r.status, r.body) == (200, b"open ")
