"""The two cases that are not a throughput table: CPU parallelism inside one
child (two CPU-bound requests at once versus one), and a flood of 1000
concurrent connections without keep-alive that must not fail."""

import concurrent.futures
import http.client
import re
import statistics
import time

from ab import run_ab

# Error-log lines that tell why requests failed under a flood.
FLOOD_LOG_PATTERNS = {
    "fd exhaustion": r"Too many open files",
    "scoreboard full": r"scoreboard is full",
    "MaxRequestWorkers reached": r"reached MaxRequestWorkers",
    "errors": r"\[[a-z_]+:(error|crit|alert|emerg)\]",
}


def time_wait_sockets():
    """TCP sockets in TIME_WAIT on this machine (/proc/net/sockstat)."""
    with open("/proc/net/sockstat") as f:
        m = re.search(r"^TCP:.* tw (\d+)", f.read(), re.M)
    return int(m.group(1)) if m else 0


def drain_time_wait(most=100, timeout=90):
    """Waits until at most `most` sockets are in TIME_WAIT (or timeout s);
    returns the seconds waited. A flood leaves up to one socket in
    TIME_WAIT per connection, for a minute; each flood starts without
    them."""
    start = time.monotonic()
    while time_wait_sockets() > most and time.monotonic() - start < timeout:
        time.sleep(1)
    return round(time.monotonic() - start, 1)


def flood(srv, requests, concurrency, client_cpus):
    """ab -c concurrency without keep-alive; what failed and why."""
    waited = drain_time_wait()
    before = srv.error_log()
    res = run_ab(srv.url + srv.target.path, requests, concurrency, False, client_cpus)
    log = srv.error_log()[len(before):]
    found = {k: len(re.findall(p, log)) for k, p in FLOOD_LOG_PATTERNS.items()}
    out = dict(res.summary(), log=found, waited_s=waited)
    if found["errors"] > found["MaxRequestWorkers reached"]:
        # "errors" counts httpd's notice (logged at error level) too.
        lines = [l for l in log.splitlines()
                 if re.search(FLOOD_LOG_PATTERNS["errors"], l)
                 and not re.search(FLOOD_LOG_PATTERNS["MaxRequestWorkers reached"], l)]
        out["error_lines"] = lines[:5]
    if res.real_failures:
        # Evidence for whoever looks into it: what ab and httpd said.
        out["ab_tail"] = res.output[-1500:]
        out["log_tail"] = log[-3000:]
    return out


def get(srv, path, timeout=300):
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        body = resp.read()
        if resp.status != 200:
            raise RuntimeError("%s answered %d: %r" % (path, resp.status, body[:200]))
        return body
    finally:
        conn.close()


def timed(srv, path):
    start = time.monotonic()
    get(srv, path)
    return time.monotonic() - start


def calibrate(srv, path, seconds):
    """The loop length that makes one request take about `seconds`."""
    n = 100000
    for _ in range(8):
        t = min(timed(srv, "%s?%d" % (path, n)) for _ in range(2))
        if t > seconds / 4:
            return max(1, int(n * seconds / t))
        n *= 4
    return n


def parallel(srv, rounds, seconds, threads):
    """One child, `threads` worker threads, the server free to use every
    CPU. Each round times one request alone, then two sent at once (until
    both are answered); ratio 1.0 means true parallelism, 2.0 means the two
    ran one after the other."""
    path = srv.target.path
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        # Every worker thread gets its VM (or Lua state) before timing.
        list(pool.map(lambda _: get(srv, path + "?1000"), range(threads * 4)))
        n = calibrate(srv, path, seconds)
        url = "%s?%d" % (path, n)
        ones, twos, ratios = [], [], []
        for _ in range(rounds):
            one = timed(srv, url)
            start = time.monotonic()
            list(pool.map(lambda _: get(srv, url), range(2)))
            two = time.monotonic() - start
            ones.append(one)
            twos.append(two)
            ratios.append(two / one)
    return {
        "loop": n,
        "one_s": statistics.median(ones),
        "two_s": statistics.median(twos),
        "ratio_median": statistics.median(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "rounds": rounds,
    }
