"""Request#ssl?, Request#ssl_var, Connection#ssl?: the TLS facts of mod_ssl
through httpd's ssl hooks, without SSLOptions +StdEnvVars; nil outside
TLS. The values must be those mod_ssl exports with +StdEnvVars."""

import os

import pytest

import tls
from httpd import Httpd, MPMS
from loopback import free_port

# The variables the test compares; mod_ssl exports each with StdEnvVars
# when it has a value.
NAMES = ("HTTPS SSL_PROTOCOL SSL_CIPHER SSL_CIPHER_USEKEYSIZE SSL_CIPHER_ALGKEYSIZE SSL_CIPHER_EXPORT "
         "SSL_VERSION_INTERFACE SSL_VERSION_LIBRARY SSL_SECURE_RENEG SSL_COMPRESS_METHOD SSL_TLS_SNI "
         "SSL_SESSION_RESUMED SSL_CLIENT_VERIFY SSL_CLIENT_S_DN SSL_CLIENT_S_DN_CN SSL_CLIENT_S_DN_O "
         "SSL_CLIENT_S_DN_OU SSL_CLIENT_I_DN SSL_CLIENT_I_DN_CN SSL_CLIENT_M_SERIAL SSL_CLIENT_M_VERSION "
         "SSL_CLIENT_V_START SSL_CLIENT_V_END SSL_CLIENT_V_REMAIN SSL_CLIENT_A_SIG SSL_CLIENT_A_KEY "
         "SSL_SERVER_S_DN SSL_SERVER_S_DN_CN SSL_SERVER_I_DN SSL_SERVER_M_SERIAL SSL_SERVER_A_KEY").split()

# Each line: NAME<TAB>ssl_var's value (inspect)<TAB>the environment's.
COMPARE = (
    'r = Apache::Request.new\n'
    'env = r.subprocess_env\n'
    'Apache.echo "ssl?\\t#{r.ssl?}\\t#{r.connection.ssl?}"\n'
    '%s.each { |n| Apache.echo "#{n}\\t#{r.ssl_var(n).inspect}\\t#{env[n].inspect}" }\n'
    'Apache.echo "UNKNOWN\\t#{r.ssl_var("SSL_NO_SUCH_THING").inspect}"\n'
) % repr(NAMES).replace("'", '"').replace("(", "[").replace(")", "]")

FILES = {
    "htdocs/compare.mrb": COMPARE,
    "htdocs/env/compare.mrb": COMPARE,
    "htdocs/strict/dn.mrb": 'Apache.rputs Apache::Request.new.ssl_var("SSL_CLIENT_S_DN_CN").to_s\n',
    "htdocs/bad.mrb": (
        'r = Apache::Request.new\n'
        '[nil, 1, "SSL_\\0X"].each { |n| begin; r.ssl_var(n); rescue => e; Apache.echo e.class; end }\n'
    ),
}


@pytest.fixture(scope="module", params=MPMS)
def server(request):
    tls_port = free_port()
    srv = Httpd("ssl", request.param, tls.vhost(tls_port), modules=("socache_shmcb", "ssl"),
                files=FILES)
    tls.make_pki(srv.path("pki"))
    srv.tls_port = tls_port
    srv.start()
    yield srv
    srv.stop()
    srv.cleanup()


def table(text):
    rows = {}
    for line in text.splitlines():
        name, *values = line.split("\t")
        rows[name] = values
    return rows


def ssl_get(srv, path, client=None, **kw):
    status, body = tls.get(srv.tls_port, path, tls.context(srv.path("pki"), client, **kw))
    assert status == 200, (status, body, srv.error_log()[-2000:])
    return table(body)


@pytest.mark.parametrize("client,tls13", [("alice", True), ("alice", False), (None, True)])
def test_ssl_var_equals_std_env_vars(server, client, tls13):
    rows = ssl_get(server, "/env/compare.mrb", client, tls13=tls13)
    assert rows["ssl?"] == ["true", "true"]
    for name in NAMES:
        mine, env = rows[name]
        if name == "SSL_CLIENT_V_REMAIN" and client:
            # Whole days left, read at each lookup: the certificate is made
            # for 2 days, so within its first second it has 2 left, then 1,
            # and the environment (fixups) and the script may fall either side.
            assert {mine, env} <= {'"1"', '"2"'}, (name, mine, env)
            continue
        assert mine == env, (name, mine, env)
    assert rows["HTTPS"][0] == '"on"'
    assert rows["SSL_PROTOCOL"][0] == ('"TLSv1.3"' if tls13 else '"TLSv1.2"')
    assert rows["SSL_TLS_SNI"][0] == '"localhost"'
    assert rows["SSL_SERVER_S_DN_CN"][0] == '"localhost"'
    if client:
        assert rows["SSL_CLIENT_VERIFY"][0] == '"SUCCESS"'
        assert rows["SSL_CLIENT_S_DN"][0] == '"CN=alice,OU=staff,O=mod_mruby tests"'
        assert rows["SSL_CLIENT_S_DN_CN"][0] == '"alice"'
        assert rows["SSL_CLIENT_I_DN_CN"][0] == '"ca"'
    else:
        assert rows["SSL_CLIENT_VERIFY"][0] == '"NONE"'
        assert rows["SSL_CLIENT_S_DN"][0] == "nil"
    assert rows["UNKNOWN"] == ["nil"]


def test_without_std_env_vars_the_environment_is_empty(server):
    """Outside the <Location> with +StdEnvVars, the environment has none of
    them, and ssl_var still answers."""
    rows = ssl_get(server, "/compare.mrb", "alice")
    assert rows["SSL_CLIENT_S_DN_CN"] == ['"alice"', "nil"]
    assert rows["SSL_PROTOCOL"][1] == "nil" and rows["SSL_PROTOCOL"][0].startswith('"TLSv1')


def test_outside_tls_everything_is_nil(server):
    out = table(server.ok("/env/compare.mrb").text)
    assert out["ssl?"] == ["false", "false"]
    for name in NAMES:
        assert out[name] == ["nil", "nil"], name
    assert out["UNKNOWN"] == ["nil"]


def test_required_client_certificate(server):
    """SSLVerifyClient require in a <Location> (a renegotiation under TLS
    1.2): the script sees the verified client."""
    rows = ssl_get(server, "/strict/dn.mrb", "alice", tls13=False)
    assert list(rows) == ["alice"]


def test_client_of_another_ca_is_refused(server):
    """mallory's certificate is signed by a CA the server does not know:
    the handshake fails (optional verification still refuses a bad one)."""
    import ssl
    with pytest.raises((ssl.SSLError, ConnectionResetError, BrokenPipeError)):
        tls.get(server.tls_port, "/env/compare.mrb", tls.context(server.path("pki"), "mallory"))


def test_bad_names(server):
    status, body = tls.get(server.tls_port, "/bad.mrb", tls.context(server.path("pki")))
    assert (status, body.split()) == (200, ["TypeError", "TypeError", "ArgumentError"])
