"""Apache::Cache on httpd's socache providers: shmcb (one host), memcache
and redis (real servers started on loopback), on every MPM: set, get,
delete, ttl expiry, fetch, incr; exact counters across processes and
threads; two httpd instances sharing one server; a server that is down."""

import concurrent.futures
import os
import re
import time

import pytest

from cache_servers import backend_fixture
from httpd import MPMS, ROOT, Httpd, free_port, well_inside_window


PROVIDER_MODULES = ("socache_shmcb", "socache_memcache", "socache_redis")

memcached = backend_fixture("memcache")
redis = backend_fixture("redis")

# One request, one cache operation: /c/OP?cache=NAME&key=K&value=V&ttl=T&n=N
OPS_RB = r'''
r = Apache::Request.new
q = {}
(r.args || "").split("&").each { |kv| k, v = kv.split("=", 2); q[k] = v.to_s }
c = Apache::Cache.named(q["cache"] || "default")
k = q["key"] || "k"
ttl = q["ttl"] && q["ttl"].to_f
value = q["size"] ? "v" * q["size"].to_i : q["value"]
pid = File.open("/proc/self/stat") { |f| f.read }.split(" ")[0]
begin
  out = case r.uri
  when "/c/set" then c.set(k, value, ttl: ttl).bytesize.to_s
  when "/c/get" then v = c[k]; v.nil? ? "nil" : "=" + v
  when "/c/delete" then c.delete(k).to_s
  when "/c/incr"
    n = nil
    (q["n"] || "1").to_i.times { n = c.incr(k, (q["by"] || "1").to_i, ttl: ttl) }
    "#{n} #{pid}"
  when "/c/add_under_lock"
    # A read-modify-write that only synchronize makes exact.
    (q["n"] || "1").to_i.times { c.synchronize(k) { c[k] = (c[k].to_i + 1).to_s } }
    pid
  end
  Apache.rputs out
rescue Apache::Cache::Error => e
  r.status = 503
  Apache.rputs "#{e.class}: #{e.message}"
rescue RangeError, TypeError => e
  r.status = 422
  Apache.rputs "#{e.class}: #{e.message}"
end
'''

# Three reads of a cache whose max-value is 64 MB (each reserves that much),
# and how much the process's address space grew over them, in KB.
BIG_READ_RB = r'''
def vm_size_kb
  status = File.open("/proc/self/status") { |f| f.read }
  status.split("\n").find { |l| l.start_with?("VmSize:") }.split(" ")[1].to_i
end
c = Apache::Cache.named("big")
c["k"] = "small"
before = vm_size_kb
values = (1..3).map { c["k"] }
Apache.rputs "#{values.join(",")} #{vm_size_kb - before}"
'''

