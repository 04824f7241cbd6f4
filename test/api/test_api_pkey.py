"""OpenSSL::PKey: keys read from PEM and DER (public, PKCS#1, private)
and made from JWKs, signatures made by Python's cryptography verified in
CRuby's form and in JWS's, and bad keys, bad JWKs, mismatched algorithms
answered with Ruby exceptions."""

import json

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from httpd import module_httpd

BODY = r"""
AddHandler mruby-script .mrb
"""

# POST a JSON list of cases; each is run and answered with its value's
# inspect or its exception's class and message.
RUN = r"""
cases = JSON.parse(Apache::Request.new.body)
out = cases.map do |c|
  begin
    data = Base64.strict_decode64(c["data"].to_s)
    sig = Base64.strict_decode64(c["sig"].to_s)
    key = case c["from"]
          when "read" then OpenSSL::PKey.read(Base64.strict_decode64(c["key"]))
          when "rsa" then OpenSSL::PKey::RSA.new(Base64.strict_decode64(c["key"]))
          when "ec" then OpenSSL::PKey::EC.new(Base64.strict_decode64(c["key"]))
          when "jwk" then OpenSSL::PKey.from_jwk(c["key"])
          end
    case c["op"]
    when "info" then [key.class.to_s, key.oid, key.bits, key.dup.public_to_pem == key.public_to_pem].inspect
    when "verify" then key.verify(c["digest"], sig, data).inspect
    when "jws" then key.verify_jws(c["alg"], sig, data).inspect
    end
  rescue Exception => e
    "#{e.class}: #{e.message}"
  end
end
Apache.rputs JSON.generate(out)
"""

server = module_httpd("pkey", BODY, files={"htdocs/run.mrb": RUN})

RSA = rsa.generate_private_key(public_exponent=65537, key_size=2048)
RSA_1024 = rsa.generate_private_key(public_exponent=65537, key_size=1024)
P256 = ec.generate_private_key(ec.SECP256R1())
ED = ed25519.Ed25519PrivateKey.generate()
DATA = b"header.payload"


def b64(b):
    import base64
    return base64.b64encode(b).decode()


def pem(key, fmt=serialization.PublicFormat.SubjectPublicKeyInfo, enc=serialization.Encoding.PEM):
    return key.public_key().public_bytes(enc, fmt)


def run(srv, cases):
    r = srv.request("POST", "/run.mrb", body=json.dumps(cases).encode())
    assert r.status == 200, r.body
    return json.loads(r.body)


def test_keys_from_pem_der_and_private_keys(server):
    private = RSA.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    cases = [
        {"from": "read", "key": b64(pem(RSA)), "op": "info"},
        {"from": "read", "key": b64(pem(RSA, serialization.PublicFormat.PKCS1)), "op": "info"},
        {"from": "read", "key": b64(pem(RSA, enc=serialization.Encoding.DER)), "op": "info"},
        {"from": "read", "key": b64(private), "op": "info"},
        {"from": "rsa", "key": b64(pem(RSA)), "op": "info"},
        {"from": "read", "key": b64(pem(P256)), "op": "info"},
        {"from": "ec", "key": b64(pem(P256)), "op": "info"},
        {"from": "read", "key": b64(pem(ED)), "op": "info"},
    ]
    assert run(server, cases) == [
        '["OpenSSL::PKey::RSA", "rsaEncryption", 2048, true]',
        '["OpenSSL::PKey::RSA", "rsaEncryption", 2048, true]',
        '["OpenSSL::PKey::RSA", "rsaEncryption", 2048, true]',
        '["OpenSSL::PKey::RSA", "rsaEncryption", 2048, true]',
        '["OpenSSL::PKey::RSA", "rsaEncryption", 2048, true]',
        '["OpenSSL::PKey::EC", "id-ecPublicKey", 256, true]',
        '["OpenSSL::PKey::EC", "id-ecPublicKey", 256, true]',
        '["OpenSSL::PKey::PKey", "ED25519", 256, true]',
    ]


