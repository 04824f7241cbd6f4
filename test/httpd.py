"""A real Apache httpd for one test module: a generated configuration under
a fresh ServerRoot, the system apache2 binary, a loopback port, and the
chosen MPM. Stopping it checks its error log for crashes."""

import http.client
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest

import procs
from loopback import free_port, run_user  # noqa: F401 - run_user: for cache_servers.py
from serverconf import fill, server_config

HTTPD = os.environ.get("MM_HTTPD", "/usr/sbin/apache2")
MODULES_DIR = os.environ.get("MM_MODULES_DIR", "/usr/lib/apache2/modules")
# The harness lives at the top of test/ (the tests in folders below it):
# ROOT is the source tree, TEST_DIR this folder.
TEST_DIR = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TEST_DIR)
MODULE = os.environ.get("MM_MODULE", os.path.join(ROOT, "mod_mruby.so"))
MPMS = ("prefork", "worker", "event")

# A module built with sanitizers (script/check-asan) runs in the system's
# uninstrumented httpd with the sanitizer runtimes preloaded: this names
# them (LD_PRELOAD syntax). Their reports go to files under logs/sanitizer/
# of each server, which check_log reads.
PRELOAD = os.environ.get("MM_HTTPD_PRELOAD", "")
SANITIZER_OPTIONS = {
    # httpd's pools live until exit by design: leak reports would be noise
    "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1:print_stacktrace=1",
    "UBSAN_OPTIONS": "halt_on_error=1:abort_on_error=1:print_stacktrace=1",
}


# script/check-valgrind: each server runs as one process (apache2 -X) under
# valgrind's memcheck, which writes its findings under logs/sanitizer/ too.
VALGRIND = os.environ.get("MM_HTTPD_VALGRIND") == "1"
# What memcheck reports that fails a test: memory used out of bounds or
# after it was freed (uninitialised values in libraries are left to ASan).
VALGRIND_ERRORS = re.compile(r"Invalid (read|write|free)|Mismatched free|Jump to the invalid address|"
                             r"points to unaddressable|Source and destination overlap")


# script/check-gcstress: libmruby collects before every allocation, so a
# run that allocates a million objects takes minutes; tests that only need
# volume make less of it there, and memory is not measured.
GC_STRESS = os.environ.get("MM_GC_STRESS") == "1"
# How long a client waits for an answer by default: a libmruby collecting
# before every allocation, or valgrind, makes a large body's scripts slow.
REQUEST_TIMEOUT = 120 if GC_STRESS or VALGRIND else 30

# Resident memory means little under ASan (freed memory waits in its
# quarantine) or valgrind: tests that bound it skip those bounds there.
measures_memory = pytest.mark.skipif(bool(PRELOAD) or VALGRIND or GC_STRESS,
                                     reason="memory is not measured under sanitizers, valgrind or GC stress")

# Under valgrind a server is one process (apache2 -X), which has no
# graceful restart: tests made of restarts skip there.
restarts = pytest.mark.skipif(VALGRIND, reason="apache2 -X under valgrind does not restart")


def sanitizer_env(env, report_dir):
    """env, plus the sanitizer runtimes (when MM_HTTPD_PRELOAD names them)
    with their reports going to files in report_dir."""
    env = dict(env)
    if PRELOAD:
        env["LD_PRELOAD"] = PRELOAD
        for name, opts in SANITIZER_OPTIONS.items():
            env[name] = "%s:%s:log_path=%s/report" % (opts, env.get(name, ""), report_dir)
    return env


def tool_env(report_dir):
    """The environment for a tool of this tree that starts httpd itself
    (the test kit), made as the suite's own servers get it: the sanitizer
    runtimes, reporting into report_dir (made writable for httpd's
    children), when the suite runs under them."""
    os.makedirs(report_dir, exist_ok=True)
    os.chmod(report_dir, 0o1777)
    return sanitizer_env(os.environ, report_dir)


# Seconds the test kit may wait for an answer (its --timeout).
TOOL_TIMEOUT = "120" if GC_STRESS or VALGRIND else "30"


def sanitizer_reports(report_dir):
    """The sanitizers' report files in report_dir, read."""
    out = []
    for name in sorted(os.listdir(report_dir)):
        with open(os.path.join(report_dir, name), errors="replace") as f:
            text = f.read()
        if not name.startswith("valgrind.") or VALGRIND_ERRORS.search(text):
            out.append("%s:\n%s" % (name, text))
    return out