API_RB = r'''
r = Apache::Request.new
c = Apache::Cache.named(r.args)
res = []
check = lambda { |name, ok| res << "#{name}:#{ok ? 'ok' : 'FAIL'}" }
binary = (0..255).map { |i| i.chr }.join * 3
c.set("bin", binary)
check.call("binary", c.get("bin") == binary && c.get("bin").bytesize == 768)
c["empty"] = ""
check.call("empty", c["empty"] == "")
c[:sym] = "symbol key"
check.call("symbol", c["sym"] == "symbol key")
long = "k" * 100
c[long] = "long key"
check.call("longkey", c[long] == "long key")
check.call("toolong", (begin; c["k" * 101] = "x"; false; rescue ArgumentError; true; end))
check.call("nokey", (begin; c[""] = "x"; false; rescue ArgumentError; true; end))
check.call("keytype", (begin; c[1] = "x"; false; rescue TypeError; true; end))
check.call("valuetype", (begin; c["v"] = 5; false; rescue TypeError; true; end))
check.call("ttlrange", (begin; c.set("v", "x", ttl: 0); false; rescue ArgumentError; true; end))
check.call("ttltype", (begin; c.set("v", "x", ttl: "1"); false; rescue TypeError; true; end))
check.call("maxvalue", (begin; c.set("v", "x" * (c.max_value + 1)); false; rescue ArgumentError; true; end))
c["gone"] = "x"
c["gone"] = nil
check.call("nil_deletes", c["gone"].nil?)
c["d"] = "x"
check.call("delete", c.delete("d") == true && c.delete("d") == false && c["d"].nil?)
calls = 0
c.delete("f") # memcache and redis keep it from the previous server's run
v1 = c.fetch("f") { calls += 1; "computed" }
v2 = c.fetch("f") { calls += 1; "again" }
check.call("fetch", v1 == "computed" && v2 == "computed" && calls == 1)
check.call("fetch_nil", c.fetch("fnil") { nil }.nil? && c["fnil"].nil?)
check.call("fetch_keyerror", (begin; c.fetch("nothing-here"); false; rescue KeyError; true; end))
c.delete("n")
check.call("incr", c.incr("n") == 1 && c.incr("n", 41) == 42 && c.decr("n", 2) == 40 && c["n"] == "40")
check.call("incr_negative", c.incr("n", -50) == -10 && c["n"] == "-10")
# by must be an Integer: a Float was truncated, and decr(k, 1.5) added 1.
check.call("incr_float", (begin; c.incr("n", 1.9); false; rescue TypeError; true; end) &&
                         (begin; c.decr("n", 1.5); false; rescue TypeError; true; end) && c["n"] == "-10")
c["text"] = "abc"
check.call("incr_notint", (begin; c.incr("text"); false; rescue TypeError; true; end))
c["big"] = "9223372036854775807"
check.call("incr_overflow", (begin; c.incr("big"); false; rescue RangeError; true; end) && c["big"] == "9223372036854775807")
r1 = c.synchronize("s") { c.synchronize("s") { c.incr("n") } + 100 }
check.call("sync_nested", r1 == 91)
check.call("sync_raise", (begin; c.synchronize("s") { raise IOError, "inside" }; false; rescue IOError; true; end))
check.call("sync_after_raise", c.synchronize("s") { :again } == :again)
check.call("sync_break", c.synchronize("s") { break :broke } == :broke)
check.call("sync_next", c.synchronize("s") { next :skipped; :not_here } == :skipped)
check.call("sync_noblock", (begin; c.synchronize("s"); false; rescue ArgumentError; true; end))
check.call("same_object", Apache::Cache.named(r.args).equal?(c))
check.call("name", c.name == r.args && c.inspect == "#<Apache::Cache #{r.args}>")
Apache.rputs res.join(" ")
'''

DEFAULT_API_RB = r'''
Apache::Cache["top"] = "level"
Apache::Cache.set("t2", "x", ttl: 60)
out = [Apache::Cache["top"], Apache::Cache.get("t2"), Apache::Cache.fetch("t3") { "f" },
       Apache::Cache.incr("tn", 2, ttl: 60).to_s, Apache::Cache.decr("tn").to_s,
       Apache::Cache.synchronize("t") { "sync" }, Apache::Cache.delete("top").to_s,
       Apache::Cache.default.name]
Apache.rputs out.join(",")
'''

TTL_RB = r'''
r = Apache::Request.new
caches = %w[default mc rd].map { |n| Apache::Cache.named(n) }
if r.args == "set"
  caches.each { |c| c.set("short", "s", ttl: 1); c.set("long", "l", ttl: 60); c["forever"] = "f" }
end
Apache.rputs caches.map { |c| [c["short"], c["long"], c["forever"]].map { |v| v || "-" }.join }.join(" ")
'''


# Where the scripts above answer.
SCRIPT_FILES = {"/c": "ops.rb", "/all": "all.rb", "/default_api": "default_api.rb", "/ttl": "ttl.rb"}


def doc_example(name):
    """The Ruby example of docs/ruby-api.md whose first line is `# NAME:`,
    so the documentation is tested as it is written."""
    with open(os.path.join(ROOT, "docs", "ruby-api.md")) as f:
        blocks = re.findall(r"```ruby\n(.*?)```", f.read(), re.S)
    found = [b for b in blocks if b.startswith("# %s:" % name)]
    assert len(found) == 1, name
    return found[0]


def script_locations():
    return "".join("<Location %s>\n    SetHandler mruby-native-script\n"
                   "    mrubyHandler {root}/scripts/%s\n</Location>\n" % (uri, script)
                   for uri, script in SCRIPT_FILES.items())