def test_signatures_in_crubys_form_and_jws(server):
    rsa_sig = RSA.sign(DATA, padding.PKCS1v15(), hashes.SHA256())
    pss_sig = RSA.sign(DATA, padding.PSS(mgf=padding.MGF1(hashes.SHA384()), salt_length=48), hashes.SHA384())
    der = P256.sign(DATA, ec.ECDSA(hashes.SHA256()))
    r, s = decode_dss_signature(der)
    raw = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    ed_sig = ED.sign(DATA)
    k_rsa, k_ec, k_ed = b64(pem(RSA)), b64(pem(P256)), b64(pem(ED))
    d = b64(DATA)
    other = b64(b"header.payloaD")
    cases = [
        {"from": "read", "key": k_rsa, "op": "verify", "digest": "SHA256", "sig": b64(rsa_sig), "data": d},
        {"from": "read", "key": k_rsa, "op": "verify", "digest": "SHA256", "sig": b64(rsa_sig), "data": other},
        {"from": "read", "key": k_ec, "op": "verify", "digest": "SHA256", "sig": b64(der), "data": d},
        {"from": "read", "key": k_ed, "op": "verify", "digest": None, "sig": b64(ed_sig), "data": d},
        {"from": "read", "key": k_rsa, "op": "jws", "alg": "RS256", "sig": b64(rsa_sig), "data": d},
        {"from": "read", "key": k_rsa, "op": "jws", "alg": "PS384", "sig": b64(pss_sig), "data": d},
        {"from": "read", "key": k_rsa, "op": "jws", "alg": "PS256", "sig": b64(pss_sig), "data": d},
        {"from": "read", "key": k_ec, "op": "jws", "alg": "ES256", "sig": b64(raw), "data": d},
        {"from": "read", "key": k_ec, "op": "jws", "alg": "ES256", "sig": b64(der), "data": d},
        {"from": "read", "key": k_ec, "op": "jws", "alg": "ES256", "sig": b64(raw), "data": other},
        {"from": "read", "key": k_ed, "op": "jws", "alg": "EdDSA", "sig": b64(ed_sig), "data": d},
        {"from": "read", "key": k_ed, "op": "jws", "alg": "EdDSA", "sig": "", "data": d},
    ]
    assert run(server, cases) == ["true", "false", "true", "true", "true", "true", "false", "true", "false", "false",
                                  "true", "false"]


