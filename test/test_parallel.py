"""Two CPU-bound requests served by one child process run in parallel:
there is no global lock around Ruby."""

import concurrent.futures
import os
import time

import pytest

from httpd import Httpd

BODY = r"""
<Location /spin>
    SetHandler mruby-native-script
    mrubyHandlerCode "n = 0; i = 0; while i < 3_000_000; n += i % 7; i += 1; end; Apache.rputs n.to_s"
</Location>
"""


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs two CPUs")
def test_two_cpu_bound_requests_in_one_child_run_in_parallel():
    srv = Httpd("parallel", "event", BODY,
                mpm_conf=dict(StartServers=1, ServerLimit=1, ThreadsPerChild=4, MinSpareThreads=4,
                              MaxSpareThreads=4, MaxRequestWorkers=4))
    srv.start()
    try:
        expected = str(sum(i % 7 for i in range(3_000_000))).encode()

        def spin(_):
            t = time.monotonic()
            r = srv.get("/spin", timeout=120)
            assert (r.status, r.body) == (200, expected)
            return time.monotonic() - t

        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            list(pool.map(spin, range(8)))  # every thread has its VM now
            ratios = []
            for _ in range(3):
                one = min(spin(0) for _ in range(2))
                start = time.monotonic()
                list(pool.map(spin, range(2)))
                two = time.monotonic() - start
                ratios.append(two / one)
        # Serialized execution would take twice as long as one request.
        assert min(ratios) < 1.5, ratios
    finally:
        srv.stop()
        srv.cleanup()
