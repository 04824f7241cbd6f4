"""Instructions per request, counted by valgrind's callgrind in a
single-process httpd (apache2 -X, prefork): a deterministic measure of what
a handler costs, where timings on a shared machine drift by a few
microseconds from run to run. Only ap_process_request is counted (reading
and answering one request, modules' hooks and filters included; not the
connection's accept and read), and two runs of different lengths are
subtracted, so startup and each VM's first request cancel out."""

import os
import shutil
import subprocess
import tempfile

from ab import run_ab
from server import Server

WARMUP = 200


def available():
    return shutil.which("valgrind") is not None


class _Server(Server):
    """An httpd under callgrind. httpd switches to its User only after
    valgrind has opened its output file, which the unprivileged httpd then
    cannot write: so when we are root the whole thing runs as the run user,
    with the ServerRoot given to it."""

    def __init__(self, *a, out_file, user, **kw):
        super().__init__(*a, **kw)
        self.out_file = out_file
        self.user = user
        wrapper = os.path.join(self.root, "callgrind-httpd")
        with open(wrapper, "w") as f:
            f.write("#!/bin/sh\nexec %svalgrind --tool=callgrind --collect-atstart=no "
                    "--toggle-collect=ap_process_request --callgrind-out-file=%s %s -X \"$@\"\n" % (
                        "runuser -u %s -- " % user if user else "", out_file, self.httpd))
        os.chmod(wrapper, 0o755)
        self.httpd = wrapper
        if user:
            for dirpath, dirnames, filenames in os.walk(self.root):
                for name in dirnames + filenames + ["."]:
                    shutil.chown(os.path.join(dirpath, name), user)

    def config(self):
        # Not root: no User/Group lines (they would make httpd fail).
        return "\n".join(line for line in super().config().splitlines()
                         if not line.startswith(("User ", "Group "))) + "\n"

    def ready(self):
        import socket
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True
        except OSError:
            return False


def _totals(path):
    with open(path) as f:
        for line in f:
            if line.startswith(("totals:", "summary:")):
                return int(line.split()[1])
    raise RuntimeError("no totals in " + path)


def per_request(args, target, modules, conf, tmp, user, short=300, long=1300):
    """Instructions per request of target (steady state)."""
    counts = []
    outdir = tempfile.mkdtemp(prefix="mm-bench-callgrind-", dir=tmp)
    os.chmod(outdir, 0o777)
    try:
        for n in (short, long):
            out_file = os.path.join(outdir, "callgrind.%d.out" % n)
            srv = _Server(args.httpd, args.modules_dir, "prefork", target.name, modules, conf, target.files,
                          {}, tmp=tmp, out_file=out_file, user=user)
            try:
                srv.start(timeout=180)
                run_ab(srv.url + target.path, WARMUP, 1, True)
                res = run_ab(srv.url + target.path, n, 1, True)
                if res.complete != n or res.real_failures:
                    raise RuntimeError("%s: %d of %d requests answered under callgrind" % (
                        target.name, res.complete, n))
            finally:
                srv.stop()
                srv.cleanup()
            counts.append(_totals(out_file))
    finally:
        shutil.rmtree(outdir, ignore_errors=True)
    return (counts[1] - counts[0]) / (long - short)


def run_user():
    from server import run_user as user_of
    u = user_of()
    return u[0] if u else None


def measure(args, targets, module_paths, tmp, log):
    out = {}
    user = run_user()
    for t in targets:
        try:
            n = per_request(args, t, [(m, module_paths[m]) for m in t.modules],
                            t.conf.replace("{threads}", "1"), tmp, user)
            out[t.name] = round(n)
            log("== instructions %-16s %8.0f per request" % (t.name, n))
        except Exception as e:  # noqa: BLE001 - reported, not fatal
            out[t.name] = None
            log("== instructions %s failed: %s" % (t.name, str(e)[-300:]))
    return out
