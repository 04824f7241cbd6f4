"""Recipe docs/recipes/jwt-auth: JWTs made by PyJWT (and by hand, for what
PyJWT refuses to make) for every algorithm the recipe accepts, checked in
an AccessChecker against jwks.json: valid tokens let the subject in; a
wrong key, a changed payload, alg "none", an HS256 token keyed with the RSA
public key, expired and not-yet-valid tokens, other issuers and audiences,
and malformed tokens are refused with a 401 and a line in the log."""

import base64
import hashlib
import hmac
import json
import os
import time

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt.algorithms import ECAlgorithm, HMACAlgorithm, OKPAlgorithm, RSAAlgorithm

from recipes import recipe_httpd, server_root

SITE = """
<Location /orders/whoami>
    SetHandler mruby-native-script
    mrubyHandlerCode "r = Apache::Request.new; Apache.rputs [r.user, r.ap_auth_type, r.subprocess_env['JWT_SCOPE']].join(' ')"
</Location>
"""

FILES = {"htdocs/orders/list.json": '{"orders": []}\n'}

_srv = recipe_httpd("jwt-auth", SITE, FILES)

ISSUER = "https://id.example.com/"
AUDIENCE = "orders-api"

RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER_RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
P256 = ec.generate_private_key(ec.SECP256R1())
P384 = ec.generate_private_key(ec.SECP384R1())
P521 = ec.generate_private_key(ec.SECP521R1())
ED25519 = ed25519.Ed25519PrivateKey.generate()
SECRET = os.urandom(32)

# kid: (alg, private key or secret, JWK of the public key)
KEYS = {
    "rsa": ("RS256", RSA_KEY, RSAAlgorithm.to_jwk(RSA_KEY.public_key())),
    "rsa384": ("RS384", RSA_KEY, RSAAlgorithm.to_jwk(RSA_KEY.public_key())),
    "rsa512": ("RS512", RSA_KEY, RSAAlgorithm.to_jwk(RSA_KEY.public_key())),
    "pss": ("PS256", RSA_KEY, RSAAlgorithm.to_jwk(RSA_KEY.public_key())),
    "pss512": ("PS512", RSA_KEY, RSAAlgorithm.to_jwk(RSA_KEY.public_key())),
    "p256": ("ES256", P256, ECAlgorithm.to_jwk(P256.public_key())),
    "p384": ("ES384", P384, ECAlgorithm.to_jwk(P384.public_key())),
    "p521": ("ES512", P521, ECAlgorithm.to_jwk(P521.public_key())),
    "ed": ("EdDSA", ED25519, OKPAlgorithm.to_jwk(ED25519.public_key())),
    "hs": ("HS256", SECRET, HMACAlgorithm.to_jwk(SECRET)),
}


def jwks():
    keys = []
    for kid, (alg, _, jwk) in KEYS.items():
        k = json.loads(jwk)
        k.update(kid=kid, alg=alg)
        keys.append(k)
    return json.dumps({"keys": keys})


@pytest.fixture(scope="module")
def srv(_srv):
    path = os.path.join(server_root(_srv), "mruby", "jwks.json")
    with open(path + ".new", "w") as f:
        f.write(jwks())
    os.chmod(path + ".new", 0o644)
    os.rename(path + ".new", path)
    return _srv


def claims(**kw):
    now = int(time.time())
    out = {"iss": ISSUER, "aud": AUDIENCE, "sub": "ann", "exp": now + 300, "iat": now, "scope": "orders:read"}
    out.update(kw)
    return {k: v for k, v in out.items() if v is not None}


def token(kid, payload=None, alg=None, key=None):
    key_alg, private, _ = KEYS[kid]
    return jwt.encode(payload or claims(), key or private, algorithm=alg or key_alg, headers={"kid": kid})


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def by_hand(header, payload, sign):
    """A token PyJWT would not make: sign(signing input) -> signature."""
    head = b64(json.dumps(header).encode()) + "." + b64(json.dumps(payload).encode())
    return head + "." + b64(sign(head.encode()))


def get(srv, tok, path="/orders/whoami"):
    return srv.get(path, headers={"Authorization": "Bearer " + tok})


def refused(srv, tok, why):
    r = get(srv, tok)
    assert r.status == 401, (why, r.body)
    assert r.headers["WWW-Authenticate"] == 'Bearer realm="orders", error="invalid_token"'
    srv.wait_log(r"\[mruby:warn\].*MRB00400: .*jwt_auth\.rb:\d+: JWT refused for /orders/whoami: %s" % why)


