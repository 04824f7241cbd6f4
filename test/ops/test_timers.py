"""Apache::Timer: mrubyTimers scripts set timers that the child's timer
thread calls in a VM of its own: at the right rate, again after an
exception, stopped with the child (graceful restart, stop) and started
again in the new generation; never in a request's VM."""

import os
import re
import time

import pytest

from httpd import SINGLE_WORKER, restarts

# Each tick: "pid wall-clock-time" on a line of out/ticks.
# One write(2) of a whole line (puts writes the newline apart): the
# children append to the same file at once.
TICK = r"File.open('{root}/out/ticks', 'a') { |f| f.write \"#{Process.pid} #{Time.now.to_f}\n\" }"

BODY = r"""
mrubyTimersCode "Apache::Timer.every(0.25) { %s }"
<Location /hello>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs Process.pid.to_s"
</Location>
<Location /set>
    SetHandler mruby-native-script
    mrubyHandlerCode "begin; Apache::Timer.every(1) { }; rescue RuntimeError => e; Apache.rputs e.message; end"
</Location>
""" % TICK


def ticks(srv, name="ticks"):
    """The (pid, time) lines of out/NAME so far."""
    try:
        with open(srv.path("out/" + name)) as f:
            # (a line being written has no newline yet)
            return [(int(p), float(t)) for p, t in (line.split() for line in f if line.endswith("\n"))]
    except FileNotFoundError:
        return []


def start(make_httpd, mpm, body=BODY, **kw):
    return make_httpd("timers", mpm, body, mpm_conf=SINGLE_WORKER, **kw).start()


def wait_lines(srv, done, timeout=20, name="ticks"):
    """The (pid, number) lines of out/NAME once done(lines) holds (within
    timeout s). httpd says it is ready (and its listener takes connections)
    before its child has forked, made its timer VM and run the scripts:
    under ASan on a busy machine that took longer than a fixed sleep
    allowed. Waited for, not slept for."""
    deadline = time.time() + timeout
    while True:
        got = ticks(srv, name)
        if done(got) or time.time() > deadline:
            return got
        time.sleep(0.05)


def wait_ticks(srv, n, timeout=20, name="ticks"):
    """The lines of out/NAME once there are n."""
    return wait_lines(srv, lambda got: len(got) >= n, timeout, name)


def test_every_keeps_its_rate(make_httpd, mpm):
    srv = start(make_httpd, mpm)
    pid = int(srv.ok("/hello").text)
    first = len(wait_ticks(srv, 1))
    time.sleep(5)
    got = ticks(srv)
    assert {p for p, _ in got} == {pid}  # the one child, in its timer thread
    n = len(got) - first
    assert 18 <= n <= 22, got  # 20 in 5 s, within 10 %
    times = [t for _, t in got]
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert abs(sum(gaps) / len(gaps) - 0.25) < 0.025, gaps


def test_after_runs_once_and_a_block_may_set_timers(make_httpd, mpm):
    body = BODY.replace(
        'mrubyTimersCode "Apache::Timer.every(0.25) { %s }"' % TICK,
        'mrubyTimersCode "Apache::Timer.after(0.2) { %s; Apache::Timer.after(0.3) { %s } }"' % (TICK, TICK))
    srv = start(make_httpd, mpm, body)
    assert len(wait_ticks(srv, 2)) == 2
    time.sleep(1)  # no third
    assert len(ticks(srv)) == 2


def test_an_exception_is_logged_and_the_timer_kept(make_httpd, mpm):
    body = BODY.replace("{ %s }" % TICK, r"{ $n = ($n || 0) + 1; raise \"tick #{$n}\" if $n %% 2 == 1; %s }" % TICK)
    srv = start(make_httpd, mpm, body)
    lines = srv.wait_log(r"MRB00031: Timers script timer every 250 ms \(.*httpd\.conf:\d+\) raised RuntimeError "
                         r"at .*httpd\.conf:\d+: tick 3", timeout=5)
    assert lines
    assert len(ticks(srv)) >= 1  # the even ones ran


def test_only_in_timer_scripts(make_httpd, mpm):
    srv = start(make_httpd, mpm)
    assert srv.ok("/set").text == ("Apache::Timer.every can only be used in mrubyTimers scripts and timer "
                                   "blocks, not in a Handler script")