def cache_body(mc, rd, down_port):
    return r"""
mrubyCache shmcb:{root}/run/cache(1048576)
mrubyCache mc %s
mrubyCache rd %s
mrubyCache mcdown memcache:127.0.0.1:%d
mrubyCache rddown redis:127.0.0.1:%d
mrubyCache tiny shmcb max-value=100
mrubyCache ctr shmcb max-value=3
mrubyCache mcctr %s max-value=3
mrubyCache rdctr %s max-value=3
mrubyCache mcbig %s max-value=2M
mrubyCache big shmcb max-value=64M
<Location /bigread>
    SetHandler mruby-native-script
    mrubyHandler {root}/scripts/bigread.rb
</Location>
mrubyChildInitCode "Apache::Cache.incr('children')"
mrubyPostConfigCode "begin; Apache::Cache['x']; rescue Apache::Cache::Error => e; File.open('{root}/out/post_config.txt', 'w') { |f| f.write e.message }; end"
%s<Location /raise>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache::Cache.named('mcdown')['k'] = 'v'"
</Location>
<Location /nocache>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache::Cache.named('nope')"
</Location>
<Location /ok>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'still answering'"
</Location>
# The examples of docs/ruby-api.md
<Location /api/>
    mrubyAccessChecker {root}/scripts/rate_limit.rb cache
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'api answer'"
</Location>
mrubyCache pages shmcb:pages.cache(16777216) max-value=100000
<Location /report>
    SetHandler mruby-native-script
    mrubyHandler {root}/scripts/page_cache.rb cache
</Location>
<VirtualHost 127.0.0.1:{port}>
    ServerName vhost.example
    <Location /vhost>
        SetHandler mruby-native-script
        mrubyHandlerCode "Apache.rputs Apache::Cache.named('mc')['shared'].to_s"
    </Location>
</VirtualHost>
""" % (mc.spec, rd.spec, down_port, down_port, mc.spec, rd.spec, mc.spec, script_locations())


def new_cache_httpd(name, mpm, mc, rd, make=Httpd):
    """A server with the caches and scripts above; make is Httpd or the
    make_httpd fixture (which stops it at the end of the test)."""
    srv = make(name, mpm, cache_body(mc, rd, free_port()), modules=PROVIDER_MODULES)
    for script, text in (("ops.rb", OPS_RB), ("bigread.rb", BIG_READ_RB), ("all.rb", API_RB), ("default_api.rb", DEFAULT_API_RB),
                         ("ttl.rb", TTL_RB)):
        srv.write("scripts/" + script, text)
    srv.write("scripts/rate_limit.rb", doc_example("rate_limit.rb"))
    srv.write("scripts/page_cache.rb", doc_example("page_cache.rb"))
    return srv


@pytest.fixture(scope="module", params=MPMS)
def server(request, memcached, redis):
    srv = new_cache_httpd("cache", request.param, memcached, redis).start()
    yield srv
    srv.stop()
    srv.cleanup()


CACHES = ("default", "mc", "rd")


@pytest.mark.parametrize("cache", CACHES)
def test_set_get_delete(server, cache):
    key = "sgd-%s" % server.mpm
    r = server.get("/c/set?cache=%s&key=%s&value=hello" % (cache, key))
    assert (r.status, r.text) == (200, "5")
    assert server.get("/c/get?cache=%s&key=%s" % (cache, key)).text == "=hello"
    assert server.get("/c/set?cache=%s&key=%s&value=again" % (cache, key)).text == "5"
    assert server.get("/c/get?cache=%s&key=%s" % (cache, key)).text == "=again"
    assert server.get("/c/delete?cache=%s&key=%s" % (cache, key)).text == "true"
    assert server.get("/c/get?cache=%s&key=%s" % (cache, key)).text == "nil"
    assert server.get("/c/delete?cache=%s&key=%s" % (cache, key)).text == "false"


@pytest.mark.parametrize("cache", CACHES)
def test_the_whole_api(server, cache):
    r = server.get("/all?" + cache)
    assert r.status == 200, server.error_log()[-2000:]
    assert "FAIL" not in r.text, r.text
    assert len(r.text.split()) == 29


def test_class_methods_use_the_default_cache(server):
    r = server.get("/default_api")
    assert (r.status, r.text) == (200, "level,x,f,2,1,sync,true,default")


def test_ttl_expiry_on_every_provider(server):
    assert server.get("/ttl?set").text == "slf slf slf"
    time.sleep(2.6)
    assert server.get("/ttl").text == "-lf -lf -lf"


def test_child_init_can_use_the_cache_and_post_config_cannot(server):
    # Every child started so far counted itself in ChildInit.
    assert int(server.get("/c/get?key=children").text.lstrip("=")) >= 1
    with open(server.path("out/post_config.txt")) as f:
        assert "only available in child processes" in f.read()


