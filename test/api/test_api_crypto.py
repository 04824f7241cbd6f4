"""Digest, OpenSSL::HMAC, OpenSSL's secure compares, Base64 and
SecureRandom: published vectors (FIPS 180, RFC 1321, RFC 4231, RFC 4648),
Python's hashlib, hmac and base64 for random inputs (binary, empty,
large), streaming equal to one-shot, random values of the right shape that
never repeat, and bad input answered with Ruby exceptions."""

import base64
import hashlib
import hmac
import json
import os
import re
import uuid

import pytest

from httpd import GC_STRESS, module_httpd

BODY = r"""
AddHandler mruby-script .mrb
"""

# POST data; ?ALG&CHUNK: every form of Digest::ALG of the body, one-shot
# and fed in pieces of CHUNK bytes, as JSON (binary values in hex).
DIGEST = r"""
r = Apache::Request.new
alg, chunk = r.args.split("&")
chunk = chunk.to_i
data = r.body.to_s
klass = Digest.const_get(alg)
d = klass.new
i = 0
while i < data.bytesize
  d << data.byteslice(i, chunk)
  i += chunk
end
copy = d.dup
copy << "more"
out = {
  "digest" => Digest.hexencode(klass.digest(data)),
  "hexdigest" => klass.hexdigest(data),
  "base64digest" => klass.base64digest(data),
  "stream_digest" => Digest.hexencode(d.digest),
  "stream_hexdigest" => d.hexdigest,
  "stream_base64digest" => d.base64digest,
  "to_s" => d.to_s,
  "equal" => [d == klass.new(data), d == d.hexdigest, d == "00"],
  "copy" => copy.hexdigest,
  "with_arg" => d.hexdigest("other"),
  "after_arg" => d.hexdigest,
  "length" => [d.length, d.size, d.digest_length, d.block_length],
  "finish" => Digest.hexencode(d.update(data).finish),
  "after_finish" => d.hexdigest,
  "bang" => klass.new(data).hexdigest!,
  "inspect" => klass.new(data).inspect,
}
Apache.rputs JSON.generate(out)
"""

# POST data; ?NAME with the key in hex in X-Key: the three forms.
HMAC = r"""
r = Apache::Request.new
name = r.args
key = [r.headers_in["X-Key"].to_s].pack("H*")
data = r.body.to_s
Apache.rputs JSON.generate({
  "digest" => Digest.hexencode(OpenSSL::HMAC.digest(name, key, data)),
  "hexdigest" => OpenSSL::HMAC.hexdigest(name, key, data),
  "base64digest" => OpenSSL::HMAC.base64digest(name, key, data),
})
"""

# POST data; ?OP: the Base64 method OP of the body, or its error.
BASE64 = r"""
r = Apache::Request.new
op, arg = r.args.split("&")
data = r.body.to_s
begin
  out = arg ? Base64.__send__(op, data, padding: arg == "pad") : Base64.__send__(op, data)
  Apache.rputs out
rescue ArgumentError => e
  r.status = 400
  Apache.rputs "#{e.class}: #{e.message}"
end
"""

COMPARE = r"""
r = Apache::Request.new
a, b = r.body.to_s.split(",", -1).map { |h| [h].pack("H*") }
out = [OpenSSL.secure_compare(a, b)]
begin
  out << OpenSSL.fixed_length_secure_compare(a, b)
rescue ArgumentError => e
  out << e.message
end
Apache.rputs JSON.generate(out)
"""