def test_at_most_64_timers(make_httpd, mpm):
    body = BODY.replace("Apache::Timer.every(0.25) { %s }" % TICK,
                        "begin; 65.times { Apache::Timer.every(100) { } }; rescue RuntimeError => e; "
                        "File.open('{root}/out/full', 'w') { |f| f.write e.message }; end")
    srv = start(make_httpd, mpm, body)
    deadline = time.time() + 5
    while not os.path.exists(srv.path("out/full")) and time.time() < deadline:
        time.sleep(0.05)
    with open(srv.path("out/full")) as f:
        assert f.read() == "Apache::Timer.every: a child has at most 64 timers"


@restarts
def test_stopped_by_graceful_restart_and_started_again(make_httpd, mpm):
    srv = start(make_httpd, mpm)
    old = int(srv.ok("/hello").text)
    wait_ticks(srv, 2)
    srv.graceful()  # returns once the old child is gone
    gone = time.time()
    # The new child starts its timers as it starts: waited for, not slept
    # for (under ASan on a busy machine its start took longer than 1.2 s).
    deadline = time.time() + 20
    while sum(1 for p, _ in ticks(srv) if p != old) < 3 and time.time() < deadline:
        time.sleep(0.1)
    new = int(srv.ok("/hello").text)
    got = ticks(srv)
    assert new != old
    assert all(t < gone for p, t in got if p == old)  # nothing after its child exited
    assert any(p == old for p, _ in got) and sum(1 for p, _ in got if p == new) >= 3


def test_never_after_the_child_stops(make_httpd, mpm):
    srv = start(make_httpd, mpm)
    wait_ticks(srv, 2)
    srv.stop()
    stopped = time.time()
    n = len(ticks(srv))
    time.sleep(0.6)
    got = ticks(srv)
    assert n >= 2 and len(got) == n
    assert all(t < stopped for _, t in got)


def test_counted_in_server_status(make_httpd, mpm):
    body = BODY.replace(
        'mrubyTimersCode "Apache::Timer.every(0.25) { %s }"' % TICK,
        'mrubyTimersCode "Apache::Timer.after(0.1) { raise %%q(one) }; Apache::Timer.after(0.2) { %s }; '
        'Apache::Timer.after(0.3) { raise %%q(two) }"' % TICK)
    body = "LoadModule status_module /usr/lib/apache2/modules/mod_status.so\n" + body + (
        "<Location /server-status>\n    SetHandler server-status\n</Location>\n")
    srv = start(make_httpd, mpm, body)
    srv.wait_log(r"MRB00031: Timers script timer after 300 ms .* two", timeout=5)
    auto = srv.ok("/server-status?auto").text
    assert "\nMrubyTimerRuns: 3\n" in auto and "\nMrubyTimerFailures: 2\n" in auto, auto
    assert len(ticks(srv)) == 1


def test_mruby_timeout_stops_a_block(make_httpd, mpm):
    """mrubyTimeout of the main server stops a block that does not end;
    the timer is kept and called again."""
    body = "mrubyTimeout 200\n" + BODY.replace("{ %s }" % TICK, "{ %s; loop { } }" % TICK)
    srv = start(make_httpd, mpm, body)
    srv.wait_log(r"MRB00031: Timers script timer every 250 ms .* raised Apache::Timeout", timeout=5, count=2)
    assert len(ticks(srv)) >= 2
    assert srv.ok("/hello")  # requests are served meanwhile


# Each call: "pid n" on a line of out/count, n counting the calls in the
# VM's globals.
COUNT = r"$n = ($n || 0) + 1; File.open('{root}/out/count', 'a') { |f| f.write \"#{Process.pid} #{$n}\n\" }"
# A block that rescues Apache::Timeout and goes on: stopped hard.
STUBBORN = "loop { begin; loop { }; rescue Exception; end }"
REPLACED = (r"MRB00653: the timers' VM was replaced \(a block rescued Apache::Timeout and was stopped hard, "
            r"its ensure clauses skipped\): the mrubyTimers scripts run again in the new one")


def counts(srv, timeout, until):
    """The n of out/count's lines once until(ns) holds (within timeout s)."""
    def ns(got):
        return [int(n) for _, n in got]

    return ns(wait_lines(srv, lambda got: until(ns(got)), timeout, "count"))