def test_virtual_hosts_see_the_main_servers_caches(server):
    server.get("/c/set?cache=mc&key=shared&value=from-main-%s" % server.mpm)
    r = server.get("/vhost", headers={"Host": "vhost.example"})
    assert (r.status, r.text) == (200, "from-main-%s" % server.mpm)


def test_unknown_cache_name_is_an_argument_error(server):
    server.expect("/nocache", 500, r"MRB00030: .* raised ArgumentError .*no cache named 'nope'")


def test_value_larger_than_max_value_or_a_shmcb_subcache(server):
    server.expect("/c/set?cache=tiny&key=big&size=200", 500,
                  r"ArgumentError .*a value of 200 bytes is larger than the cache's max-value \(100\)")
    # 1 MB of shmcb has 32 subcaches of about 27 KB: a 40 KB entry has no room.
    r = server.get("/c/set?key=huge&size=40000")
    assert r.status == 503
    assert "Apache::Cache::Error: cache 'default': set failed: no room for the entry" in r.text
    assert server.get("/ok").text == "still answering"


@pytest.mark.parametrize("cache", ("ctr", "mcctr", "rdctr"))
def test_incr_refuses_a_sum_longer_than_max_value(server, cache):
    """max-value=3 holds counters up to 999: incr past it raises RangeError
    and leaves the entry readable, instead of storing "1000", which no read
    can take back (shmcb then sees no entry and counts again from 0)."""
    key = "ctr-%s" % server.mpm
    assert server.get("/c/set?cache=%s&key=%s&value=998" % (cache, key)).text == "3"
    assert server.get("/c/incr?cache=%s&key=%s" % (cache, key)).text.split()[0] == "999"
    r = server.get("/c/incr?cache=%s&key=%s" % (cache, key))
    assert (r.status, r.text) == (422, "RangeError: Apache::Cache#incr: the sum has more digits "
                                       "than the cache's max-value (3 bytes)")
    assert server.get("/c/get?cache=%s&key=%s" % (cache, key)).text == "=999"
    # Negative sums need their sign too: -99 fits, -100 does not.
    assert server.get("/c/set?cache=%s&key=%s&value=-98" % (cache, key)).text == "3"
    assert server.get("/c/incr?cache=%s&key=%s&by=-1" % (cache, key)).text.split()[0] == "-99"
    assert server.get("/c/incr?cache=%s&key=%s&by=-1" % (cache, key)).status == 422
    assert server.get("/c/get?cache=%s&key=%s" % (cache, key)).text == "=-99"


def test_a_value_the_cache_server_refuses_says_why(server):
    """memcached (1 MB items by default) refuses 1.5 MB; the error said
    only "Internal error (specific information not available)"."""
    r = server.get("/c/set?cache=mcbig&key=huge-%s&size=1500000" % server.mpm)
    assert (r.status, r.text) == (503, "Apache::Cache::Error: cache 'mcbig': set failed: the cache server "
                                       "refused to store it (too large for it, or out of memory: "
                                       "see memcached -I, redis maxmemory)")
    assert server.get("/c/set?cache=mcbig&key=huge-%s&size=500000" % server.mpm).text == "500000"


def run_concurrently(server, path, requests, clients, headers=None):
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        return list(pool.map(lambda _: server.get(path, headers=headers, timeout=120), range(requests)))


@pytest.mark.parametrize("cache", CACHES)
def test_counter_is_exact_after_20000_concurrent_increments(server, cache):
    key = "counter-%s" % server.mpm
    server.get("/c/delete?cache=%s&key=%s" % (cache, key))
    # 400 requests of 50 increments each, 20 at a time.
    responses = run_concurrently(server, "/c/incr?cache=%s&key=%s&n=50" % (cache, key), 400, 20)
    assert [r.status for r in responses] == [200] * 400, [r.text for r in responses if r.status != 200][:3]
    values = sorted(int(r.text.split()[0]) for r in responses)
    pids = {r.text.split()[1] for r in responses}
    assert values[-1] == 20000
    assert len(set(values)) == 400  # no two requests ended on the same count
    assert server.get("/c/get?cache=%s&key=%s" % (cache, key)).text == "=20000"
    if server.mpm == "prefork":
        assert len(pids) > 1, pids  # the increments came from several processes


