"""Recipe docs/recipes/redis-flags: flags in a Redis hash, read by each
thread at most once a second, passed to a backend as X-Feature-* headers;
"maintenance" answers 503 to all but the administrators (127.0.0.1);
/flags lists and sets them. A real redis-server on a port of the test's,
set in the installed script as the page tells an administrator to; other
clients come from 127.0.0.2. With Redis down or hanging, requests are
served without flags (fail open), each within the timeouts, and logged."""

import json
import signal
import time
import urllib.parse

import pytest

import system_apache
from cache_servers import backend_fixture
from httpd import ANY_MPM, SINGLE_WORKER
from loopback import free_port
from recipes import Recipe, recipe_httpd, set_setting, with_dependencies

REDIS_PORT = free_port()
redis = backend_fixture("redis", port=REDIS_PORT)

FILES = {"htdocs/index.html": "home\n"}
SITE = 'DirectoryIndex index.html\nProxyPass "/app/" "unix:app.sock|http://app/"\n'
VISITOR = "127.0.0.2"
# RedisFlags::TTL, and what a request may take past it on a busy machine.
TTL = 1.0
MARGIN = 0.3
# RedisFlags::CONNECT_TIMEOUT + TIMEOUT is 200 ms: no answer waits for
# Redis longer than that (the rest is the machine's).
BOUND = 1.0


def settings(srv):
    set_setting(srv, "redis_flags.rb", "PORT", REDIS_PORT)


_srv = recipe_httpd("redis-flags", SITE, FILES, backends=("app",), modules=("proxy", "proxy_http"),
                    settings=settings)


@pytest.fixture(scope="module")
def srv(redis, _srv):
    return _srv


@pytest.fixture(autouse=True)
def no_flags(redis):
    redis.cli("DEL", "flags")
    yield
    if redis.proc is not None:
        redis.cli("DEL", "flags")


def past_ttl(since):
    """Waits until every thread's copy of the flags is older than TTL."""
    left = since + TTL + MARGIN - time.monotonic()
    if left > 0:
        time.sleep(left)


def backend_view(srv, source=VISITOR, headers=None):
    r = srv.get("/app/page", source=source, headers=headers)
    assert r.status == 200, (r, srv.error_log()[-2000:])
    return json.loads(r.body)["headers"]


def features(view):
    return {k: v for k, v in view.items() if k.startswith("x-feature-")}


def post_flag(srv, name, value, source="127.0.0.1", headers=None):
    return srv.request("POST", "/flags", body=urllib.parse.urlencode({"name": name, "value": value}).encode(),
                       headers=dict({"Content-Type": "application/x-www-form-urlencoded"}, **(headers or {})),
                       source=source)


# What Redis's failures do is the script's, in a QuickHandler, where every
# MPM waits for Redis the same way (blocking, bounded by the timeouts):
# those tests run on one MPM, the recipe's other tests on all three.
def one_mpm(srv):
    if srv.mpm not in ANY_MPM + ("system",):
        pytest.skip("Redis's failures are the script's, not the MPM's: tested on %s" % ANY_MPM[0])


def test_flags_go_to_the_backend_as_headers(srv, redis):
    assert features(backend_view(srv)) == {}
    redis.cli("HSET", "flags", "new-checkout", "on", "search-v2", "beta 3", "Bad Name", "on", "empty", "")
    past_ttl(time.monotonic())
    for _ in range(10):
        # What the client sends as a flag never reaches the backend.
        view = backend_view(srv, headers={"X-Feature-Evil": "on", "X-Feature-New-Checkout": "off"})
        assert features(view) == {"x-feature-new-checkout": "on", "x-feature-search-v2": "beta 3"}
    assert srv.get("/", source=VISITOR).body == b"home\n"