def test_a_hard_stop_replaces_the_timers_vm(make_httpd, mpm):
    """A block stopped hard skipped its ensure clauses: the timer thread's
    VM is replaced, the timers go with it, and the mrubyTimers scripts run
    again in the new VM, which sets them afresh. The runs and failures of
    server-status count on across VMs."""
    body = "mrubyTimeout 200\n" + BODY.replace(
        'mrubyTimersCode "Apache::Timer.every(0.25) { %s }"' % TICK,
        'mrubyTimersCode "Apache::Timer.every(0.2) { %s }; Apache::Timer.after(1) { %s }"' % (COUNT, STUBBORN))
    body = "LoadModule status_module /usr/lib/apache2/modules/mod_status.so\n" + body + (
        "<Location /server-status>\n    SetHandler server-status\n</Location>\n")
    srv = start(make_httpd, mpm, body)
    srv.wait_log(r"MRB00063: Timers script timer after 1000 ms \(.*httpd\.conf:\d+\) rescued Apache::Timeout and "
                 r"went on: stopped, and its VM replaced", timeout=10)
    line = srv.wait_log(REPLACED + r" \(timers of the old one dropped: 1\)", timeout=5)
    assert "[mruby:warn]" in line[0], line
    # the old VM counted 1, 2, 3, 4...; the new one, its globals new,
    # counts from 1 again
    ns = counts(srv, 10, lambda ns: 1 in ns[1:] and len(ns) - ns.index(1, 1) >= 3)
    old = ns.index(1, 1) if 1 in ns[1:] else len(ns)
    assert old >= 3 and ns[:old] == list(range(1, old + 1)), ns
    assert ns[old:old + 3] == [1, 2, 3], ns
    assert {p for p, _ in ticks(srv, "count")} == {int(srv.ok("/hello").text)}  # the one child's timer thread
    # the scripts set the after(1) timer again: it is stopped hard again,
    # and its VM replaced again (one second and a half later)
    srv.wait_log(REPLACED, timeout=10, count=2)
    lines = ticks(srv, "count")
    auto = srv.ok("/server-status?auto").text
    runs = int(re.search(r"\nMrubyTimerRuns: (\d+)\n", auto).group(1))
    failures = int(re.search(r"\nMrubyTimerFailures: (\d+)\n", auto).group(1))
    # each hard stop is a failure; each line of out/count a run (the block
    # that wrote the last may not be counted yet)
    assert failures >= 2 and runs >= len(lines) - 1 + failures, (auto, lines)


def test_no_replacement_once_the_child_stops(make_httpd, mpm):
    """A block stopped hard while its child exits: the thread ends with
    it, its VM is not replaced and the scripts do not run again."""
    # the scripts' runs on lines of out/runs; the block marks its start
    run = r"File.open('{root}/out/runs', 'a') { |f| f.write \"#{Process.pid} 1\n\" }"
    began = r"File.open('{root}/out/began', 'w') { }"
    body = "mrubyTimeout 1000\n" + BODY.replace(
        'mrubyTimersCode "Apache::Timer.every(0.25) { %s }"' % TICK,
        'mrubyTimersCode "%s; Apache::Timer.after(0.3) { %s; %s }"' % (run, began, STUBBORN))
    srv = start(make_httpd, mpm, body)
    deadline = time.time() + 10
    while not os.path.exists(srv.path("out/began")) and time.time() < deadline:
        time.sleep(0.02)
    assert os.path.exists(srv.path("out/began"))
    srv.stop()  # two seconds before the hard stop; the child's exit waits for it
    assert srv.log_lines(r"MRB00063: Timers script timer after 300 ms .* rescued Apache::Timeout")
    assert not srv.log_lines(r"MRB0065[34]")
    assert len(ticks(srv, "runs")) == 1


def test_memory_limit_replaces_the_timers_vm(make_httpd, mpm):
    """mrubyMemoryLimit applies to the timer thread's VM too: one that
    reached it is replaced like one stopped hard."""
    body = "mrubyMemoryLimit 16M\n" + BODY.replace(
        'mrubyTimersCode "Apache::Timer.every(0.25) { %s }"' % TICK,
        'mrubyTimersCode "Apache::Timer.every(0.2) { %s }; '
        'Apache::Timer.after(1) { $a = []; loop { $a << (%%q(x) * 1_000_000) } }"' % COUNT)
    srv = start(make_httpd, mpm, body)
    srv.wait_log(r"MRB00031: Timers script timer after 1000 ms .* raised NoMemoryError", timeout=10)
    srv.wait_log(r"MRB00016: an mruby VM reached mrubyMemoryLimit \(16777216 bytes\): replacing it", timeout=5)
    line = srv.wait_log(r"MRB00653: the timers' VM was replaced \(it reached mrubyMemoryLimit\): the mrubyTimers "
                        r"scripts run again in the new one \(timers of the old one dropped: 1\)", timeout=5)
    assert "[mruby:warn]" in line[0], line
    ns = counts(srv, 10, lambda ns: 1 in ns[1:] and len(ns) - ns.index(1, 1) >= 3)
    old = ns.index(1, 1) if 1 in ns[1:] else len(ns)
    assert old >= 3 and ns[:old] == list(range(1, old + 1)) and ns[old:old + 3] == [1, 2, 3], ns