def test_reads_give_back_the_buffer_of_a_large_max_value(server):
    """max-value=64M (a size suffix) reserves 64 MB per read; the thread's
    VM keeps at most 512 KB of such memory for the next operations, so the
    process does not stay 64 MB larger for each thread that once read."""
    for _ in range(3):
        r = server.get("/bigread")
        assert r.status == 200, r.text
        values, growth_kb = r.text.split(" ")
        assert values == "small,small,small"
        assert int(growth_kb) < 8 * 1024, r.text


def test_synchronize_makes_read_modify_write_exact(server):
    key = "rmw-%s" % server.mpm
    server.get("/c/delete?key=%s" % key)
    responses = run_concurrently(server, "/c/add_under_lock?key=%s&n=20" % key, 100, 20)
    assert [r.status for r in responses] == [200] * 100
    assert server.get("/c/get?key=%s" % key).text == "=2000"


def test_provider_down_raises_and_the_server_keeps_answering(server):
    for cache in ("mcdown", "rddown"):
        r = server.get("/c/set?cache=%s&key=a&value=b" % cache, timeout=10)
        assert r.status == 503
        assert r.text == ("Apache::Cache::Error: cache '%s': set failed: "
                          "no server of the cache is reachable" % cache)
        r = server.get("/c/incr?cache=%s&key=a" % cache, timeout=10)
        assert r.status == 503 and "incr failed" in r.text
    # Not rescued: a 500 and the error in the log.
    server.expect("/raise", 500, r"MRB00030: Handler script .* raised Apache::Cache::Error .*cache 'mcdown': "
                                 r"set failed")
    assert server.get("/ok").text == "still answering"
    assert server.get("/c/get?key=children").status == 200


def test_rate_limiter_example(server):
    """ruby-api.md's rate limiter: 100 requests a minute for each client
    address, whatever API key it sends."""
    well_inside_window(60, 10)
    responses = run_concurrently(server, "/api/x", 100, 10)
    assert [r.status for r in responses] == [200] * 100
    assert sorted(int(r.headers["X-RateLimit-Remaining"]) for r in responses) == list(range(100))
    r = server.get("/api/x")
    assert r.status == 429 and 0 < int(r.headers["Retry-After"]) <= 60
    r = server.get("/api/x", headers={"X-Api-Key": "a-new-key-%d" % time.time()})
    assert r.status == 429
    r = server.get("/api/x", source="127.0.0.2")
    assert (r.status, r.text, r.headers["X-RateLimit-Remaining"]) == (200, "api answer", "99")


def test_page_cache_example(server):
    query = "q=%s-%d" % (server.mpm, time.time())
    first = server.get("/report?" + query)
    assert (first.status, first.headers["X-Cache"]) == (200, "MISS")
    assert first.text.startswith("<html><body><table><tr><td>1</td><td>1</td></tr>")
    for _ in range(5):
        again = server.get("/report?" + query)
        assert (again.status, again.headers["X-Cache"], again.body) == (200, "HIT", first.body)
    assert server.get("/report?other-" + query).headers["X-Cache"] == "MISS"


def test_requests_that_sleep_count_exactly_and_never_sleep_holding_the_lock(make_httpd):
    srv = make_httpd("cache-async", "event", r"""
mrubyCache shmcb
<Location /sleepy>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache::Cache.incr('before'); Apache::Async.sleep 30; Apache.rputs Apache::Cache.incr('after').to_s"
</Location>
<Location /sleep_in_sync>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache::Cache.synchronize('k') { Apache::Async.sleep 30; Apache.rputs Apache::Cache.incr('in_sync').to_s }"
</Location>
""", modules=PROVIDER_MODULES, mpm_conf=dict(StartServers=1, ServerLimit=1, ThreadsPerChild=4,
                                          MinSpareThreads=1, MaxSpareThreads=4, MaxRequestWorkers=4))
    srv.start()
    # 40 requests on 4 threads: they are suspended and resumed on any thread.
    responses = run_concurrently(srv, "/sleepy", 40, 20)
    assert [r.status for r in responses] == [200] * 40
    assert sorted(int(r.text) for r in responses) == list(range(1, 41))
    responses = run_concurrently(srv, "/sleep_in_sync", 12, 6)
    assert sorted(int(r.text) for r in responses) == list(range(1, 13))


HOOKED = os.environ.get("MM_MRUBY_MODE") == "source"