# Lines that mean a child died or memory was corrupted.
CRASH_PATTERNS = (
    "Segmentation fault",
    "exit signal",
    "AddressSanitizer",
    "LeakSanitizer",
    "runtime error:",
    "pool concurrency check",
    "double free",
    "corrupted",
)

BASE_MODULES = ("authz_core", "mime", "alias", "dir")

MPM_DEFAULTS = {
    "prefork": dict(StartServers=4, MinSpareServers=2, MaxSpareServers=8, ServerLimit=64,
                    MaxRequestWorkers=64),
    "worker": dict(StartServers=2, ServerLimit=8, ThreadLimit=64, ThreadsPerChild=16,
                   MinSpareThreads=8, MaxSpareThreads=64, MaxRequestWorkers=64),
    "event": dict(StartServers=2, ServerLimit=8, ThreadLimit=64, ThreadsPerChild=16,
                  MinSpareThreads=8, MaxSpareThreads=64, MaxRequestWorkers=64),
}

PREFORK_ONLY = {"MinSpareServers", "MaxSpareServers"}
THREADED_ONLY = {"ThreadLimit", "ThreadsPerChild", "MinSpareThreads", "MaxSpareThreads",
                 "AsyncRequestWorkerFactor"}


def mpm_settings(mpm, overrides):
    """The MPM's defaults with overrides applied; overrides may be keyed by
    MPM name, and settings another MPM does not know are left out."""
    conf = dict(MPM_DEFAULTS[mpm])
    overrides = overrides or {}
    if any(k in MPM_DEFAULTS for k in overrides):
        overrides = overrides.get(mpm, {})
    conf.update(overrides)
    drop = THREADED_ONLY if mpm == "prefork" else PREFORK_ONLY
    return {k: v for k, v in conf.items() if k not in drop}


# The smallest server: one worker thread in all, so consecutive requests
# are served by the same thread and VM.
SINGLE_WORKER = {
    "prefork": dict(StartServers=1, MinSpareServers=1, MaxSpareServers=1, ServerLimit=1,
                    MaxRequestWorkers=1),
    "worker": dict(StartServers=1, ServerLimit=1, ThreadsPerChild=1, MinSpareThreads=1,
                   MaxSpareThreads=1, MaxRequestWorkers=1),
    "event": dict(StartServers=1, ServerLimit=1, ThreadsPerChild=1, MinSpareThreads=1,
                  MaxSpareThreads=1, MaxRequestWorkers=1),
}


# One child with four threads, so that requests at once meet in it (prefork
# has one request per process: there two children stand in for the two
# threads).
ONE_CHILD = {
    "prefork": dict(StartServers=2, MinSpareServers=2, MaxSpareServers=2, ServerLimit=2, MaxRequestWorkers=2),
    "worker": dict(StartServers=1, ServerLimit=1, ThreadsPerChild=4, MinSpareThreads=4, MaxSpareThreads=4,
                   MaxRequestWorkers=4),
    "event": dict(StartServers=1, ServerLimit=1, ThreadsPerChild=4, MinSpareThreads=4, MaxSpareThreads=4,
                  MaxRequestWorkers=4),
}


def well_inside_window(period, margin):
    """Scripts that count per minute (hour, day) of the clock: when fewer
    than margin seconds of the current period are left, waits for the next
    one, so that a test's requests all fall in one period."""
    left = period - time.time() % period
    if left < margin:
        time.sleep(left + 0.5)


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers  # http.client.HTTPMessage: case-insensitive
        self.body = body

    @property
    def text(self):
        return self.body.decode("utf-8", "replace")

    def __repr__(self):
        return "<Response %d %r>" % (self.status, self.body[:200])