def test_max_requests_per_vm_replaces_the_timers_vm(make_httpd, mpm):
    """mrubyMaxRequestsPerVM counts the runs of the timer thread's VM too
    (the scripts' and the blocks'): it is replaced as often, logged at
    info, not as a warning."""
    body = "mrubyMaxRequestsPerVM 5\n" + BODY.replace(
        'mrubyTimersCode "Apache::Timer.every(0.25) { %s }"' % TICK,
        'mrubyTimersCode "Apache::Timer.every(0.1) { %s }"' % COUNT)
    srv = start(make_httpd, mpm, body, log_level="info")
    lines = srv.wait_log(r"MRB00653: the timers' VM was replaced \(it ran mrubyMaxRequestsPerVM scripts\): the "
                         r"mrubyTimers scripts run again in the new one \(timers of the old one dropped: 1\)",
                         timeout=10, count=2)
    assert all("[mruby:info]" in line for line in lines), lines
    # each VM: its script's run, then four blocks
    ns = counts(srv, 10, lambda ns: len(ns) >= 8)
    assert ns[:8] == [1, 2, 3, 4, 1, 2, 3, 4], ns


def test_cancel(make_httpd, mpm):
    body = BODY.replace(
        'mrubyTimersCode "Apache::Timer.every(0.25) { %s }"' % TICK,
        'mrubyTimersCode "$id = Apache::Timer.every(0.1) { %s; $n = ($n || 0) + 1; '
        'File.open(%%q({root}/out/cancel), %%q(w)) { |f| f.write Apache::Timer.cancel($id).to_s + '
        'Apache::Timer.cancel($id).to_s } if $n == 3 }"' % TICK)
    srv = start(make_httpd, mpm, body)
    assert len(wait_ticks(srv, 3)) == 3
    time.sleep(0.5)  # no fourth
    assert len(ticks(srv)) == 3
    with open(srv.path("out/cancel")) as f:
        assert f.read() == "truefalse"


# Each child ticks in out/ticks; the singleton timer in out/single.
SINGLE = TICK.replace("out/ticks", "out/single")
SINGLE_BODY = BODY.replace(
    'mrubyTimersCode "Apache::Timer.every(0.25) { %s }"' % TICK,
    'mrubyTimersCode "Apache::Timer.every(0.25) { %s }; Apache::Timer.every(0.2, singleton: true) { %s }"'
    % (TICK, SINGLE))


def singles(srv):
    return ticks(srv, "single")


def test_singleton_runs_in_one_child(make_httpd, mpm):
    srv = make_httpd("timers-single", mpm, SINGLE_BODY).start()
    wait_ticks(srv, 7, name="single")
    children = {p for p, _ in ticks(srv)}
    got = singles(srv)
    assert len(children) >= 2  # every child has its timers
    assert len({p for p, _ in got}) == 1 and len(got) >= 7, got
    assert got[0][0] in children


@restarts
def test_singleton_moves_to_the_new_generation(make_httpd, mpm):
    srv = make_httpd("timers-single", mpm, SINGLE_BODY).start()
    wait_ticks(srv, 2, name="single")
    leader = singles(srv)[-1][0]
    srv.graceful()  # the old children, the leader with them, are gone
    gone = time.time()
    # five ticks of the new generation (1 s; up to 15 on a loaded machine)
    deadline = time.time() + 15
    after = []
    while len(after) < 5 and time.time() < deadline:
        time.sleep(0.2)
        after = [(p, t) for p, t in singles(srv) if t > gone]
    assert len(after) >= 5, after
    assert len({p for p, _ in after}) == 1 and after[0][0] != leader, after
    # one at a time: no two ticks closer than the interval allows
    times = [t for _, t in singles(srv)]
    assert all(b - a > 0.1 for a, b in zip(times, times[1:])), times
