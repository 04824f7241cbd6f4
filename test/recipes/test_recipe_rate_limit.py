"""Recipe docs/recipes/rate-limit: 60 requests a minute per API key or
client address, counted exactly in an Apache::Cache on the shared dictionary across
processes and threads; then 429 with Retry-After, logged once."""

import concurrent.futures
import hashlib
import re
import uuid

import pytest

from httpd import well_inside_window
from recipes import recipe_httpd

FILES = {"htdocs/api/ping.txt": "pong\n", "htdocs/api/index.html": "api\n", "htdocs/index.html": "home\n"}

srv = recipe_httpd("rate-limit", "DirectoryIndex index.html\n", FILES)

LIMIT = 60
ADDRESS_LIMIT = 600


@pytest.fixture
def window():
    """The limit counts per minute of the clock: start well inside one."""
    well_inside_window(60, 20)


def fingerprint(key):
    """What the script logs for an API key: the first 8 hex digits of the
    SHA-256 of its first 64 bytes."""
    return hashlib.sha256(key.encode()[:64]).hexdigest()[:8]


def ping(srv, key=None, source=None):
    return srv.get("/api/ping.txt", headers={"X-Api-Key": key} if key else {}, source=source)


def test_limit_per_key(srv, window):
    key = "key-" + uuid.uuid4().hex
    for n in range(1, LIMIT + 1):
        r = ping(srv, key)
        assert r.status == 200 and r.body == b"pong\n"
        assert r.headers["X-RateLimit-Limit"] == "60"
        assert r.headers["X-RateLimit-Remaining"] == str(LIMIT - n)
        assert 0 < int(r.headers["X-RateLimit-Reset"]) <= 60
    for _ in range(3):
        r = ping(srv, key)
        assert r.status == 429 and b"pong" not in r.body
        assert r.headers["X-RateLimit-Remaining"] == "0"
        assert 0 < int(r.headers["Retry-After"]) <= 60
    # Other keys are counted apart.
    assert ping(srv, "key-" + uuid.uuid4().hex).status == 200
    # Named by its fingerprint and the client's address, never by its
    # characters.
    lines = srv.wait_log(r"MRB00400: .*rate_limit\.rb:\d+: API key #%s from 127\.0\.0\.1 is over 60 requests a minute"
                         % fingerprint(key))
    assert len(lines) == 1
    assert key[4:10] not in srv.error_log() and key[:6] not in srv.error_log()


def test_limit_per_address(srv, window):
    for _ in range(LIMIT):
        assert ping(srv, source="127.0.0.3").status == 200
    srv.expect("/api/ping.txt", 429, r"rate_limit\.rb:\d+: 127\.0\.0\.3 is over 60 requests a minute",
               source="127.0.0.3")
    assert ping(srv, source="127.0.0.4").status == 200


def test_new_keys_do_not_escape_the_limit(srv, window):
    """A key is a name the client chooses: a client sending a new one with
    every request is still limited, by what its address may send with
    keys (ADDRESS_LIMIT a minute)."""
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(lambda _: ping(srv, "key-" + uuid.uuid4().hex, source="127.0.0.5").status,
                                 range(ADDRESS_LIMIT + 20)))
    assert statuses.count(200) == ADDRESS_LIMIT and statuses.count(429) == 20
    r = ping(srv, "key-" + uuid.uuid4().hex, source="127.0.0.5")
    assert r.status == 429 and r.headers["X-RateLimit-Limit"] == str(ADDRESS_LIMIT)
    assert r.headers["X-RateLimit-Remaining"] == "0"
    # Another address, and the same address without a key, are apart.
    assert ping(srv, "key-" + uuid.uuid4().hex, source="127.0.0.6").status == 200
    assert ping(srv, source="127.0.0.5").status == 200
    srv.wait_log(r"rate_limit\.rb:\d+: 127\.0\.0\.5 is over %d requests a minute with API keys" % ADDRESS_LIMIT)


def test_exact_under_concurrency(srv, window):
    """Every process and thread counts in the same cache: of 150 requests
    at once, exactly 60 get through."""
    key = "key-" + uuid.uuid4().hex
    with concurrent.futures.ThreadPoolExecutor(24) as pool:
        statuses = list(pool.map(lambda _: ping(srv, key).status, range(150)))
    assert statuses.count(200) == LIMIT and statuses.count(429) == 150 - LIMIT


def test_one_count_per_request(srv, window):
    """mod_dir's subrequest for index.html is not counted again."""
    key = "key-" + uuid.uuid4().hex
    for n in range(1, 4):
        r = srv.get("/api/", headers={"X-Api-Key": key})
        assert r.body == b"api\n" and r.headers["X-RateLimit-Remaining"] == str(LIMIT - n)


def test_other_paths_are_not_limited(srv):
    r = srv.get("/")
    assert r.status == 200 and "X-RateLimit-Limit" not in r.headers
