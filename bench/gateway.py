"""The "gateway" case (issue 30): a mod_mruby handler that fetches a
backend with Apache::HTTP and answers its body, on the event MPM.

* Slow backend: it answers after 100 ms (Apache::Async.sleep); 1,000
  clients at once (`ab -c 1000 -n 1000`, no keep-alive) against a gateway
  of one child with 25 threads. Blocking calls would need 1000 / 25 x 100 ms
  = 4 s; suspended ones, about 100 ms plus the work.
* Fast backend: it answers at once; keep-alive throughput of the gateway
  against mod_proxy (`ProxyPass` to the same backend, the C floor for this
  job), side by side, rounds interleaved. The gateway's sections are not
  mapped to the file system (`mrubyDirectoryWalk Off`), as mod_proxy's
  URLs are not; `/gd`, the same gateway with httpd's directory walk, runs
  beside them.

Also the gateway's CPU per call (its processes' CPU time over the calls of
the slow and the fast runs) and its memory per call in flight (resident
memory of its child while 1,000 calls wait, less before, over 1,000).

And what a suspension costs a keep-alive client: httpd 2.4 cannot give a
suspended connection back to the event MPM, so a request that slept
closes its connection. `ab -k` against a handler that answers at once
(`/n0`), the same handler without keep-alive, and one that sleeps 0 ms
first (`/s0`: suspended and resumed at once, then closed): requests per
second and the server's CPU per request of each."""

import statistics
import time

from ab import run_ab
from server import Server, mpm_config

BACKEND = r"""
<Location /slow>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache::Async.sleep 100; Apache.rputs 'hello from the backend'"
</Location>
<Location /fast>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'hello from the backend'"
</Location>
"""

GATEWAY = r"""
ListenBacklog 4096
# A gateway's sections are not mapped to the file system, as mod_proxy's
# URLs are not (mrubyDirectoryWalk Off); /gd is /gf with httpd's walk.
<Location /gw>
    mrubyDirectoryWalk Off
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs Apache::HTTP.get('http://127.0.0.1:{backend}/slow').body"
</Location>
<Location /gf>
    mrubyDirectoryWalk Off
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs Apache::HTTP.get('http://127.0.0.1:{backend}/fast').body"
</Location>
<Location /gd>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs Apache::HTTP.get('http://127.0.0.1:{backend}/fast').body"
</Location>
ProxyPass /px http://127.0.0.1:{backend}/fast
<Location /n0>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'hello'"
</Location>
<Location /s0>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache::Async.sleep 0; Apache.rputs 'hello'"
</Location>
"""

THREADS = 25


def private_kb(srv):
    return sum(p for _, p in srv.memory())