@pytest.mark.skipif(not HOOKED, reason="mrubyTimeout needs libmruby with MRB_USE_DEBUG_HOOK (source build)")
def test_a_script_stopped_hard_inside_synchronize_gives_the_lock_back(make_httpd, mpm):
    """mrubyTimeout stops a script that rescues Apache::Timeout by jumping
    past the C frame of its synchronize block: the cache's lock must be
    released all the same, or every incr of the server waits for ever."""
    srv = make_httpd("cache-stopped", mpm, r"""
mrubyCache shmcb
<Location /stubborn>
    mrubyTimeout 300
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache::Cache.synchronize('k') { loop { begin; loop { }; rescue Exception; end } }"
</Location>
<Location /incr>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs Apache::Cache.incr('n').to_s"
</Location>
""", modules=PROVIDER_MODULES).start()
    srv.expect("/stubborn", 503, r"MRB00063: Handler script .* rescued Apache::Timeout and went on",
               timeout=10)
    # From several clients at once: other threads and processes than the
    # one that ran the script.
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        responses = list(pool.map(lambda _: srv.get("/incr", timeout=10), range(40)))
    assert sorted(int(r.text) for r in responses) == list(range(1, 41))


# ----------------------------------------------------- several servers


@pytest.mark.parametrize("provider", ("memcache", "redis"))
def test_two_httpd_instances_share_one_server(make_httpd, provider, memcached, redis):
    backend = memcached if provider == "memcache" else redis
    body = r"""
mrubyCache shared %s
<Location /c>
    SetHandler mruby-native-script
    mrubyHandler {root}/scripts/ops.rb
</Location>
""" % backend.spec
    hosts = []
    for mpm in ("prefork", "event"):
        srv = make_httpd("cache-host", mpm, body, modules=PROVIDER_MODULES)
        srv.write("scripts/ops.rb", OPS_RB)
        hosts.append(srv.start())
    a, b = hosts
    key = "between-hosts-%s" % provider
    assert a.get("/c/set?cache=shared&key=%s&value=written-by-a" % key).status == 200
    assert b.get("/c/get?cache=shared&key=%s" % key).text == "=written-by-a"
    assert b.get("/c/set?cache=shared&key=%s&value=then-b" % key).status == 200
    assert a.get("/c/get?cache=shared&key=%s" % key).text == "=then-b"
    assert a.get("/c/delete?cache=shared&key=%s" % key).text == "true"
    assert b.get("/c/get?cache=shared&key=%s" % key).text == "nil"


@pytest.mark.parametrize("provider", ("memcache", "redis"))
def test_a_server_that_stops_makes_operations_raise(make_httpd, provider):
    from cache_servers import BACKENDS

    backend = BACKENDS[provider]().start()
    try:
        srv = make_httpd("cache-stop", "event", r"""
mrubyCache %s
<Location /c>
    SetHandler mruby-native-script
    mrubyHandler {root}/scripts/ops.rb
</Location>
<Location /ok>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'still answering'"
</Location>
""" % backend.spec, modules=PROVIDER_MODULES)
        srv.write("scripts/ops.rb", OPS_RB)
        srv.start()
        assert srv.get("/c/set?key=k&value=v").status == 200
        backend.stop()
        started = time.time()
        r = srv.get("/c/set?key=k&value=v", timeout=10)
        assert r.status == 503 and r.text.startswith("Apache::Cache::Error: cache 'default': set failed: ")
        assert time.time() - started < 3
        assert srv.get("/ok").text == "still answering"
    finally:
        backend.stop()
        backend.cleanup()


# ------------------------------------------------------- configuration


def test_missing_provider_module_fails_configtest(make_httpd):
    srv = make_httpd("cache-noprovider", "event", "mrubyCache memcache:127.0.0.1:11211\n")
    code, out = srv.configtest()
    assert code != 0
    assert "mrubyCache: no socache provider 'memcache': load its module before this line" in out
    assert "LoadModule socache_memcache_module" in out


