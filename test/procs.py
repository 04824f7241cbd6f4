"""What an httpd's processes hold, read from /proc: its children, their
resident memory and their open file descriptors. Used by the load tests
and by tools/soak to tell a leak from a steady state."""

import os
import re
import resource
import subprocess
import time


def children(parent_pid):
    """The pids of parent_pid's child processes (httpd's workers)."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name) as f:
                stat = f.read()
        except OSError:
            continue
        # the command name may hold spaces and parentheses: fields follow the last ')'
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == parent_pid and fields[0] != "Z":
            out.append(int(name))
    return sorted(out)


def wait_gone(pids, timeout=15):
    """Waits until none of pids runs any more (gone or a zombie); raises
    AssertionError naming those left after timeout seconds."""
    deadline = time.time() + timeout
    while True:
        left = {p for p in pids if rss_kb(p)}
        if not left:
            return
        if time.time() >= deadline:
            raise AssertionError("old children still running: %s" % sorted(left))
        time.sleep(0.05)


def rss_kb(pid, field="VmRSS"):
    """Resident memory of pid in KB (0 if it is gone); field="VmHWM" for
    its peak."""
    try:
        with open("/proc/%d/status" % pid) as f:
            m = re.search(r"^%s:\s+(\d+) kB" % field, f.read(), re.M)
    except OSError:
        return 0
    return int(m.group(1)) if m else 0


def peak_rss_kb(parent_pid):
    """The highest peak resident memory (VmHWM, KB) among parent_pid's
    children."""
    peaks = [rss_kb(pid, "VmHWM") for pid in children(parent_pid)]
    assert peaks, "no child process found"
    return max(peaks)


def open_fds(pid):
    """Number of open file descriptors of pid (0 if it is gone)."""
    try:
        return len(os.listdir("/proc/%d/fd" % pid))
    except OSError:
        return 0


def connections_to(pids, port):
    """Number of the open descriptors of pids (processes in this network
    namespace) that are TCP connections (IPv4) to port. The kernel's table
    of connections is read once: with many in TIME_WAIT it takes a while."""
    peer = ":%04X" % port
    links = set()
    try:
        with open("/proc/net/tcp") as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                if fields[2].endswith(peer):
                    links.add("socket:[%s]" % fields[9])
    except OSError:
        return 0
    n = 0
    for pid in pids:
        try:
            fds = os.listdir("/proc/%d/fd" % pid)
        except OSError:
            continue
        for fd in fds:
            try:
                n += os.readlink("/proc/%d/fd/%s" % (pid, fd)) in links
            except OSError:
                pass
    return n


def snapshot(parent_pid):
    """{pid: (rss_kb, fds)} for httpd's parent and each child."""
    pids = [parent_pid] + children(parent_pid)
    return {pid: (rss_kb(pid), open_fds(pid)) for pid in pids}


def total_rss_kb(parent_pid):
    """The children's resident memory, added up (the parent runs no requests)."""
    return sum(rss_kb(pid) for pid in children(parent_pid))


def slope(points):
    """Least-squares slope of [(x, y), ...]; 0 for fewer than two points."""
    n = len(points)
    if n < 2:
        return 0.0
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx == 0:
        return 0.0
    return sum((x - mx) * (y - my) for x, y in points) / sxx


def _more_descriptors():
    """ab holds one descriptor per client: as many as the hard limit allows."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 4096 if hard == resource.RLIM_INFINITY else min(hard, 4096)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def ab(url, requests, concurrency, keepalive=False, timeout=30, time_limit=None):
    """Runs ApacheBench against a loopback url and returns its counts:
    complete, failed, non2xx, rps. Variable lengths are accepted (-l): a
    failure is a connection that broke, not a body of another size."""
    assert url.startswith("http://127.0.0.1:"), "load only goes to the loopback address"
    cmd = ["ab", "-q", "-l", "-r", "-s", str(timeout)]
    if time_limit:
        cmd += ["-t", str(time_limit)]  # before -n, which it would reset
    cmd += ["-n", str(requests), "-c", str(concurrency)]
    if keepalive:
        cmd.append("-k")
    cmd.append(url)
    p = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=_more_descriptors,
                       timeout=(time_limit or 0) + max(60, requests / 500))
    out = p.stdout

    def num(label, default=None):
        m = re.search(r"^%s:\s+([\d.]+)" % re.escape(label), out, re.M)
        if m is None:
            if default is None:
                raise RuntimeError("ab gave no %r:\n%s\n%s" % (label, out, p.stderr))
            return default
        return float(m.group(1))

    return {
        "complete": int(num("Complete requests")),
        "failed": int(num("Failed requests")),
        "non2xx": int(num("Non-2xx responses", 0)),
        "rps": num("Requests per second"),
        "output": out + p.stderr,
    }
