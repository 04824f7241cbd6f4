"""Two Ruby requests served by one child process run at the same time:
there is no global lock around Ruby. Shown without timing: each request
marks its arrival, then spins (never sleeping, never yielding to the other)
until it sees the other's mark. Behind a lock that serializes scripts, the
first would spin alone until its deadline and answer "alone". How fast two
CPU-bound requests run side by side is measured by the bench (`make bench`,
its parallelism case), not here."""

import concurrent.futures
import uuid

import pytest

from httpd import MPMS, ONE_CHILD, VALGRIND, Httpd

BODY = r"""
<Location /meet>
    SetHandler mruby-native-script
    mrubyHandlerCode "me, other = Apache::Request.new.args.split(','); dir = '{root}/meet/'; File.open(dir + me, 'w') { |f| f.write 'here' }; deadline = Time.now + 30; nil until File.exist?(dir + other) || Time.now > deadline; pid = File.open('/proc/self/stat') { |f| f.read }.split(' ')[0]; Apache.rputs [File.exist?(dir + other) ? 'met' : 'alone', pid].join(' ')"
</Location>
"""

@pytest.mark.skipif(VALGRIND, reason="apache2 -X serves one request at a time")
@pytest.mark.parametrize("mpm", MPMS)
def test_two_scripts_of_one_child_run_at_the_same_time(mpm):
    srv = Httpd("parallel", mpm, BODY, mpm_conf=ONE_CHILD[mpm])
    srv.shared_dir("meet")
    srv.start()
    try:
        for _ in range(3):
            a, b = uuid.uuid4().hex, uuid.uuid4().hex
            with concurrent.futures.ThreadPoolExecutor(2) as pool:
                answers = list(pool.map(lambda args: srv.get("/meet?" + args, timeout=120),
                                        ("%s,%s" % (a, b), "%s,%s" % (b, a))))
            assert [r.status for r in answers] == [200, 200]
            words = [r.text.split(" ") for r in answers]
            assert [w[0] for w in words] == ["met", "met"], words
            if mpm != "prefork":
                assert words[0][1] == words[1][1], words  # one process, two threads
        assert "[mruby:error]" not in srv.error_log()
    finally:
        srv.stop()
        srv.cleanup()
