"""What an HTTP client sends to authenticate, for the tests of
authentication providers: Basic credentials, and a whole Digest exchange
as a browser makes it."""

import base64
import hashlib
import re


def md5(text):
    """The MD5 of text (UTF-8), in hex, as Digest authentication uses it."""
    return hashlib.md5(text.encode()).hexdigest()


def basic(user, password):
    """The Authorization header of Basic credentials."""
    token = base64.b64encode(("%s:%s" % (user, password)).encode()).decode()
    return {"Authorization": "Basic " + token}


def digest_get(srv, path, user, password):
    """A Digest exchange as a browser does it: the challenge, then the
    answer computed from it (RFC 2617, qop=auth)."""
    challenge = srv.get(path)
    assert challenge.status == 401
    header = challenge.headers["WWW-Authenticate"]
    assert header.startswith("Digest ")
    params = dict(re.findall(r'(\w+)="?([^",]*)"?', header))
    realm, nonce = params["realm"], params["nonce"]
    nc, cnonce = "00000001", "0a4f113b"
    ha1 = md5("%s:%s:%s" % (user, realm, password))
    ha2 = md5("GET:%s" % path)
    response = md5(":".join((ha1, nonce, nc, cnonce, "auth", ha2)))
    auth = ('Digest username="%s", realm="%s", nonce="%s", uri="%s", algorithm=MD5, '
            'response="%s", qop=auth, nc=%s, cnonce="%s"'
            % (user, realm, nonce, path, response, nc, cnonce))
    return srv.get(path, headers={"Authorization": auth})