class Httpd:
    """One httpd instance. `body` is configuration appended to the common
    part; "{root}", "{docroot}" and "{port}" in it are filled in."""

    def __init__(self, name, mpm, body="", mpm_conf=None, modules=(), files=None, log_level="warn"):
        self.name = name
        self.mpm = mpm
        self.body = body
        self.mpm_conf = mpm_settings(mpm, mpm_conf)
        self.modules = tuple(BASE_MODULES) + tuple(m for m in modules if m not in BASE_MODULES)
        self.log_level = log_level
        self.root = tempfile.mkdtemp(prefix="mm-%s-%s-" % (name, mpm),
                                     dir=os.environ.get("MM_TEST_TMP", "/tmp"))
        os.chmod(self.root, 0o755)
        self.docroot = os.path.join(self.root, "htdocs")
        self.port = free_port()
        self.proc = None
        for sub in ("htdocs", "scripts", "run", "logs"):
            os.makedirs(os.path.join(self.root, sub))
            os.chmod(os.path.join(self.root, sub), 0o755)
        # Written by children running as www-data.
        self.sanitizer_dir = os.path.join(self.root, "logs", "sanitizer")
        os.makedirs(self.sanitizer_dir)
        os.chmod(self.sanitizer_dir, 0o777)
        self.env = {}  # more environment for httpd (e.g. MALLOC_ARENA_MAX)
        self.nofile = None  # RLIMIT_NOFILE of httpd and its children (ulimit -n), if set
        # Where scripts may write files (children run as www-data).
        os.makedirs(os.path.join(self.root, "out"))
        os.chmod(os.path.join(self.root, "out"), 0o777)
        for rel, content in (files or {}).items():
            self.write(rel, content)

    # ------------------------------------------------------------- files
    def path(self, rel):
        return os.path.join(self.root, rel)

    def shared_dir(self, rel):
        """Makes a directory under the ServerRoot that httpd's children (another
        user) can write to, as tests that meet or lock there need."""
        full = self.path(rel)
        os.makedirs(full, exist_ok=True)
        os.chmod(full, 0o777)
        return full

    def write(self, rel, content):
        """Writes a file under the ServerRoot, readable by httpd's children."""
        full = self.path(rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        mode = "wb" if isinstance(content, bytes) else "w"
        tmp = full + ".tmp"
        with open(tmp, mode) as f:
            f.write(content)
        os.chmod(tmp, 0o644)
        os.replace(tmp, full)
        return full

    @property
    def conf_path(self):
        return self.path("httpd.conf")

    @property
    def error_log_path(self):
        return self.path("logs/error.log")

    def error_log(self):
        try:
            with open(self.error_log_path, errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def fill(self, text):
        """text with this server's {root}, {docroot} and {port} filled in."""
        return fill(text, self.root, self.port)

    def config(self, body=None):
        """The configuration: the common part (serverconf), with mod_mruby,
        an access log and the suite's timeouts, then body (by default the
        one given at creation) filled in."""
        return server_config(self.root, self.port, self.mpm, MODULES_DIR,
                             modules=self.modules + (("mruby", MODULE),), mpm_conf=self.mpm_conf,
                             body=self.body if body is None else body, log_level=self.log_level,
                             timeout=30, keepalive_timeout=2, access_log=True)

    def write_config(self, body=None):
        with open(self.conf_path, "w") as f:
            f.write(self.config(body))
        os.chmod(self.conf_path, 0o644)

    # ----------------------------------------------------------- control
    def httpd_env(self):
        """httpd's environment: ours, plus the sanitizer runtimes when the
        module needs them."""
        return sanitizer_env(dict(os.environ, **self.env), self.sanitizer_dir)

    def configtest(self, body=None):
        """apache2 -t on the configuration; returns (exit code, output)."""
        self.write_config(body)
        p = subprocess.run([HTTPD, "-f", self.conf_path, "-t"], capture_output=True, text=True,
                           env=self.httpd_env(),
                           timeout=60, start_new_session=True)
        return p.returncode, p.stdout + p.stderr

    def command(self):
        if VALGRIND:
            # --fair-sched: a thread spinning in a script would otherwise
            # keep valgrind's lock from the timeout watchdog for minutes.
            return ["valgrind", "--quiet", "--vgdb=no", "--error-limit=no", "--num-callers=40",
                    "--fair-sched=yes",
                    "--log-file=%s/valgrind.%%p" % self.sanitizer_dir, HTTPD, "-f", self.conf_path, "-X"]
        return [HTTPD, "-f", self.conf_path, "-DFOREGROUND"]

    def start(self, timeout=20):
        if VALGRIND:
            timeout *= 6
        self.write_config()
        self.out = open(self.path("logs/stdout.log"), "w")
        self.proc = subprocess.Popen(self.command(),
                                     stdout=self.out, stderr=subprocess.STDOUT, env=self.httpd_env(),
                                     start_new_session=True, preexec_fn=self._limits)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("httpd exited with %s:\n%s\n%s" % (
                    self.proc.returncode, self._stdout(), self.error_log()))
            # httpd listens from its first configuration pass on, before the
            # second one runs the post_config hooks (PostConfig scripts): it
            # is ready once it says so in the log.
            # (a single process says nothing of the kind: it is ready once
            # mod_mruby has started)
            if ("MRB00001" if VALGRIND else "resuming normal operations") in self.error_log():
                try:
                    with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                        return self
                except OSError:
                    pass
            time.sleep(0.05)
        self.stop(check=False)
        raise RuntimeError("httpd did not start listening:\n" + self.error_log())

    def _limits(self):
        """In the child, before httpd starts: its descriptor limit."""
        if self.nofile:
            resource.setrlimit(resource.RLIMIT_NOFILE, (self.nofile, self.nofile))

    def _stdout(self):
        try:
            with open(self.path("logs/stdout.log"), errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    @property
    def pid(self):
        return self.proc.pid

    def signal(self, sig):
        os.kill(self.proc.pid, sig)

    def graceful(self, wait=True, timeout=20):
        """apachectl -k graceful: SIGUSR1 to the parent; waits for the new
        generation to be announced, then for the old generation's children
        to exit: until they do, an idle one may still accept a connection
        and answer it with the old configuration."""
        before = self.error_log().count("resuming normal operations")
        old_children = procs.children(self.pid)
        self.signal(signal.SIGUSR1)
        if wait:
            deadline = time.time() + timeout
            while time.time() < deadline:
                if self.error_log().count("resuming normal operations") > before:
                    procs.wait_gone(old_children, max(deadline - time.time(), 1))
                    return
                time.sleep(0.05)
            raise RuntimeError("graceful restart did not complete:\n" + self.error_log())

    def stop(self, check=True):
        """Stops httpd with graceful-stop (SIGWINCH), bounded by
        GracefulShutdownTimeout; SIGTERM, then SIGKILL, only if that hangs.
        (A hard SIGTERM stop of Debian's 2.4.71 event MPM with a few threads
        per child crashes children now and then even without mod_mruby;
        graceful-stop does not, so crash checking stays meaningful.)"""
        if self.proc and self.proc.poll() is None:
            # a single process (-X) stops on SIGTERM only, and as gracefully
            stops = ((signal.SIGWINCH, 20), (signal.SIGTERM, 10), (signal.SIGKILL, 10))
            for sig, wait in stops[1:] if VALGRIND else stops:
                self.proc.send_signal(sig)
                try:
                    self.proc.wait(timeout=wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        if getattr(self, "out", None):
            self.out.close()
        if check:
            self.check_log()

    @staticmethod
    def is_crash_line(line):
        return any(p in line for p in CRASH_PATTERNS)

    def check_log(self):
        log = self.error_log() + "\n" + self._stdout()
        bad = [line for line in log.splitlines() if self.is_crash_line(line)]
        bad += sanitizer_reports(self.sanitizer_dir)
        assert not bad, "httpd (%s) crashed:\n%s" % (self.mpm, "\n".join(bad))

    def cleanup(self):
        shutil.rmtree(self.root, ignore_errors=True)

    # ----------------------------------------------------------- requests
    def request(self, method, path, headers=None, body=None, timeout=REQUEST_TIMEOUT, source=None,
                chunked=False):
        """source: the client's address; another 127.x.y.z is another client.
        chunked: body is an iterable of chunks, sent with Transfer-Encoding:
        chunked."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout,
                                          source_address=(source, 0) if source else None)
        try:
            conn.request(method, path, body=body, headers=headers or {}, encode_chunked=chunked)
            resp = conn.getresponse()
            data = resp.read()
            return Response(resp.status, resp.headers, data)
        finally:
            conn.close()

    def raw(self, data, timeout=REQUEST_TIMEOUT):
        """Sends data (bytes: a whole request, as written) and parses the
        response: for repeated headers, hand-made chunking, bad input."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as sock:
            sock.sendall(data)
            resp = http.client.HTTPResponse(sock, method=data.split(b" ", 1)[0].decode())
            resp.begin()
            return Response(resp.status, resp.headers, resp.read())

    def exchange(self, data, timeout=10):
        """Sends data (bytes, one or more requests as written) and returns
        every byte the server sends until it closes the connection."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as sock:
            sock.sendall(data)
            received = b""
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    return received
                received += chunk

    def restart_every(self, seconds, stop):
        """Graceful restarts (SIGUSR1), one every seconds, until the
        monotonic clock is within seconds / 2 of stop; returns how many."""
        n = 0
        while time.monotonic() < stop - seconds / 2:
            time.sleep(seconds)
            self.signal(signal.SIGUSR1)
            n += 1
        return n

    def get(self, path, headers=None, timeout=REQUEST_TIMEOUT, source=None):
        return self.request("GET", path, headers=headers, timeout=timeout, source=source)

    def post_chunked(self, path, body, headers=None, timeout=REQUEST_TIMEOUT):
        """POSTs body with Transfer-Encoding: chunked (no Content-Length):
        body is bytes, sent in 64 KB chunks, or a list of the chunks."""
        if isinstance(body, bytes):
            body = [body[i:i + 65536] for i in range(0, len(body), 65536)]
        return self.request("POST", path, headers=headers, body=iter(body), timeout=timeout,
                            chunked=True)

    def expect(self, path, status, log=None, count=1, method="GET", **kw):
        """Requests path (kw go to request: headers, body, timeout, source)
        and asserts that it answers status; the failure shows the response
        and the end of the error log. With log, a pattern, then waits until
        count lines of the error log match it (the children write it after
        the response; count is of the whole log, as in wait_log). Returns
        the response and the last matching line (None without log)."""
        r = self.request(method, path, **kw)
        assert r.status == status, (r, self.error_log()[-2000:])
        return r, (self.wait_log(log, count=count)[-1] if log is not None else None)

    def ok(self, path, method="GET", **kw):
        """The response to a request of path, which must answer 200 (the end
        of the error log says why when it does not)."""
        return self.expect(path, 200, method=method, **kw)[0]

    def lines(self, path, headers=None):
        """GETs path, which must answer 200, and returns its body's lines."""
        return self.ok(path, headers=headers).text.splitlines()

    def log_lines(self, pattern):
        return [line for line in self.error_log().splitlines() if re.search(pattern, line)]

    def wait_log(self, pattern, timeout=10, count=1):
        """The error log is written by the children asynchronously to the
        response: wait for count lines matching pattern; returns them all."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            lines = self.log_lines(pattern)
            if len(lines) >= count:
                return lines
            time.sleep(0.05)
        raise AssertionError("fewer than %d error log lines match %r:\n%s" % (count, pattern, self.error_log()))


def assert_blocks_keep_their_runs(srv, path, runs=30):
    """path keeps a block of each run that returns that run's query string,
    and answers what all the kept blocks return: each must still see the
    value of its own run, not a later run's."""
    words = ["w%d" % i for i in range(runs)]
    for i, w in enumerate(words):
        r = srv.get("%s?%s" % (path, w))
        assert r.status == 200
        got = r.body.decode().split(",")
        assert got[-1] == w
        assert len(got) == len(set(got))
        assert set(got) <= set(words[:i + 1])


def serving(srv):
    """The body of a fixture: starts srv, yields it, then stops it (its
    error log checked for crashes) and removes its files."""
    srv.start()
    yield srv
    srv.stop()
    srv.cleanup()


# For tests of what no MPM changes (JSON, Regexp, form fields: Ruby and
# parsing alone): one server, on the MPM the valgrind and GC-stress checks
# also run.
ANY_MPM = ("prefork",)


def module_httpd(name, body, files=None, mpms=MPMS, **kw):
    """A module-scoped fixture: one server per MPM (of mpms), shared by all
    the tests of a module; its error log is checked for crashes when it
    stops."""

    @pytest.fixture(scope="module", params=mpms)
    def fixture(request):
        srv = Httpd(name, request.param, body, **kw)
        for rel, content in (files or {}).items():
            srv.write(rel, content)
        yield from serving(srv)

    return fixture


def backend_httpd(name, body, **kw):
    """A module-scoped fixture: one server under the event MPM, a backend
    the tests' servers reach through mod_proxy."""

    @pytest.fixture(scope="module")
    def fixture():
        yield from serving(Httpd(name, "event", body, **kw))

    return fixture