@pytest.mark.parametrize("kid", sorted(KEYS))
def test_valid_tokens_of_every_algorithm(srv, kid):
    for _ in range(3):  # the keys are parsed once, then reused
        r = get(srv, token(kid))
        assert (r.status, r.body) == (200, b"ann Bearer orders:read"), (kid, srv.error_log()[-1500:].split("raised")[-1][:300])
    assert get(srv, token(kid), "/orders/list.json").body == b'{"orders": []}\n'


def test_no_token(srv):
    for headers in ({}, {"Authorization": "Basic YTpi"}, {"Authorization": "Bearer  "}):
        r = srv.get("/orders/list.json", headers=headers)
        assert r.status == 401 and r.headers["WWW-Authenticate"] == 'Bearer realm="orders"'


def test_wrong_key(srv):
    refused(srv, token("rsa", key=OTHER_RSA_KEY), "a wrong signature")
    refused(srv, token("p256", key=ec.generate_private_key(ec.SECP256R1())), "a wrong signature")
    refused(srv, token("ed", key=ed25519.Ed25519PrivateKey.generate()), "a wrong signature")
    refused(srv, token("hs", key=os.urandom(32)), "a wrong signature")


@pytest.mark.parametrize("kid", ["rsa", "pss", "p256", "ed", "hs"])
def test_changed_payload(srv, kid):
    head, _, sig = token(kid).split(".")
    forged = b64(json.dumps(claims(sub="root")).encode())
    refused(srv, "%s.%s.%s" % (head, forged, sig), "a wrong signature")


def test_alg_none(srv):
    tok = by_hand({"alg": "none", "kid": "rsa"}, claims(), lambda _: b"")
    refused(srv, tok, r'alg "none" for the RS256 key "rsa"')
    tok = by_hand({"alg": "none"}, claims(), lambda _: b"")
    refused(srv, tok, "no key nil")


def test_hs256_keyed_with_the_rsa_public_key(srv):
    """The classic confusion: the public key's PEM (or its JWK) as an HMAC
    secret, with the RSA key's kid."""
    pem = RSA_KEY.public_key().public_bytes(serialization.Encoding.PEM,
                                            serialization.PublicFormat.SubjectPublicKeyInfo)
    for secret in (pem, KEYS["rsa"][2].encode()):
        tok = by_hand({"alg": "HS256", "kid": "rsa"}, claims(), lambda s: hmac.new(secret, s, hashlib.sha256).digest())
        refused(srv, tok, r'alg "HS256" for the RS256 key "rsa"')
    # and an RS256 token naming the HS key
    tok = jwt.encode(claims(), RSA_KEY, algorithm="RS256", headers={"kid": "hs"})
    refused(srv, tok, r'alg "RS256" for the HS256 key "hs"')


def test_ecdsa_signature_in_der_is_refused(srv):
    """JWS's ES256 signature is r and s, 64 bytes: the DER form is not."""
    from cryptography.hazmat.primitives import hashes
    tok = by_hand({"alg": "ES256", "kid": "p256"}, claims(), lambda s: P256.sign(s, ec.ECDSA(hashes.SHA256())))
    refused(srv, tok, "a wrong signature")


def test_times(srv):
    now = int(time.time())
    refused(srv, token("rsa", claims(exp=now - 60)), "expired")
    refused(srv, token("p256", claims(nbf=now + 120)), "not valid yet")
    refused(srv, token("rsa", claims(exp=None)), 'no "exp"')
    # within the leeway of 30 seconds
    assert get(srv, token("rsa", claims(exp=now - 10))).status == 200
    assert get(srv, token("rsa", claims(nbf=now + 10))).status == 200


def test_issuer_audience_subject(srv):
    refused(srv, token("ed", claims(iss="https://evil.example.com/")), 'issuer "https://evil.example.com/"')
    refused(srv, token("ed", claims(aud="other-api")), 'audience "other-api"')
    refused(srv, token("ed", claims(sub=None)), 'no "sub"')
    assert get(srv, token("ed", claims(aud=["other-api", AUDIENCE]))).status == 200


def test_malformed_tokens(srv):
    good = token("rsa")
    head, body, sig = good.split(".")
    refused(srv, head + "." + body, "not three parts")
    refused(srv, good + ".x", "not three parts")
    refused(srv, head + "." + body + "." + sig + "=", "a part that is not base64url")
    refused(srv, b64(b"not json") + "." + body + "." + sig, "unexpected character")
    refused(srv, b64(b"[1]") + "." + body + "." + sig, "a part that is not a JSON object")
    refused(srv, "x" * 6000 + "." + body + "." + sig, "unexpected byte 0xc7 at byte 0")
    refused(srv, head + "." + body + "." + sig[:-1], "invalid base64")
    refused(srv, by_hand({"alg": "RS256", "kid": "rsa", "crit": ["exp"]}, claims(), lambda _: b"x"),
            'a "crit" header')
    srv.check_log()