# ?N: N values of each kind of SecureRandom, as JSON.
RANDOM = r"""
n = Apache::Request.new.args.to_i
out = Hash.new { |h, k| h[k] = [] }
n.times do
  out["bytes"] << SecureRandom.random_bytes.bytesize << SecureRandom.random_bytes(5).bytesize <<
    SecureRandom.random_bytes(0).bytesize
  out["hex"] << SecureRandom.hex << SecureRandom.hex(3)
  out["base64"] << SecureRandom.base64 << SecureRandom.base64(4)
  out["urlsafe"] << SecureRandom.urlsafe_base64 << SecureRandom.urlsafe_base64(4, true) <<
    SecureRandom.urlsafe_base64(32)
  out["uuid"] << SecureRandom.uuid
  out["alnum"] << SecureRandom.alphanumeric << SecureRandom.alphanumeric(40)
  out["int"] << SecureRandom.random_number(10)
  out["big"] << SecureRandom.random_number(2**62)
  out["range"] << SecureRandom.random_number(-3..3) << SecureRandom.random_number(5...7)
  out["float"] << SecureRandom.random_number << SecureRandom.random_number(0) << SecureRandom.random_number(-5)
  out["float10"] << SecureRandom.random_number(10.0) << SecureRandom.random_number(1.5..2.5)
end
Apache.rputs JSON.generate(out)
"""

# 100,000 uuids and 100,000 16-byte strings in one request (5,000 under
# GC stress): how many distinct.
UNIQUE_COUNT = 5000 if GC_STRESS else 100000
UNIQUE = r"""
uuids = {}
bytes = {}
%d.times { uuids[SecureRandom.uuid] = true; bytes[SecureRandom.random_bytes] = true }
Apache.rputs "#{uuids.size} #{bytes.size}"
""" % UNIQUE_COUNT

ONE = r"""
Apache.rputs SecureRandom.hex(16)
"""

# Each line: the class and message of what a call raised.
BAD = r"""
big = "x" * (8 * 1024 * 1024)
calls = [
  -> { Digest::SHA256.digest(1) },
  -> { Digest::SHA256.hexdigest(nil) },
  -> { Digest::SHA256.new << :sym },
  -> { Digest::SHA256.new(12) },
  -> { Digest::Base.new },
  -> { Digest::Base.hexdigest("x") },
  -> { Digest::SHA256.allocate.hexdigest },
  -> { OpenSSL::HMAC.hexdigest("SHA3", "k", "d") },
  -> { OpenSSL::HMAC.hexdigest(nil, "k", "d") },
  -> { OpenSSL::HMAC.hexdigest("SHA256", 1, "d") },
  -> { OpenSSL::HMAC.hexdigest("SHA256", "k", nil) },
  -> { OpenSSL.fixed_length_secure_compare("a", "ab") },
  -> { OpenSSL.secure_compare("a", 1) },
  -> { Base64.strict_decode64(1) },
  -> { Base64.strict_encode64(nil) },
  -> { Base64.strict_decode64("YWJ") },
  -> { Base64.strict_decode64("Y!Jj") },
  -> { Base64.strict_decode64("YW=j") },
  -> { Base64.strict_decode64("YQ==YWJj") },
  -> { Base64.strict_decode64("YR==") },
  -> { Base64.strict_decode64("YWJj\n") },
  -> { Base64.urlsafe_decode64("YQ=") },
  -> { Base64.urlsafe_decode64("Y") },
  -> { SecureRandom.random_bytes(-1) },
  -> { SecureRandom.hex(2**40) },
  -> { SecureRandom.hex("16") },
  -> { SecureRandom.random_number("10") },
  -> { SecureRandom.random_number("a".."b") },
  -> { Digest::SHA512.hexdigest(big).size },
  -> { OpenSSL::HMAC.hexdigest("SHA256", big, big).size },
  -> { Base64.strict_decode64(Base64.strict_encode64(big)).size },
  -> { Base64.decode64(big).size },
]
out = calls.map do |c|
  begin
    "ok #{c.call}"
  rescue Exception => e
    "#{e.class}: #{e.message}"
  end
end
Apache.rputs out.join("\n")
"""

