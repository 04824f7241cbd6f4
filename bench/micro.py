"""bench/micro.py: the cost of single operations from Ruby, timed inside a
handler (so neither the request nor the client counts): Apache::Cache's
get, set and incr on the shared dictionary and on shmcb side by side, and
OpenSSL::HMAC over 1 KB. Once with one request at a time, then with 16 at
once on the worker MPM (2 processes x 8 threads), each on a key of its own.
Each figure is the median over the rounds, less the cost of the empty loop.
"""

import concurrent.futures
import os
import statistics
import time

from cases import get
from server import Server, mpm_config

SCRIPT = r"""
r = Apache::Request.new
q = r.query_params
op = q["op"]
n = q["n"].to_i
key = "bench-" + q["t"].to_s
value = "v" * 100
data = "a" * 1024
cache = q["store"] ? Apache::Cache.named(q["store"].to_sym) : nil
if cache
  cache.delete(key)
  cache.set(key, "0")
end
start = Time.now
case op
when "noop" then n.times { }
when "get" then n.times { cache.get(key) }
when "set" then n.times { cache.set(key, value) }
when "incr" then n.times { cache.incr(key) }
when "hmac" then n.times { OpenSSL::HMAC.digest("SHA256", "a secret key", data) }
else raise ArgumentError, "no such operation: #{op}"
end
Apache.rputs(((Time.now - start) * 1_000_000.0 / n).to_s)
"""

CONF = """
mrubyCache bdict dict(16M)
mrubyCache bshm shmcb:bench-shmcb.cache(16777216)
<Location /op>
    SetHandler mruby-native-script
    mrubyHandler {root}/op.rb
</Location>
"""

# (label, query): the operations measured.
OPERATIONS = [
    ("dict get", "op=get&store=bdict"),
    ("shmcb get", "op=get&store=bshm"),
    ("dict set (100 B)", "op=set&store=bdict"),
    ("shmcb set (100 B)", "op=set&store=bshm"),
    ("dict incr", "op=incr&store=bdict"),
    ("shmcb incr", "op=incr&store=bshm"),
    ("HMAC-SHA256, 1 KB", "op=hmac"),
]
CLIENTS = 16


def _server(args, module_paths, tmp):
    modules = [("mruby", module_paths["mruby"]),
               ("socache_shmcb", os.path.join(args.modules_dir, "mod_socache_shmcb.so"))]
    srv = Server(args.httpd, args.modules_dir, "worker", "micro", modules, CONF, {}, mpm_config("worker", 16, 8),
                 cpus=None, tmp=tmp)
    srv.write("op.rb", SCRIPT)
    return srv


def _per_op(srv, query, n, t=0):
    return float(get(srv, "/op?%s&n=%d&t=%d" % (query, n, t)))


def measure(args, module_paths, tmp, log):
    """{label: {"one_us": ..., "sixteen_us": ..., "sixteen_ops_s": ...}}"""
    n, rounds = args.micro_ops, args.micro_rounds
    srv = _server(args, module_paths, tmp)
    out = {"ops_per_request": n, "rounds": rounds, "clients": CLIENTS, "operations": {}}
    try:
        srv.start()
        with concurrent.futures.ThreadPoolExecutor(CLIENTS) as pool:
            # every thread's VM made, every script loaded, before timing
            list(pool.map(lambda i: _per_op(srv, "op=noop", 10, i), range(CLIENTS * 4)))
            empty = statistics.median(_per_op(srv, "op=noop", n) for _ in range(rounds))
            for label, query in OPERATIONS:
                one = statistics.median(_per_op(srv, query, n) for _ in range(rounds)) - empty
                each, rates = [], []
                for _ in range(rounds):
                    start = time.monotonic()
                    got = list(pool.map(lambda i: _per_op(srv, query, n, i), range(CLIENTS)))
                    wall = time.monotonic() - start
                    each.append(statistics.median(got) - empty)
                    rates.append(CLIENTS * n / wall)
                out["operations"][label] = {"one_us": one, "sixteen_us": statistics.median(each),
                                            "sixteen_ops_s": statistics.median(rates)}
                log("== micro %-18s one at a time %.2f us; 16 at once %.2f us each, %.0f ops/s in all" % (
                    label, one, statistics.median(each), statistics.median(rates)))
        errors = [line for line in srv.error_log().splitlines() if "[mruby:error]" in line]
        if errors:
            out["errors"] = errors[:5]
    finally:
        srv.stop()
        srv.cleanup()
    return out


def table(results):
    micro = results.get("micro") or {}
    ops = micro.get("operations") or {}
    if not ops:
        return []
    rows = ["| Operation | one request at a time: µs per operation | %d requests at once: µs per operation | "
            "%d at once: operations per second in all |" % (micro["clients"], micro["clients"]),
            "|---|---:|---:|---:|"]
    for label, r in ops.items():
        rows.append("| %s | %.2f | %.2f | %.0f |" % (label, r["one_us"], r["sixteen_us"], r["sixteen_ops_s"]))
    return rows
