"""A private certificate authority for TLS tests, made with the openssl
command line: a CA, a server certificate for 127.0.0.1 and localhost,
and client certificates signed by the CA (or by a stranger)."""

import os
import socket
import ssl
import subprocess
import http.client


def _openssl(*args, cwd):
    subprocess.run(("openssl",) + args, cwd=cwd, check=True, capture_output=True, timeout=60)


def _ext(cwd, name, text):
    with open(os.path.join(cwd, name), "w") as f:
        f.write(text)
    return name


def make_ca(directory, name="mm-test-ca"):
    """ca.key, ca.pem in directory (made if absent); returns its path."""
    os.makedirs(directory, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", name + ".key", "-out", name + ".pem", "-days", "2", "-subj", "/O=mod_mruby tests/CN=" + name,
             cwd=directory)
    return directory


def sign(directory, ca, name, subject, server=False):
    """name.key and name.pem, for subject (an openssl -subj), signed by the
    CA named ca in directory; a server certificate names 127.0.0.1 and
    localhost."""
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", name + ".key",
             "-out", name + ".csr", "-subj", subject, cwd=directory)
    if server:
        ext = _ext(directory, name + ".ext", "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                   "extendedKeyUsage=serverAuth\n")
    else:
        ext = _ext(directory, name + ".ext", "extendedKeyUsage=clientAuth\n")
    _openssl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".pem", "-CAkey", ca + ".key", "-CAcreateserial",
             "-out", name + ".pem", "-days", "2", "-extfile", ext, cwd=directory)
    for f in (name + ".key", name + ".pem"):
        os.chmod(os.path.join(directory, f), 0o644)


def make_pki(directory):
    """The CA, a server certificate, a client certificate of the CA and
    one of another CA; returns directory."""
    make_ca(directory, "ca")
    sign(directory, "ca", "server", "/CN=localhost", server=True)
    sign(directory, "ca", "alice", "/O=mod_mruby tests/OU=staff/CN=alice")
    make_ca(directory, "stranger-ca")
    sign(directory, "stranger-ca", "mallory", "/O=elsewhere/CN=mallory")
    return directory


def context(directory, client=None, tls13=True):
    """A client context trusting the CA in directory, presenting the client
    certificate named client (if given)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(os.path.join(directory, "ca.pem"))
    if not tls13:
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    if client:
        ctx.load_cert_chain(os.path.join(directory, client + ".pem"), os.path.join(directory, client + ".key"))
    return ctx


def get(port, path, ctx, host="localhost", timeout=30):
    """(status, body text) of a GET over TLS, with host as the SNI name."""
    conn = http.client.HTTPSConnection(host, port, context=ctx, timeout=timeout)
    # connect to the loopback whatever the name resolves to
    conn.sock = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=timeout),
                                server_hostname=host)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read().decode("utf-8", "replace")
    finally:
        conn.close()


# A TLS virtual host beside the server's plain one, on its own port, with
# the certificates make_pki writes under {root}/pki: client certificates
# optional, required under /strict; mod_ssl's variables in the environment
# (StdEnvVars) under /env only; .mrb files run as scripts.
VHOST = r"""
AddHandler mruby-script .mrb
Listen 127.0.0.1:{tls_port}
<VirtualHost 127.0.0.1:{tls_port}>
    ServerName localhost
    SSLEngine on
    SSLCertificateFile "{root}/pki/server.pem"
    SSLCertificateKeyFile "{root}/pki/server.key"
    SSLCACertificateFile "{root}/pki/ca.pem"
    SSLVerifyClient optional
    SSLVerifyDepth 1
    <Location /env>
        SSLOptions +StdEnvVars
    </Location>
    <Location /strict>
        SSLVerifyClient require
    </Location>
</VirtualHost>
"""


def vhost(tls_port):
    """VHOST listening on 127.0.0.1:tls_port."""
    return VHOST.replace("{tls_port}", str(tls_port))
