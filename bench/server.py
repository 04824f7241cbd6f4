"""One benchmarked httpd: the system apache2 with a generated configuration
under a fresh ServerRoot, listening on 127.0.0.1, optionally pinned to a
set of CPUs, and the /proc readings (CPU time, memory) of its processes."""

import os
import resource
import shutil
import signal
import socket
import subprocess
import tempfile
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test"))
from loopback import free_port, run_user  # noqa: E402,F401 - run_user: for instructions.py
from serverconf import server_config  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")

# Enough descriptors for `ab -c 1000` on both sides: the soft limit is
# raised to this (or to the hard limit) for httpd and ab.
NOFILE = 65536


def raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = NOFILE if hard == resource.RLIM_INFINITY else min(NOFILE, hard)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def mpm_config(mpm, workers, threads_per_child):
    """A fixed pool of `workers` request workers, all started at once and
    never reaped, so no process or thread churn happens during a run and
    the synchronous MPMs have a worker for every concurrent connection."""
    if mpm == "prefork":
        return {
            "StartServers": workers, "MinSpareServers": workers, "MaxSpareServers": workers + 1,
            "ServerLimit": workers, "MaxRequestWorkers": workers,
        }
    children = max(1, -(-workers // threads_per_child))
    return {
        "StartServers": children, "ServerLimit": children, "ThreadLimit": threads_per_child,
        "ThreadsPerChild": threads_per_child, "MinSpareThreads": threads_per_child,
        "MaxSpareThreads": children * threads_per_child,
        "MaxRequestWorkers": children * threads_per_child,
    }


def process_cpu_seconds(pid):
    total = 0.0
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return 0.0
    for tid in tids:
        try:
            with open("/proc/%d/task/%s/sched" % (pid, tid)) as f:
                for line in f:
                    if line.startswith("se.sum_exec_runtime"):
                        total += float(line.split(":")[1]) / 1000.0
                        break
        except OSError:
            return stat_cpu_seconds(pid)
    return total


def stat_cpu_seconds(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    # After the ")", state is field 3 of proc(5), so utime (14) is index 11
    # here and stime (15) index 12.
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


class Server:
    """An httpd for one benchmark target on one MPM. `conf` is the target's
    configuration (with {root} and {docroot} filled in here), `modules`
    the LoadModule lines it needs besides the MPM and the base modules."""

    BASE_MODULES = ("authz_core", "mime", "dir")

    def __init__(self, httpd, modules_dir, mpm, name, modules, conf, files, mpm_conf,
                 cpus=None, tmp=None, log_level="warn"):
        self.httpd = httpd
        self.modules_dir = modules_dir
        self.mpm = mpm
        self.name = name
        self.modules = modules
        self.conf = conf
        self.mpm_conf = mpm_conf
        self.cpus = cpus
        self.log_level = log_level
        # The same length for every target and MPM: httpd walks the
        # document root's path on every request (translate_name, the
        # directory walk), and a root named after the target cost the
        # targets with longer names up to 300 instructions per request.
        self.root = tempfile.mkdtemp(prefix="mm-bench-", dir=tmp)
        os.chmod(self.root, 0o755)
        self.docroot = os.path.join(self.root, "htdocs")
        for sub in ("htdocs", "run", "logs"):
            os.makedirs(os.path.join(self.root, sub), mode=0o755)
        for rel, content in files.items():
            self.write(rel, content)
        self.port = free_port()
        self.proc = None

    def write(self, rel, content):
        path = os.path.join(self.root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb" if isinstance(content, bytes) else "w") as f:
            f.write(content)
        os.chmod(path, 0o644)

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    @property
    def error_log_path(self):
        return os.path.join(self.root, "logs", "error.log")

    def error_log(self):
        try:
            with open(self.error_log_path, errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def config(self):
        """The configuration: the common part (test/serverconf.py), with the
        bench's timeouts and no access log (it would cost every target the
        same and blur the differences the bench is about), then the
        target's."""
        return server_config(self.root, self.port, self.mpm, self.modules_dir,
                             modules=self.BASE_MODULES + tuple(self.modules), mpm_conf=self.mpm_conf,
                             body=self.conf, log_level=self.log_level, timeout=60, keepalive_timeout=5)

    def start(self, timeout=60):
        conf = os.path.join(self.root, "httpd.conf")
        with open(conf, "w") as f:
            f.write(self.config())
        cmd = [self.httpd, "-f", conf, "-DFOREGROUND"]
        if self.cpus:
            cmd = ["taskset", "-c", self.cpus] + cmd
        self.out = open(os.path.join(self.root, "logs", "stdout.log"), "w")
        self.proc = subprocess.Popen(cmd, stdout=self.out, stderr=subprocess.STDOUT,
                                     start_new_session=True, preexec_fn=raise_nofile)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("httpd (%s, %s) exited with %s:\n%s" % (
                    self.mpm, self.name, self.proc.returncode, self.startup_output()))
            if self.ready():
                return self
            time.sleep(0.1)
        self.stop()
        raise RuntimeError("httpd (%s, %s) did not start:\n%s" % (
            self.mpm, self.name, self.startup_output()))

    def startup_output(self):
        try:
            with open(os.path.join(self.root, "logs", "stdout.log"), errors="replace") as f:
                out = f.read()
        except FileNotFoundError:
            out = ""
        return (out + self.error_log())[-4000:]

    def ready(self):
        """Listening, and every configured child has started (prefork's
        children are started one spawn cycle at a time)."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                pass
        except OSError:
            return False
        want = self.mpm_conf.get("StartServers", 1)
        return len(self.children()) >= want

    def stop(self):
        """graceful-stop, then harder signals only if that hangs."""
        if self.proc and self.proc.poll() is None:
            for sig, wait in ((signal.SIGWINCH, 15), (signal.SIGTERM, 10), (signal.SIGKILL, 10)):
                try:
                    self.proc.send_signal(sig)
                    self.proc.wait(timeout=wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        if getattr(self, "out", None):
            self.out.close()
            self.out = None

    def cleanup(self):
        shutil.rmtree(self.root, ignore_errors=True)

    # ------------------------------------------------------------ /proc
    def parent_pid(self):
        """taskset execs httpd, so the Popen pid is httpd's parent process."""
        return self.proc.pid

    def children(self):
        parent = self.parent_pid()
        kids = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open("/proc/%s/stat" % pid) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == parent:
                kids.append(int(pid))
        return kids

    def cpu_seconds(self):
        """CPU time used so far by the parent and its live children, in
        seconds: every thread's se.sum_exec_runtime from /proc/PID/task/TID/
        sched (nanosecond precision: the exact utime+stime before /proc/PID/
        stat rounds it to 10 ms per process, which would lose most of a
        request's few microseconds among 200 prefork children), or that
        rounded utime+stime where the kernel has no sched file. The pool is
        fixed (see mpm_config), so no child's time is lost by exiting."""
        total = 0.0
        for pid in [self.parent_pid()] + self.children():
            total += process_cpu_seconds(pid)
        return total

    @staticmethod
    def _rollup(pid):
        """(RSS, private memory) of a process in KiB, from smaps_rollup, or
        None if it is gone."""
        rss = private = 0
        try:
            with open("/proc/%d/smaps_rollup" % pid) as f:
                for line in f:
                    key, _, rest = line.partition(":")
                    if key == "Rss":
                        rss = int(rest.split()[0])
                    elif key in ("Private_Clean", "Private_Dirty"):
                        private += int(rest.split()[0])
        except OSError:
            return None
        return rss, private

    def memory(self):
        """Per child: (RSS, private memory) in KiB. Private memory (pages no
        other process maps) is what a child's own VMs, interpreters and
        pools cost; RSS also counts shared pages."""
        return [m for m in map(self._rollup, self.children()) if m is not None]

    def parent_rss(self):
        """The parent's RSS in KiB: what it made before forking (a prefork
        child's VM, in mod_mruby) counts here once, shared by the children,
        and not in their private memory."""
        m = self._rollup(self.parent_pid())
        return m[0] if m else 0

    def threads_per_child(self):
        return self.mpm_conf.get("ThreadsPerChild", 1)