def test_maintenance_page_and_administrators(srv, redis):
    redis.cli("HSET", "flags", "maintenance", "on", "new-checkout", "on")
    past_ttl(time.monotonic())
    for method, path in (("GET", "/"), ("GET", "/app/page"), ("POST", "/app/form"), ("GET", "/nothing")):
        r = srv.request(method, path, body=b"a=1" if method == "POST" else None, source=VISITOR)
        assert r.status == 503, path
        assert b"<h1>Down for maintenance</h1>" in r.body
        assert r.headers["Retry-After"] == "60" and r.headers["Cache-Control"] == "no-store"
    before = srv.backends["app"].requests
    srv.get("/app/page", source=VISITOR)
    assert srv.backends["app"].requests == before
    # The administrators see the site, with the other flags.
    assert features(backend_view(srv, source="127.0.0.1")) == {"x-feature-new-checkout": "on"}
    assert srv.get("/", source="127.0.0.1").status == 200
    redis.cli("HSET", "flags", "maintenance", "off")
    past_ttl(time.monotonic())
    # Any value but "on" is off; "maintenance" itself is no header.
    assert features(backend_view(srv)) == {"x-feature-new-checkout": "on"}


def test_flags_page_is_for_administrators(srv, redis):
    assert srv.get("/flags", source=VISITOR).status == 403
    assert post_flag(srv, "maintenance", "on", source=VISITOR).status == 403
    # A form another site makes an administrator's browser send.
    assert post_flag(srv, "maintenance", "on", headers={"Origin": "https://elsewhere.example"}).status == 403
    assert post_flag(srv, "Bad Name", "on").status == 400
    assert post_flag(srv, "x", "\x01").status == 400
    assert redis.cli("EXISTS", "flags") == "0"


def test_flags_page_sets_and_answers_change_within_the_ttl(srv, redis):
    redis.cli("HSET", "flags", "search-v2", "on")
    r = srv.get("/flags", source="127.0.0.1")
    assert r.status == 200 and r.text == "search-v2 on\n"
    assert r.headers["Content-Type"] == "text/plain; charset=utf-8"
    past_ttl(time.monotonic())
    assert features(backend_view(srv)) == {"x-feature-search-v2": "on"}

    r = post_flag(srv, "new-checkout", "on")
    changed = time.monotonic()
    assert r.status == 200 and r.text == "new-checkout on\nsearch-v2 on\n"
    assert redis.cli("HGET", "flags", "new-checkout") == "on"
    srv.wait_log(r'redis-flags: new-checkout set to "on" by 127\.0\.0\.1')
    # Asked again and again: a thread may keep what it read for TTL, never
    # longer (five requests asked later, however long each takes).
    late = 0
    while late < 5:
        asked = time.monotonic()
        assert asked < changed + 30
        got = features(backend_view(srv))
        if asked > changed + TTL + MARGIN:
            assert got == {"x-feature-new-checkout": "on", "x-feature-search-v2": "on"}
            late += 1

    # An empty value removes the flag.
    r = post_flag(srv, "search-v2", "")
    changed = time.monotonic()
    assert r.status == 200 and r.text == "new-checkout on\n"
    assert redis.cli("HEXISTS", "flags", "search-v2") == "0"
    past_ttl(changed)
    assert features(backend_view(srv)) == {"x-feature-new-checkout": "on"}


def timed_get(srv, path, source=VISITOR):
    start = time.monotonic()
    r = srv.get(path, source=source)
    took = time.monotonic() - start
    assert took < BOUND, "%s took %.2f s" % (path, took)
    return r


def served_open_until_logged(srv, since, pattern):
    """Visitors' requests, each answered within BOUND, until the log says
    why Redis could not be read and every thread's copy of the flags is
    older than TTL; from then on without flags (fail open: not even
    maintenance). Before, a thread may still answer with what it read."""
    deadline = time.monotonic() + 10
    late = 0
    while late < 10 or not srv.log_lines(pattern):
        assert time.monotonic() < deadline, srv.error_log()[-2000:]
        asked = time.monotonic()
        r = timed_get(srv, "/app/page")
        if asked > since + TTL + MARGIN:
            assert r.status == 200
            assert features(json.loads(r.body)["headers"]) == {}
            late += 1
        else:
            assert r.status in (200, 503)