def run(args, module_paths, tmp, log, rounds=3, requests=20000, concurrency=50):
    if "mruby" not in module_paths:
        return {"error": "no mod_mruby"}
    be_conf = mpm_config("event", 200, 50)
    be_conf["AsyncRequestWorkerFactor"] = 40
    backend = Server(args.httpd, args.modules_dir, "event", "gateway-backend",
                     [("mruby", module_paths["mruby"])], BACKEND, {}, be_conf, tmp=tmp)
    gw_conf = mpm_config("event", THREADS, THREADS)
    gw_conf["AsyncRequestWorkerFactor"] = 40  # 1,000 suspended requests on 25 threads
    out = {"threads": THREADS}
    gateway = None
    try:
        backend.start()
        gateway = Server(args.httpd, args.modules_dir, "event", "gateway",
                         [("mruby", module_paths["mruby"]),
                          ("proxy", args.modules_dir + "/mod_proxy.so"),
                          ("proxy_http", args.modules_dir + "/mod_proxy_http.so")],
                         GATEWAY.replace("{backend}", str(backend.port)), {}, gw_conf, tmp=tmp)
        gateway.start()
        # slow backend, 1,000 at once
        run_ab(gateway.url + "/gw", 200, 200, False)  # every thread's VM and pool made
        before = private_kb(gateway)
        slow = []
        for _ in range(rounds):
            t = time.time()
            c0 = gateway.cpu_seconds()
            r = run_ab(gateway.url + "/gw", 1000, 1000, False)
            c1 = gateway.cpu_seconds()
            slow.append({"seconds": r.time_taken or (time.time() - t), "complete": r.complete,
                         "real_failures": r.real_failures, "doc_length": r.doc_length,
                         "cpu_us_per_call": (c1 - c0) / max(r.complete, 1) * 1e6})
        during = []
        # memory while 1,000 calls are in flight: sampled during one more run
        import threading
        done = threading.Event()

        def sample():
            while not done.is_set():
                during.append(private_kb(gateway))
                time.sleep(0.02)
        th = threading.Thread(target=sample)
        th.start()
        run_ab(gateway.url + "/gw", 1000, 1000, False)
        done.set()
        th.join()
        out["slow"] = slow
        out["slow_seconds_median"] = statistics.median(s["seconds"] for s in slow)
        out["slow_cpu_us_per_call"] = statistics.median(s["cpu_us_per_call"] for s in slow)
        out["kb_per_call_in_flight"] = (max(during) - before) / 1000.0 if during else None
        # fast backend, keep-alive, side by side
        def side_by_side(loads):
            """Each (name, path, keep-alive) load once per round, in turn:
            the medians of their rps and of the gateway's CPU per request."""
            rps = {name: [] for name, _, _ in loads}
            cpu = {name: [] for name, _, _ in loads}
            for _ in range(rounds):
                for name, path, keep in loads:
                    c0 = gateway.cpu_seconds()
                    r = run_ab(gateway.url + path, requests, concurrency, keep)
                    c1 = gateway.cpu_seconds()
                    rps[name].append(r.rps)
                    cpu[name].append((c1 - c0) / max(r.complete, 1) * 1e6)
            rounds_seen.append({"rps": rps, "cpu_us": cpu})  # each round's, for the record
            return ({k: statistics.median(v) for k, v in rps.items()},
                    {k: statistics.median(v) for k, v in cpu.items()})

        rounds_seen = []
        out["rounds"] = rounds_seen

        out["fast_rps"], out["cpu_us_per_call"] = side_by_side(
            (("gateway", "/gf", True), ("mod_proxy", "/px", True), ("gateway_walked", "/gd", True)))
        out["ratio"] = out["fast_rps"]["gateway"] / out["fast_rps"]["mod_proxy"]
        out["ratio_walked"] = out["fast_rps"]["gateway_walked"] / out["fast_rps"]["mod_proxy"]
        # a suspension's cost to a keep-alive client
        out["resume_rps"], out["resume_cpu_us"] = side_by_side(
            (("n0_keepalive", "/n0", True), ("n0_close", "/n0", False), ("s0_keepalive", "/s0", True)))
        log("== gateway: 1000 clients, 100 ms backend: %.2f s (median), %.1f us CPU per call; fast backend "
            "%.0f rps vs mod_proxy %.0f rps (%.2f x); %.1f us CPU per call (mod_proxy %.1f); walked %.0f rps "
            "(%.2f x) %.1f us; %.1f KB per call in flight; "
            "keep-alive %.0f rps %.1f us, closed %.0f rps %.1f us, suspended %.0f rps %.1f us" % (
                out["slow_seconds_median"], out["slow_cpu_us_per_call"], out["fast_rps"]["gateway"],
                out["fast_rps"]["mod_proxy"], out["ratio"], out["cpu_us_per_call"]["gateway"],
                out["cpu_us_per_call"]["mod_proxy"], out["fast_rps"]["gateway_walked"], out["ratio_walked"],
                out["cpu_us_per_call"]["gateway_walked"], out["kb_per_call_in_flight"] or 0,
                out["resume_rps"]["n0_keepalive"], out["resume_cpu_us"]["n0_keepalive"],
                out["resume_rps"]["n0_close"], out["resume_cpu_us"]["n0_close"],
                out["resume_rps"]["s0_keepalive"], out["resume_cpu_us"]["s0_keepalive"]))
    except Exception as e:  # noqa: BLE001 - reported in the results
        out["error"] = str(e)[:300]
        log("== gateway failed: %s" % e)
    finally:
        for srv in (gateway, backend):
            if srv:
                srv.stop()
                srv.cleanup()
    return out


def table(results):
    g = results.get("gateway")
    if not g:
        return []
    if "error" in g:
        return ["gateway case failed: %s" % g["error"]]
    return [
        "| measure | gateway (mod_mruby) | mod_proxy |", "|---|---:|---:|",
        "| 1000 clients, backend answers after 100 ms, %d threads: seconds (median) | %.2f | |" % (
            g["threads"], g["slow_seconds_median"]),
        "| ... complete / real failures (worst round) | %d / %d | |" % (
            min(s["complete"] for s in g["slow"]), max(s["real_failures"] for s in g["slow"])),
        "| ... server CPU per call (µs) | %.1f | |" % g.get("slow_cpu_us_per_call", float("nan")),
        "| backend answers at once, `ab -k -c 50`: rps (median) | %.0f | %.0f |" % (
            g["fast_rps"]["gateway"], g["fast_rps"]["mod_proxy"]),
        "| ... ratio to mod_proxy | %.2f | 1 |" % g["ratio"],
        "| ... server CPU per call (µs) | %.1f | %.1f |" % (
            g["cpu_us_per_call"]["gateway"], g["cpu_us_per_call"]["mod_proxy"]),
    ] + ([
        "| ... the gateway with httpd's directory walk (`/gd`): rps, ratio, CPU per call (µs) | %.0f, %.2f, %.1f | |" % (
            g["fast_rps"]["gateway_walked"], g["ratio_walked"], g["cpu_us_per_call"]["gateway_walked"]),
    ] if "ratio_walked" in g else []) + [
        "| private memory per call in flight (KB) | %s | |" % (
            "%.1f" % g["kb_per_call_in_flight"] if g["kb_per_call_in_flight"] is not None else "–"),
    ] + ([
        "",
        "| a handler that answers at once (`ab -c 50`) | rps | server CPU per request (µs) |",
        "|---|---:|---:|",
    ] + ["| %s | %.0f | %.1f |" % (label, g["resume_rps"][k], g["resume_cpu_us"][k]) for k, label in (
        ("n0_keepalive", "keep-alive"), ("n0_close", "without keep-alive"),
        ("s0_keepalive", "keep-alive, sleeps 0 ms first (suspended, then closed)"))]
        if "resume_rps" in g else [])