FILES = {
    "htdocs/digest.mrb": DIGEST,
    "htdocs/hmac.mrb": HMAC,
    "htdocs/base64.mrb": BASE64,
    "htdocs/compare.mrb": COMPARE,
    "htdocs/random.mrb": RANDOM,
    "htdocs/unique.mrb": UNIQUE,
    "htdocs/one.mrb": ONE,
    "htdocs/bad.mrb": BAD,
}

server = module_httpd("crypto", BODY, files=FILES)

ALGS = {"MD5": hashlib.md5, "SHA1": hashlib.sha1, "SHA256": hashlib.sha256, "SHA384": hashlib.sha384,
        "SHA512": hashlib.sha512}

# FIPS 180-4's examples (and RFC 1321's "abc" for MD5): "abc", the empty
# message, the 448-bit message, a million "a".
FIPS_MESSAGES = [b"abc", b"", b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", b"a" * 1000000]
FIPS = {
    "MD5": ["900150983cd24fb0d6963f7d28e17f72", "d41d8cd98f00b204e9800998ecf8427e",
            "8215ef0796a20bcaaae116d3876c664a", "7707d6ae4e027c70eea2a935c2296f21"],
    "SHA1": ["a9993e364706816aba3e25717850c26c9cd0d89d", "da39a3ee5e6b4b0d3255bfef95601890afd80709",
             "84983e441c3bd26ebaae4aa1f95129e5e54670f1", "34aa973cd4c4daa4f61eeb2bdbad27316534016f"],
    "SHA256": ["ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
               "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
               "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
               "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"],
    "SHA384": ["cb00753f45a35e8bb5a03d699ac65007272c32ab0eded1631a8b605a43ff5bed"
               "8086072ba1e7cc2358baeca134c825a7",
               "38b060a751ac96384cd9327eb1b1e36a21fdb71114be07434c0cc7bf63f6e1da"
               "274edebfe76f65fbd51ad2f14898b95b",
               "3391fdddfc8dc7393707a65b1b4709397cf8b1d162af05abfe8f450de5f36bc6"
               "b0455a8520bc4e6f5fe95b1fe3c8452b",
               "9d0e1809716474cb086e834e310a4a1ced149e9c00f248527972cec5704c2a5b"
               "07b8b3dc38ecc4ebae97ddd87f3d8985"],
    "SHA512": ["ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a"
               "2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f",
               "cf83e1357eefb8bdf1542850d66d8007d620e4050b5715dc83f4a921d36ce9ce"
               "47d0d13c5d85f2b0ff8318d2877eec2f63b931bd47417a81a538327af927da3e",
               "204a8fc6dda82f0a0ced7beb8e08a41657c16ef468b228a8279be331a703c335"
               "96fd15c13b1b07f9aa1d3bea57789ca031ad85c7a71dd70354ec631238ca3445",
               "e718483d0ce769644e2e42c7bc15b4638e1f98b13b2044285632a803afa973eb"
               "de0ff244877ea60a4cb0432ce577c31beb009c5c2c49aa2e4eadb217ad8cc09b"],
}

# RFC 4231's test cases 1-4, 6 and 7 (key, data; HMAC-SHA224, 256, 384,
# 512); case 5 is the truncated one, below.
RFC4231 = [
    ("0b" * 20, b"Hi There".hex(),
     ["896fb1128abbdf196832107cd49df33f47b4b1169912ba4f53684b22",
      "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7",
      "afd03944d84895626b0825f4ab46907f15f9dadbe4101ec682aa034c7cebc59cfaea9ea9076ede7f4af152e8b2fa9cb6",
      "87aa7cdea5ef619d4ff0b4241a1d6cb02379f4e2ce4ec2787ad0b30545e17cde"
      "daa833b7d6b8a702038b274eaea3f4e4be9d914eeb61f1702e696c203a126854"]),
    (b"Jefe".hex(), b"what do ya want for nothing?".hex(),
     ["a30e01098bc6dbbf45690f3a7e9e6d0f8bbea2a39e6148008fd05e44",
      "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
      "af45d2e376484031617f78d2b58a6b1b9c7ef464f5a01b47e42ec3736322445e8e2240ca5e69e2c78b3239ecfab21649",
      "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea250554"
      "9758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737"]),
    ("aa" * 20, "dd" * 50,
     ["7fb3cb3588c6c1f6ffa9694d7d6ad2649365b0c1f65d69d1ec8333ea",
      "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe",
      "88062608d3e6ad8a0aa2ace014c8a86f0aa635d947ac9febe83ef4e55966144b2a5ab39dc13814b94e3ab6e101a34f27",
      "fa73b0089d56a284efb0f0756c890be9b1b5dbdd8ee81a3655f83e33b2279d39"
      "bf3e848279a722c806b485a47e67c807b946a337bee8942674278859e13292fb"]),
    ("0102030405060708090a0b0c0d0e0f10111213141516171819", "cd" * 50,
     ["6c11506874013cac6a2abc1bb382627cec6a90d86efc012de7afec5a",
      "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b",
      "3e8a69b7783c25851933ab6290af6ca77a9981480850009cc5577c6e1f573b4e6801dd23c4a7d679ccf8a386c674cffb",
      "b0ba465637458c6990e5a8c5f61d4af7e576d97ff94b872de76f8050361ee3db"
      "a91ca5c11aa25eb4d679275cc5788063a5f19741120c4f2de2adebeb10a298dd"]),
    ("aa" * 131, b"Test Using Larger Than Block-Size Key - Hash Key First".hex(),
     ["95e9a0db962095adaebe9b2d6f0dbce2d499f112f2d2b7273fa6870e",
      "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54",
      "4ece084485813e9088d2c63a041bc5b44f9ef1012a2b588f3cd11f05033ac4c60c2ef6ab4030fe8296248df163f44952",
      "80b24263c7c1a3ebb71493c1dd7be8b49b46d1f41b4aeec1121b013783f8f352"
      "6b56d037e05f2598bd0fd2215d6a1e5295e64f73f63f0aec8b915a985d786598"]),
    ("aa" * 131, b"This is a test using a larger than block-size key and a larger than block-size data. "
                 b"The key needs to be hashed before being used by the HMAC algorithm.".hex(),
     ["3a854166ac5d9f023f54d517d0b39dbd946770db9c2b95c9f6f565d1",
      "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2",
      "6617178e941f020d351e2f254e8fd32c602420feb0b8fb9adccebb82461e99c5a678cc31e799176d3860e6110c46523e",
      "e37b6a775dc87dbaa4dfa9f96e5e3ffddebd71f8867289865df5a32d20cdc944"
      "b6022cac3c4982b10d5eeb55c3e4de15134676fb6de0446065c97440fa8c6a58"]),
]
# Case 5: the first 128 bits of each.
RFC4231_TRUNCATED = ("0c" * 20, b"Test With Truncation".hex(),
                     ["0e2aea68a90c8d37c988bcdb9fca6fa8", "a3b6167473100ee06e0c796c2955552b",
                      "3abf34c3503b2a23a46efc619baef897", "415fad6271580a531d4179bc891d87a6"])


def post(srv, path, body, headers=None):
    r = srv.request("POST", path, body=body, headers=headers or {})
    assert r.status == 200, r.body
    return r


def digests(srv, alg, data, chunk=7):
    return json.loads(post(srv, "/digest.mrb?%s&%d" % (alg, chunk), data).body)


def check_digest(got, alg, data):
    h = ALGS[alg]
    want = h(data).hexdigest()
    b64 = base64.b64encode(h(data).digest()).decode()
    assert got["digest"] == got["hexdigest"] == got["stream_digest"] == got["stream_hexdigest"] == want
    assert got["to_s"] == want
    assert got["base64digest"] == got["stream_base64digest"] == b64
    assert got["equal"] == [True, True, False]
    assert got["copy"] == h(data + b"more").hexdigest()
    assert got["with_arg"] == h(b"other").hexdigest()
    assert got["after_arg"] == h(b"").hexdigest()  # reset before and after
    assert got["length"] == [h().digest_size] * 3 + [h().block_size]
    assert got["finish"] == want and got["after_finish"] == h(b"").hexdigest()
    assert got["bang"] == want
    assert got["inspect"] == "#<Digest::%s: %s>" % (alg, want)


@pytest.mark.parametrize("alg", sorted(ALGS))
def test_digests_of_published_vectors(server, alg):
    for message, want in zip(FIPS_MESSAGES, FIPS[alg]):
        got = digests(server, alg, message, chunk=64 if len(message) > 1000 else 1)
        assert got["hexdigest"] == got["stream_hexdigest"] == want
        check_digest(got, alg, message)


@pytest.mark.parametrize("alg", sorted(ALGS))
def test_digests_of_random_data_equal_hashlib(server, alg):
    for size in (1, 55, 56, 63, 64, 65, 111, 112, 127, 128, 129, 1000, 70000):
        data = os.urandom(size)
        check_digest(digests(server, alg, data, chunk=1 + size % 13), alg, data)
    nuls = b"\0" * 100 + b"\xff\xfe"
    check_digest(digests(server, alg, nuls), alg, nuls)


def hmacs(srv, name, key, data):
    return json.loads(post(srv, "/hmac.mrb?" + name, data, {"X-Key": key.hex()}).body)


def test_hmac_of_rfc4231_vectors(server):
    for key, data, wants in RFC4231 + [RFC4231_TRUNCATED]:
        for name, want in zip(("SHA224", "SHA256", "SHA384", "SHA512"), wants):
            got = hmacs(server, name, bytes.fromhex(key), bytes.fromhex(data))
            assert got["hexdigest"].startswith(want) and got["digest"] == got["hexdigest"], (name, key)
            assert base64.b64decode(got["base64digest"]).hex() == got["hexdigest"]
            assert len(got["hexdigest"]) == len(hmac.new(b"", b"", name.lower()).hexdigest())


@pytest.mark.parametrize("name", ["MD5", "SHA1", "SHA224", "SHA256", "SHA384", "SHA512", "sha256", "SHA-256"])
def test_hmac_of_random_data_equals_python(server, name):
    alg = name.replace("-", "").lower()
    for key_size, size in ((0, 0), (1, 1), (16, 100), (64, 64), (65, 1000), (200, 5000), (32, 100000)):
        key, data = os.urandom(key_size), os.urandom(size)
        want = hmac.new(key, data, alg)
        got = hmacs(server, name, key, data)
        assert got["hexdigest"] == got["digest"] == want.hexdigest()
        assert got["base64digest"] == base64.b64encode(want.digest()).decode()


def b64(srv, op, data, arg=None):
    r = srv.request("POST", "/base64.mrb?%s%s" % (op, "&" + arg if arg else ""), body=data)
    return (r.status, r.body)


def test_base64_of_rfc4648_vectors(server):
    for plain, text in ((b"", b""), (b"f", b"Zg=="), (b"fo", b"Zm8="), (b"foo", b"Zm9v"), (b"foob", b"Zm9vYg=="),
                        (b"fooba", b"Zm9vYmE="), (b"foobar", b"Zm9vYmFy")):
        assert b64(server, "strict_encode64", plain) == (200, text)
        assert b64(server, "encode64", plain) == (200, text + b"\n" if text else b"")
        assert b64(server, "strict_decode64", text) == (200, plain)
        assert b64(server, "decode64", text) == (200, plain)
        assert b64(server, "urlsafe_decode64", text.rstrip(b"=")) == (200, plain)
        assert b64(server, "urlsafe_encode64", plain, "nopad") == (200, text.rstrip(b"="))


def test_base64_of_random_data_equals_python(server):
    for size in (1, 2, 3, 44, 45, 46, 89, 90, 91, 1000, 100000):
        data = os.urandom(size)
        text = base64.b64encode(data)
        lines = b"".join(text[i:i + 60] + b"\n" for i in range(0, len(text), 60))  # pack("m"): 60 a line
        url = base64.urlsafe_b64encode(data)
        assert b64(server, "encode64", data) == (200, lines)
        assert b64(server, "strict_encode64", data) == (200, text)
        assert b64(server, "urlsafe_encode64", data) == (200, url)
        assert b64(server, "urlsafe_encode64", data, "pad") == (200, url)
        assert b64(server, "urlsafe_encode64", data, "nopad") == (200, url.rstrip(b"="))
        assert b64(server, "decode64", lines) == (200, data)
        assert b64(server, "strict_decode64", text) == (200, data)
        assert b64(server, "urlsafe_decode64", url) == (200, data)
        assert b64(server, "urlsafe_decode64", url.rstrip(b"=")) == (200, data)


def test_decode64_is_lenient_as_cruby(server):
    """pack.c's reading: characters outside the alphabet skipped, a '='
    skipped where a group's first two are expected and the end where its
    last two are; what is left of a group gives what it can."""
    for text, plain in ((b"YWJj\nZGVm\n", b"abcdef"), (b"YW Jj", b"abc"), (b"YWJ", b"ab"), (b"YQ", b"a"),
                        (b"Y", b""), (b"YQ==YWJj", b"a"), (b"=YWJj", b"abc"), (b"Y=WJj", b"abc"),
                        (b"YWJ=ZGVm", b"ab"), (b"!!", b""), (b"-_-_", b"")):
        assert b64(server, "decode64", text) == (200, plain), text


def test_urlsafe_decode64_accepts_either_alphabet_as_cruby(server):
    """CRuby translates '-' and '_' and decodes strictly: '+' and '/'
    pass too; padding is optional."""
    assert b64(server, "urlsafe_decode64", b"-_-_") == (200, b"\xfb\xff\xbf")
    assert b64(server, "urlsafe_decode64", b"+/+/") == (200, b"\xfb\xff\xbf")
    assert b64(server, "urlsafe_decode64", b"_w") == (200, b"\xff")
    assert b64(server, "urlsafe_decode64", b"_w==") == (200, b"\xff")
    assert b64(server, "strict_decode64", b"-_-_")[0] == 400


def test_secure_compares(server):
    def compare(a, b):
        return json.loads(post(server, "/compare.mrb", (a.hex() + "," + b.hex()).encode()).body)

    assert compare(b"secret", b"secret") == [True, True]
    assert compare(b"secret", b"secreT") == [False, False]
    assert compare(b"", b"") == [True, True]
    assert compare(b"\xff\x00a", b"\xff\x00a") == [True, True]
    assert compare(b"secret", b"secret!") == [False, "inputs must be of equal length"]
    assert compare(b"", b"x") == [False, "inputs must be of equal length"]


def test_secure_random_values_have_their_shape(server):
    out = json.loads(post(server, "/random.mrb?300", b"").body)
    assert set(out["bytes"]) == {16, 5, 0}
    hexes = out["hex"]
    assert all(re.fullmatch("[0-9a-f]{32}", h) for h in hexes[::2])
    assert all(re.fullmatch("[0-9a-f]{6}", h) for h in hexes[1::2])
    assert all(len(base64.b64decode(s, validate=True)) == 16 for s in out["base64"][::2])
    assert all(len(base64.b64decode(s, validate=True)) == 4 for s in out["base64"][1::2])
    url = out["urlsafe"]
    assert all(re.fullmatch("[A-Za-z0-9_-]{22}", s) for s in url[0::3])  # no padding by default
    assert all(re.fullmatch("[A-Za-z0-9_-]{6}==", s) for s in url[1::3])
    assert all(re.fullmatch("[A-Za-z0-9_-]{43}", s) for s in url[2::3])
    for u in out["uuid"]:
        assert re.fullmatch("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", u)
        assert uuid.UUID(u).version == 4
    assert all(re.fullmatch("[A-Za-z0-9]{16}", s) for s in out["alnum"][::2])
    assert all(re.fullmatch("[A-Za-z0-9]{40}", s) for s in out["alnum"][1::2])
    assert set("".join(out["alnum"])) == set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
    assert set(out["int"]) == set(range(10))
    assert all(isinstance(v, int) and 0 <= v < 2 ** 62 for v in out["big"])
    assert max(out["big"]) > 2 ** 60  # the high bits are drawn too
    assert set(out["range"][::2]) == set(range(-3, 4)) and set(out["range"][1::2]) == {5, 6}
    assert all(isinstance(v, float) and 0 <= v < 1 for v in out["float"])
    assert all(0 <= v < 10 for v in out["float10"][::2]) and max(out["float10"][::2]) > 5
    assert all(1.5 <= v <= 2.5 for v in out["float10"][1::2])
    assert len(set(out["float"])) == len(out["float"])


def test_secure_random_never_repeats(server):
    """100,000 uuids and random 16-byte strings in one VM, all different;
    and values from many requests (other threads, other processes) too:
    each child process draws its own."""
    assert post(server, "/unique.mrb", b"").text == "%d %d" % (UNIQUE_COUNT, UNIQUE_COUNT)
    values = [server.get("/one.mrb").text for _ in range(300)]
    assert len(set(values)) == 300


def test_bad_input_raises_ruby_exceptions(server):
    r = server.get("/bad.mrb")
    assert r.status == 200, r.body
    lines = r.text.split("\n")
    assert lines == [
        "TypeError: Integer cannot be converted to String",
        "TypeError: nil cannot be converted to String",
        "TypeError: Symbol cannot be converted to String",
        "TypeError: Integer cannot be converted to String",
        "NotImplementedError: Digest::Base is an abstract class: use Digest::SHA256 and the others",
        "NotImplementedError: Digest::Base is an abstract class: use Digest::SHA256 and the others",
        "RuntimeError: Digest object not initialized",
        'ArgumentError: unknown digest "SHA3" (MD5, SHA1, SHA224, SHA256, SHA384, SHA512)',
        'TypeError: a digest is named by a String ("SHA256") or a Digest class, not NilClass',
        "TypeError: Integer cannot be converted to String",
        "TypeError: nil cannot be converted to String",
        "ArgumentError: inputs must be of equal length",
        "TypeError: Integer cannot be converted to String",
        "TypeError: Integer cannot be converted to String",
        "TypeError: nil cannot be converted to String",
        "ArgumentError: invalid base64: its length is not a multiple of 4 (byte 3)",
        "ArgumentError: invalid base64: a character outside the alphabet (byte 1)",
        "ArgumentError: invalid base64: a character after the padding (byte 3)",
        "ArgumentError: invalid base64: padding before the end (byte 2)",
        "ArgumentError: invalid base64: bits left over in its last character (byte 1)",
        "ArgumentError: invalid base64: its length is not a multiple of 4 (byte 5)",
        "ArgumentError: invalid base64: its length is not a multiple of 4 (byte 3)",
        "ArgumentError: invalid base64: padding before the end (byte 1)",
        "ArgumentError: negative string size (or size too big)",
        "ArgumentError: 1099511627776 random bytes at once: at most 1048576",
        "TypeError: a size must be an Integer, not String",
        "TypeError: random_number takes an Integer, a Float or a Range, not String",
        "ArgumentError: a Range of Integers or Floats",
        "ok 128",
        "ok 64",
        "ok 8388608",
        "ok 6291456",  # "xxxx" is Base64 too
    ]
    server.check_log()