def test_redis_down_fails_open_and_logs(srv, redis):
    one_mpm(srv)
    redis.cli("HSET", "flags", "maintenance", "on", "new-checkout", "on")
    past_ttl(time.monotonic())
    assert srv.get("/", source=VISITOR).status == 503
    redis.stop()
    try:
        served_open_until_logged(srv, time.monotonic(),
                                 r"redis-flags: cannot read flags from Redis at 127\.0\.0\.1:%d "
                                 r"\(Apache::Socket::ConnectError: .*\): using \{\}" % REDIS_PORT)
        # The page of the flags cannot show them: 503, logged.
        assert timed_get(srv, "/flags", source="127.0.0.1").status == 503
        srv.wait_log(r"redis-flags: Redis at 127\.0\.0\.1:%d: Apache::Socket::ConnectError" % REDIS_PORT)
    finally:
        redis.start()
    # Back (empty: the test's Redis keeps nothing on disk): read again.
    redis.cli("HSET", "flags", "new-checkout", "on")
    past_ttl(time.monotonic())
    assert features(backend_view(srv)) == {"x-feature-new-checkout": "on"}


def test_redis_that_hangs_costs_a_timeout_not_more(srv, redis):
    """A stopped process (SIGSTOP): the kernel still takes connections, no
    reply comes. Each thread waits TIMEOUT once a TTL, then serves without
    flags."""
    one_mpm(srv)
    redis.cli("HSET", "flags", "maintenance", "on")
    past_ttl(time.monotonic())
    assert srv.get("/", source=VISITOR).status == 503
    redis.proc.send_signal(signal.SIGSTOP)
    try:
        served_open_until_logged(srv, time.monotonic(),
                                 r"redis-flags: cannot read flags from Redis at 127\.0\.0\.1:%d "
                                 r"\(Apache::Socket::Timeout: .*\): using \{\}" % REDIS_PORT)
        # Past a TTL more: each thread tries again, and waits no longer.
        again = time.monotonic()
        while time.monotonic() < again + 2 * TTL:
            assert timed_get(srv, "/app/page").status == 200
    finally:
        redis.proc.send_signal(signal.SIGCONT)
    past_ttl(time.monotonic())
    assert srv.get("/", source=VISITOR).status == 503


def hgetall_calls(redis):
    for line in redis.cli("INFO", "commandstats").splitlines():
        if line.startswith("cmdstat_hgetall:"):
            return int(line.split("calls=", 1)[1].split(",", 1)[0])
    return 0


@pytest.mark.skipif(system_apache.enabled(), reason="a second server of its own: test servers only")
@pytest.mark.parametrize("mpm", ANY_MPM)
def test_each_thread_reads_redis_once_a_ttl(make_httpd, mpm, redis):
    """One worker thread in all: however many requests it serves, Redis
    gets one HGETALL per TTL from it (the VM's cache, the same on every
    MPM)."""
    recipe = Recipe("redis-flags")
    srv = make_httpd("recipe-redis-flags-one", mpm, "IncludeOptional conf-enabled/*.conf\n", mpm_conf=SINGLE_WORKER,
                     modules=with_dependencies(recipe.modules()), files=FILES)
    recipe.install(srv)
    settings(srv)
    srv.start()
    redis.cli("HSET", "flags", "maintenance", "on")
    # httpd takes connections before its child has started: the window
    # opens once the child has served a request (and read the flags), and
    # their copy is older than TTL, so that its first request reads again.
    assert srv.get("/index.html", source=VISITOR).status == 503
    past_ttl(time.monotonic())
    before = hgetall_calls(redis)
    start = time.monotonic()
    requests = 0
    while time.monotonic() < start + 3 * TTL:
        assert srv.get("/index.html", source=VISITOR).status == 503
        requests += 1
    elapsed = time.monotonic() - start
    calls = hgetall_calls(redis) - before
    # A read at the start, then one each time TTL has passed.
    assert int(elapsed / TTL) <= calls <= int(elapsed / TTL) + 1, (calls, elapsed, requests)
    assert requests >= 10 * calls, (calls, requests)