@pytest.mark.parametrize("line,message", [
    ("mrubyCache shmcb\nmrubyCache shmcb", "the cache 'default' is already configured"),
    ("mrubyCache c1 shmcb\nmrubyCache c1 shmcb", "the cache 'c1' is already configured"),
    ("mrubyCache bad.name shmcb", "'bad.name' is not a cache name"),
    ("mrubyCache waytoolongname shmcb", "'waytoolongname' is not a cache name"),
    ("mrubyCache shmcb max-value=0", "max-value must be a number of bytes from 1 to 67108864"),
    ("mrubyCache shmcb max-value=65M", "(64M), in digits with an optional K, M or G suffix, not '65M'"),
    # G is a suffix like K and M: the value is refused for its size alone
    ("mrubyCache shmcb max-value=1G", "bytes from 1 to 67108864 (64M), in digits with an optional K, M or G suffix, "
                                      "not '1G'"),
    ("mrubyCache shmcb max-value=lots", "max-value must be a number of bytes"),
    ("mrubyCache c2 shmcb colour=blue", "unknown option 'colour=blue'"),
    ("mrubyCache memcache", "mrubyCache memcache: List of server names required"),
    ("mrubyCache shmcb:/tmp/x(100)", "size has to be >= 8192 bytes"),
    ("<VirtualHost 127.0.0.1:{port}>\nmrubyCache shmcb\n</VirtualHost>", "cannot occur within <VirtualHost>"),
])
def test_configuration_errors(make_httpd, line, message):
    srv = make_httpd("cache-conf", "event", modules=PROVIDER_MODULES)
    code, out = srv.configtest(line + "\n")
    assert code != 0
    assert message in out, out


def test_mutex_directive_configures_the_lock(make_httpd):
    srv = make_httpd("cache-mutex", "prefork", r"""
Mutex flock:{root}/locks mruby-cache
mrubyCache shmcb
<Location /c>
    SetHandler mruby-native-script
    mrubyHandler {root}/scripts/ops.rb
</Location>
""", modules=PROVIDER_MODULES)
    srv.shared_dir("locks")
    srv.write("scripts/ops.rb", OPS_RB)
    srv.start()
    assert [f for f in os.listdir(srv.path("locks")) if f.startswith("mruby-cache-default.")]
    responses = run_concurrently(srv, "/c/incr?key=n&n=20", 100, 10)
    assert [r.status for r in responses] == [200] * 100
    assert srv.get("/c/get?key=n").text == "=2000"


def test_graceful_restarts_keep_working_and_do_not_leak(make_httpd, memcached, redis):
    srv = new_cache_httpd("cache-restart", "event", memcached, redis, make=make_httpd).start()
    srv.get("/c/set?cache=mc&key=persist&value=kept")
    srv.get("/c/set?key=local&value=lost")
    run_dir = sorted(os.listdir(srv.path("run")))
    for _ in range(3):
        srv.graceful()
        assert srv.get("/ok").text == "still answering"
        assert srv.get("/c/incr?key=after-restart").status == 200
    # memcache keeps its entries; shmcb is made anew by each generation.
    assert srv.get("/c/get?cache=mc&key=persist").text == "=kept"
    assert srv.get("/c/get?key=local").text == "nil"
    assert sorted(os.listdir(srv.path("run"))) == run_dir


def test_locks_hold_in_old_children_during_graceful_restarts(make_httpd, mpm, memcached, redis):
    """The parent destroyed the caches' global mutexes at each restart and
    made new ones, while the old generation's children still served
    requests with the old ones: their incr and synchronize failed
    ("Invalid argument", a 500). Many clients count in redis, which keeps
    its entries across generations, under a graceful restart every second:
    every answer a 200, and the counter exact."""
    srv = new_cache_httpd("cache-locks", mpm, memcached, redis, make=make_httpd).start()
    key = "restarts-%s" % mpm
    stop = time.monotonic() + 5
    failures = []

    def client(i):
        done = 0
        while time.monotonic() < stop:
            op = "incr" if i % 2 else "add_under_lock"
            k = key if op == "incr" else key + "-locked"
            r = srv.get("/c/%s?cache=rd&key=%s&n=3" % (op, k))
            if r.status != 200:
                failures.append((r.status, r.text))
            else:
                done += 3
        return i % 2, done

    with concurrent.futures.ThreadPoolExecutor(41) as pool:
        counting = [pool.submit(client, i) for i in range(40)]
        n = pool.submit(srv.restart_every, 1, stop).result()
        done = [f.result() for f in counting]
    assert failures == []
    assert n >= 3
    assert "MRB00030" not in srv.error_log()
    incremented = sum(d for odd, d in done if odd)
    locked = sum(d for odd, d in done if not odd)
    assert incremented > 0 and locked > 0
    assert srv.get("/c/get?cache=rd&key=%s" % key).text == "=%d" % incremented
    assert srv.get("/c/get?cache=rd&key=%s-locked" % key).text == "=%d" % locked
