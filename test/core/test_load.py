"""Load and restarts: a thousand clients at once without keep-alive,
graceful restarts and graceful stops while requests keep coming, and
many threads meeting .mrb files that change under them. Nothing may fail,
no generation may leave memory, descriptors or processes behind, and every
response must be one the configuration or a file said at some point.
All traffic goes to 127.0.0.1, and every run is bounded in count and time."""

import concurrent.futures
import http.client
import os
import random
import re
import signal
import threading
import time

import procs
from httpd import GC_STRESS, PRELOAD, VALGRIND

# Sized for 1000 clients at once: the workers of each MPM, and a listen
# queue (ListenBacklog, capped by the kernel's net.core.somaxconn) that
# holds every connection not yet accepted instead of refusing it.
LOAD_MPM = {
    "prefork": dict(StartServers=16, MinSpareServers=8, MaxSpareServers=32, ServerLimit=64,
                    MaxRequestWorkers=64),
    "worker": dict(StartServers=2, ServerLimit=4, ThreadLimit=64, ThreadsPerChild=32,
                   MinSpareThreads=32, MaxSpareThreads=128, MaxRequestWorkers=128),
    "event": dict(StartServers=2, ServerLimit=4, ThreadLimit=64, ThreadsPerChild=32,
                  MinSpareThreads=32, MaxSpareThreads=128, MaxRequestWorkers=128),
}

VERSIONED = r"""
ListenBacklog 1024
AddHandler mruby-script .mrb
<Location /version>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'config %(version)s'"
</Location>
<Location /slow>
    SetHandler mruby-native-script
    mrubyHandlerCode "File.open('{root}/out/slow-' + Apache::Request.new.args, 'w') { }; Apache.rputs 'start '; Apache::Async.sleep 1000; Apache.rputs 'end'"
</Location>
"""


def load_server(make_httpd, name, mpm, version="v1"):
    srv = make_httpd(name, mpm, VERSIONED % {"version": version}, mpm_conf=LOAD_MPM[mpm])
    srv.write("htdocs/file.mrb", 'Apache.rputs "file"\n')
    return srv.start()


def url(srv, path):
    return "http://127.0.0.1:%d%s" % (srv.port, path)


def watch_fds(srv, stop, peak):
    """Keeps the highest count of open descriptors seen in one child."""
    while not stop.is_set():
        for pid in procs.children(srv.pid):
            peak[0] = max(peak[0], procs.open_fds(pid))
        time.sleep(0.1)


def test_a_thousand_clients_at_once(make_httpd, mpm):
    srv = load_server(make_httpd, "thousand", mpm)
    stop, peak = threading.Event(), [0]
    watcher = threading.Thread(target=watch_fds, args=(srv, stop, peak))
    watcher.start()
    try:
        got = procs.ab(url(srv, "/version"), 10000, 1000, time_limit=120)
    finally:
        stop.set()
        watcher.join()
    assert (got["complete"], got["failed"], got["non2xx"]) == (10000, 0, 0), got["output"]
    # A child never comes near the usual limit of 1024 descriptors: the
    # connections wait in the listen queue, not in the children. The event
    # MPM's children accept ahead of their threads, and what bounds a
    # child's accepting does not count its connections in lingering close
    # (httpd's event.c, connections_above_limit), which pile up while the
    # child is slow: one was seen at 534 on a busy machine, and at 847
    # under ASan with another test running beside it. For event the bound
    # is the limit itself.
    assert peak[0] < (1024 if mpm == "event" else 768), peak[0]
    assert srv.get("/file.mrb").body == b"file"


def run_load(srv, path, seconds, results, concurrency=16):
    results.append(procs.ab(url(srv, path), 10_000_000, concurrency, time_limit=seconds))


