"""Runs ApacheBench (Debian's apache2-utils `ab`) once and reads its report:
throughput, failures by kind, and whether it completed at all."""

import re
import subprocess

from server import raise_nofile

AB = "ab"


class AbResult:
    def __init__(self, requests, concurrency, keepalive, output, returncode, elapsed=None):
        self.requests = requests
        self.concurrency = concurrency
        self.keepalive = keepalive
        self.output = output
        self.returncode = returncode
        self.rps = self._float(r"Requests per second:\s+([\d.]+)")
        self.complete = self._int(r"Complete requests:\s+(\d+)")
        self.failed = self._int(r"Failed requests:\s+(\d+)")
        m = re.search(r"\(Connect: (\d+), Receive: (\d+), Length: (\d+), Exceptions: (\d+)\)", output)
        self.connect, self.receive, self.length, self.exceptions = (
            tuple(int(x) for x in m.groups()) if m else (0, 0, 0, 0))
        self.non2xx = self._int(r"Non-2xx responses:\s+(\d+)")
        self.doc_length = self._int(r"Document Length:\s+(\d+) bytes")
        self.keepalive_requests = self._int(r"Keep-Alive requests:\s+(\d+)")
        self.time_taken = self._float(r"Time taken for tests:\s+([\d.]+)")
        self.elapsed = elapsed

    def _int(self, pattern):
        m = re.search(pattern, self.output)
        return int(m.group(1)) if m else 0

    def _float(self, pattern):
        m = re.search(pattern, self.output)
        return float(m.group(1)) if m else 0.0

    @property
    def aborted(self):
        """ab gave up before the end (it exits non-zero, e.g. on too many
        errors or a timeout), so the requests it did not make failed too."""
        return self.returncode != 0 or self.complete < self.requests

    @property
    def real_failures(self):
        """Requests that really failed: connections refused or reset,
        receive errors, exceptions, non-2xx answers and requests never made.
        ab's "Length" failures are not counted here: every target answers a
        body of one fixed length, and ab counts a Length failure when a
        kept-alive connection is closed by the server while a response is
        being read (or reports a length different from the first response it
        saw), which is a client-side artefact of -k, reported apart. Without
        keep-alive a Length failure is a real short response and counts."""
        missing = max(0, self.requests - self.complete) if self.aborted else 0
        real = self.connect + self.receive + self.exceptions + self.non2xx + missing
        if not self.keepalive:
            real += self.length
        return real

    @property
    def length_artefacts(self):
        return self.length if self.keepalive else 0

    def summary(self):
        return {
            "requests": self.requests, "concurrency": self.concurrency, "keepalive": self.keepalive,
            "rps": self.rps, "complete": self.complete, "failed": self.failed,
            "connect": self.connect, "receive": self.receive, "length": self.length,
            "exceptions": self.exceptions, "non2xx": self.non2xx, "aborted": self.aborted,
            "real_failures": self.real_failures, "doc_length": self.doc_length,
            "time_taken": self.time_taken,
        }


def run_ab(url, requests, concurrency, keepalive, cpus=None, timeout_s=60):
    """ab against url; -r keeps it going on receive errors so that they are
    counted rather than ending the run. Bounded by a wall-clock limit so a
    wedged server cannot hang the bench."""
    cmd = [AB, "-q", "-r", "-s", str(timeout_s), "-n", str(requests), "-c", str(concurrency)]
    if keepalive:
        cmd.append("-k")
    cmd.append(url)
    if cpus:
        cmd = ["taskset", "-c", cpus] + cmd
    limit = 120 + requests / 500
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=limit,
                           preexec_fn=raise_nofile)
        out, rc = p.stdout + p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        out += "\nbench: ab did not finish within %d s\n" % limit
        rc = -1
    return AbResult(requests, concurrency, keepalive, out, rc)