def test_bad_keys_and_algorithms_raise(server):
    k_rsa, k_ec = b64(pem(RSA)), b64(pem(P256))
    enc = RSA.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.BestAvailableEncryption(b"pw"))
    good_jwk = {"kty": "EC", "crv": "P-256", "x": "", "y": ""}
    numbers = P256.public_key().public_numbers()
    import base64
    u = lambda n, size: base64.urlsafe_b64encode(n.to_bytes(size, "big")).rstrip(b"=").decode()
    good_jwk.update(x=u(numbers.x, 32), y=u(numbers.y, 32))
    off_curve = dict(good_jwk, y=u((numbers.y + 1) % (2 ** 256), 32))
    cases = [
        {"from": "read", "key": b64(b"-----BEGIN PUBLIC KEY-----\ngarbage\n-----END PUBLIC KEY-----\n"), "op": "info"},
        {"from": "read", "key": b64(b""), "op": "info"},
        {"from": "read", "key": b64(enc), "op": "info"},
        {"from": "read", "key": b64(b"A" * 70000), "op": "info"},
        {"from": "ec", "key": k_rsa, "op": "info"},
        {"from": "jwk", "key": good_jwk, "op": "info"},
        {"from": "jwk", "key": off_curve, "op": "info"},
        {"from": "jwk", "key": dict(good_jwk, crv="P-192"), "op": "info"},
        {"from": "jwk", "key": dict(good_jwk, x="!!"), "op": "info"},
        {"from": "jwk", "key": dict(good_jwk, x=1), "op": "info"},
        {"from": "jwk", "key": {"kty": "oct", "k": "c2VjcmV0"}, "op": "info"},
        {"from": "jwk", "key": {"kty": "RSA", "n": "AQAB"}, "op": "info"},
        {"from": "jwk", "key": {"kty": "OKP", "crv": "Ed25519", "x": "AAAA"}, "op": "info"},
        {"from": "read", "key": k_rsa, "op": "jws", "alg": "HS256", "sig": "", "data": ""},
        {"from": "read", "key": k_rsa, "op": "jws", "alg": "none", "sig": "", "data": ""},
        {"from": "read", "key": k_rsa, "op": "jws", "alg": "ES256", "sig": "", "data": ""},
        {"from": "read", "key": k_ec, "op": "jws", "alg": "ES384", "sig": "", "data": ""},
        {"from": "read", "key": b64(pem(RSA_1024)), "op": "jws", "alg": "RS256", "sig": "", "data": ""},
        {"from": "read", "key": k_rsa, "op": "verify", "digest": "SHA3", "sig": "", "data": ""},
    ]
    assert run(server, cases) == [
        "OpenSSL::PKey::PKeyError: Could not parse PKey: not a key in PEM or DER (or an encrypted one)",
        "OpenSSL::PKey::PKeyError: Could not parse PKey: not a key in PEM or DER (or an encrypted one)",
        "OpenSSL::PKey::PKeyError: Could not parse PKey: not a key in PEM or DER (or an encrypted one)",
        "OpenSSL::PKey::PKeyError: Could not parse PKey: longer than 64 KB, no key is",
        "OpenSSL::PKey::PKeyError: not a key of OpenSSL::PKey::EC, but of OpenSSL::PKey::RSA",
        '["OpenSSL::PKey::EC", "id-ecPublicKey", 256, true]',
        "OpenSSL::PKey::PKeyError: Could not make a key of the JWK: not a valid public key (a point off its curve, "
        "a bad modulus or exponent)",
        "OpenSSL::PKey::PKeyError: Could not make a key of the JWK: an EC JWK's \"crv\" must be P-256, P-384 or P-521",
        "OpenSSL::PKey::PKeyError: Could not make a key of the JWK: an EC JWK needs \"x\" and \"y\" in base64url, "
        "not longer than its curve's size",
        "TypeError: a JWK's \"x\" must be a String, not Integer",
        "OpenSSL::PKey::PKeyError: Could not make a key of the JWK: a JWK's \"kty\" must be RSA, EC or OKP "
        "(a public key)",
        "OpenSSL::PKey::PKeyError: Could not make a key of the JWK: an RSA JWK needs \"n\" and \"e\" in base64url",
        "OpenSSL::PKey::PKeyError: Could not make a key of the JWK: an OKP JWK needs \"x\" of its curve's size in "
        "base64url",
        "OpenSSL::PKey::PKeyError: HS256 with this RSA key: not an algorithm of public keys (RS256, RS384, RS512, "
        "PS256, PS384, PS512, ES256, ES384, ES512, EdDSA)",
        "OpenSSL::PKey::PKeyError: none with this RSA key: not an algorithm of public keys (RS256, RS384, RS512, "
        "PS256, PS384, PS512, ES256, ES384, ES512, EdDSA)",
        "OpenSSL::PKey::PKeyError: ES256 with this RSA key: the key is not of the algorithm's type (or curve)",
        "OpenSSL::PKey::PKeyError: ES384 with this EC key: the key is not of the algorithm's type (or curve)",
        "OpenSSL::PKey::PKeyError: RS256 with this RSA key: an RSA key under 2048 bits (RFC 7518 refuses them)",
        'ArgumentError: unknown digest "SHA3" (MD5, SHA1, SHA224, SHA256, SHA384, SHA512)',
    ]
    server.check_log()