def wait_for_body(srv, path, body, timeout=10):
    """After a restart, old children may answer a last request or two."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        r = srv.get(path)
        if r.body == body:
            return
        time.sleep(0.05)
    raise AssertionError("%s never answered %r" % (path, body))


def generation(srv):
    """The children's pids, and the parent's memory and descriptors."""
    return set(procs.children(srv.pid)), procs.rss_kb(srv.pid), procs.open_fds(srv.pid)


def test_graceful_restarts_under_load(make_httpd, mpm):
    srv = load_server(make_httpd, "graceful", mpm)
    srv.get("/file.mrb")
    idle_fds = max(procs.open_fds(k) for k in procs.children(srv.pid))
    results = []
    load = threading.Thread(target=run_load, args=(srv, "/file.mrb", 12, results))
    load.start()
    try:
        time.sleep(1)
        first_kids, parent_rss, parent_fds = generation(srv)
        after = []
        for version in range(2, 7):
            srv.body = VERSIONED % {"version": "v%d" % version}  # the inline code is edited
            srv.write_config()
            srv.graceful()  # returns once the old generation's children are gone
            wait_for_body(srv, "/version", b"config v%d" % version)
            after.append(generation(srv))
    finally:
        load.join()
    got = results[0]
    assert got["complete"] > 1000 and got["failed"] == 0 and got["non2xx"] == 0, got["output"]
    # every generation replaced the one before, and left nothing behind in
    # the parent: descriptors exactly, memory within what a configuration
    # pass may keep in its allocator
    assert not (first_kids & after[-1][0])
    assert [fds for _, _, fds in after] == [parent_fds] * len(after)
    if not (PRELOAD or VALGRIND):  # ASan's quarantine keeps freed memory
        assert after[-1][1] - after[0][1] < 1024, (parent_rss, [rss for _, rss, _ in after])
    assert srv.get("/version").body == b"config v6"
    # nor did a child inherit a descriptor from an older generation
    deadline = time.time() + 10
    while max(procs.open_fds(k) for k in procs.children(srv.pid)) > idle_fds and time.time() < deadline:
        time.sleep(0.1)
    assert max(procs.open_fds(k) for k in procs.children(srv.pid)) <= idle_fds


def test_graceful_stop_finishes_what_it_started(make_httpd, mpm):
    srv = load_server(make_httpd, "graceful-stop", mpm)
    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        slow = [pool.submit(srv.get, "/slow?%d" % i) for i in range(12)]
        # every request begun (a connection still in the listen queue is
        # closed by the stop): waited for, where a fixed 0.4 s left a just
        # started server's children about 0.25 s to start
        deadline = time.time() + 30
        while len([n for n in os.listdir(srv.path("out")) if n.startswith("slow-")]) < 12:
            assert time.time() < deadline, os.listdir(srv.path("out"))
            time.sleep(0.02)
        srv.signal(signal.SIGWINCH)
        results = [f.result() for f in slow]
    assert [(r.status, r.body) for r in results] == [(200, b"start end")] * 12
    srv.proc.wait(timeout=20)
    assert srv.proc.returncode == 0
    assert "caught SIGWINCH, shutting down gracefully" in srv.error_log()


# Many worker threads, many .mrb files, and the files replaced (as editors
# and deployments do: a new file renamed over the old one) while requests
# run: every answer must be a version that some file had.
FILES = 40
CLIENTS = 24


def script(i, version):
    # some code to compile, and a body that names the file and version
    return ("parts = %d.times.map { |n| n * %d }\n"
            "Apache.rputs \"f%d v%d \" + parts.size.to_s\n" % (version % 7 + 3, i, i, version))


def expected(i, version):
    return b"f%d v%d %d" % (i, version, version % 7 + 3)


def test_many_threads_and_files_edited_under_load(make_httpd):
    srv = make_httpd("edits", "event", "AddHandler mruby-script .mrb\n",
                     mpm_conf=dict(StartServers=2, ServerLimit=2, ThreadLimit=64, ThreadsPerChild=64,
                                   MinSpareThreads=64, MaxSpareThreads=128, MaxRequestWorkers=128))
    written = {i: {expected(i, 0)} for i in range(FILES)}
    latest = {i: 0 for i in range(FILES)}
    for i in range(FILES):
        srv.write("htdocs/f%d.mrb" % i, script(i, 0))
    srv.start()
    stop = threading.Event()
    bad, counts = [], []

    def client(seed):
        rnd = random.Random(seed)
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
        n = 0
        while not stop.is_set():
            i = rnd.randrange(FILES)
            try:
                conn.request("GET", "/f%d.mrb" % i)
                resp = conn.getresponse()
                body = resp.read()
            except (http.client.HTTPException, OSError) as e:
                bad.append("f%d: %r" % (i, e))
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
                continue
            # a version is recorded before its file is written
            if resp.status != 200 or not re.fullmatch(rb"f%d v\d+ \d+" % i, body):
                bad.append("f%d: %d %r" % (i, resp.status, body))
            elif body not in written[i]:
                bad.append("f%d: never written: %r" % (i, body))
            n += 1
        conn.close()
        counts.append(n)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(CLIENTS)]
    for t in threads:
        t.start()
    rnd = random.Random(7)
    deadline = time.time() + 8
    try:
        while time.time() < deadline:
            i = rnd.randrange(FILES)
            version = latest[i] + 1
            written[i].add(expected(i, version))  # before it can be served
            srv.write("htdocs/f%d.mrb" % i, script(i, version))
            latest[i] = version
            time.sleep(0.005)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not bad, bad[:20]
    # (a libmruby that collects before every allocation serves far fewer)
    assert sum(counts) > (100 if GC_STRESS else 1000)
    # once the edits stop, every thread serves every file's last version
    for i in range(FILES):
        for _ in range(4):
            assert srv.get("/f%d.mrb" % i).body == expected(i, latest[i])
