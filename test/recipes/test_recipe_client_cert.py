"""Recipe docs/recipes/client-cert: an AccessChecker maps the subject of a
verified client certificate to a user from client-certs.txt; anyone else
(no TLS, no certificate, a certificate not listed, one of another CA) is
refused; the file is re-read without a reload."""

import atexit
import os
import shutil
import ssl
import tempfile
import time

import pytest

import tls
from loopback import free_port
from recipes import recipe_httpd, replace_file, server_root, set_setting

# The test's CA and certificates, made once for the module (httpd reads
# them from here at start).
PKI = tempfile.mkdtemp(prefix="mm-client-cert-pki-", dir=os.environ.get("MM_TEST_TMP", "/tmp"))
os.chmod(PKI, 0o755)
atexit.register(shutil.rmtree, PKI, True)
tls.make_pki(PKI)
tls.sign(PKI, "ca", "build-bot", "/O=Acme Corp/OU=ci/CN=build-bot")
tls.sign(PKI, "ca", "intruder", "/O=Acme Corp/OU=ci/CN=intruder")

TLS_PORT = free_port()

# The site: an https virtual host that asks for a certificate of the CA,
# and what the handler behind the check sees.
SITE = """
Listen 127.0.0.1:%(port)d
<VirtualHost 127.0.0.1:%(port)d>
    ServerName localhost
    SSLEngine on
    SSLCertificateFile "%(pki)s/server.pem"
    SSLCertificateKeyFile "%(pki)s/server.key"
    SSLCACertificateFile "%(pki)s/ca.pem"
    SSLVerifyClient optional
</VirtualHost>
<Location /partners/whoami>
    SetHandler mruby-native-script
    mrubyHandlerCode "r = Apache::Request.new; Apache.rputs [r.user, r.ap_auth_type].join(' ')"
</Location>
""" % {"port": TLS_PORT, "pki": PKI}

FILES = {"htdocs/partners/price-list.csv": "item,price\nwidget,3\n", "htdocs/index.html": "home\n"}



def quick_refresh(server):
    set_setting(server, "client_cert.rb", "CLIENT_CERTS_REFRESH", 0.5)


srv = recipe_httpd("client-cert", SITE, FILES, settings=quick_refresh)

# The script reads the file again every CLIENT_CERTS_REFRESH seconds (2 as
# shipped): the tests set 0.5, and wait twice that for every thread to
# have read it.
REFRESH = 1.0


def get(path, client=None, **kw):
    return tls.get(TLS_PORT, path, tls.context(PKI, client, **kw))


def certs_path(server):
    return os.path.join(server_root(server), "mruby", "client-certs.txt")


def test_listed_certificate_names_the_user(srv):
    assert get("/partners/whoami", "build-bot") == (200, "acme Certificate")
    assert get("/partners/price-list.csv", "build-bot") == (200, "item,price\nwidget,3\n")
    # TLS 1.2 as well
    assert get("/partners/whoami", "build-bot", tls13=False) == (200, "acme Certificate")


def test_unlisted_certificate_is_refused(srv):
    status, body = get("/partners/price-list.csv", "intruder")
    assert status == 403 and "widget" not in body
    srv.wait_log(r'MRB00400: .*client_cert\.rb:\d+: /partners/price-list\.csv: refused \(TLS: true, '
                 r'verify: "SUCCESS", subject: "CN=intruder,OU=ci,O=Acme Corp"\)')


def test_no_certificate_is_refused(srv):
    assert get("/partners/whoami")[0] == 403
    srv.wait_log(r'refused \(TLS: true, verify: "NONE", subject: nil\)')


def test_plain_http_is_refused(srv):
    srv.expect("/partners/whoami", 403, r"refused \(TLS: false, verify: nil, subject: nil\)")


def test_certificate_of_another_ca_fails_the_handshake(srv):
    with pytest.raises((ssl.SSLError, ConnectionResetError, BrokenPipeError)):
        get("/partners/whoami", "mallory")


def test_outside_partners_no_certificate_needed(srv):
    assert get("/") == (200, "home\n")


def test_file_edited_while_serving(srv):
    path = certs_path(srv)
    with open(path) as f:
        shipped = f.read()
    try:
        replace_file(path, shipped + "intruder-co CN=intruder,OU=ci,O=Acme Corp\n")
        time.sleep(REFRESH)
        for _ in range(4):  # whichever thread answers
            assert get("/partners/whoami", "intruder") == (200, "intruder-co Certificate")
    finally:
        replace_file(path, shipped)
    time.sleep(REFRESH)
    for _ in range(4):
        assert get("/partners/whoami", "intruder")[0] == 403
