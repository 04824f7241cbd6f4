"""Top-level `return`, and Apache::Async.sleep: it suspends the request and
frees the worker thread on the event MPM, and blocks elsewhere; either way
the output is the same."""

import concurrent.futures
import os
import shutil
import signal
import socket
import time

import pytest

from httpd import SINGLE_WORKER, Httpd, assert_blocks_keep_their_runs, module_httpd

BODY = r"""
AddHandler mruby-script .mrb
<Location /return>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'hoge'; return if true; Apache.rputs 'foo'"
</Location>
<Location /return_in_fixups>
    mrubyFixupsCode "Apache::Request.new.notes['f'] = 'before'; return; Apache::Request.new.notes['f'] = 'after'"
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs Apache::Request.new.notes['f']"
</Location>
<Location /return_through_ensure>
    SetHandler mruby-native-script
    mrubyHandlerCode "begin; Apache.rputs 'a'; return; ensure; Apache.rputs 'e'; end; Apache.rputs 'not reached'"
</Location>
<Location /return_through_ensure_that_sleeps>
    SetHandler mruby-native-script
    mrubyHandlerCode "begin; Apache.rputs 'a'; return; ensure; Apache::Async.sleep 10; Apache.rputs 'e'; end; Apache.rputs 'not reached'"
</Location>
<Location /sleep>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'a'; Apache::Async.sleep 300; Apache.rputs 'b'"
</Location>
<Location /loop>
    SetHandler mruby-native-script
    mrubyHandlerCode "5.times { |s| Apache::Async.sleep 100; Apache.rputs s }"
</Location>
<Location /state>
    SetHandler mruby-native-script
    mrubyHandlerCode "r = Apache::Request.new; t = r.args; words = []; 3.times { |i| words << t + i.to_s; Apache::Async.sleep(10 + rand(40)) }; r.headers_out['X-Token'] = t; Apache.rputs words.join(',')"
</Location>
<Location /two>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'one,'; Apache::Async.sleep 100; Apache.rputs 'two,'"
    mrubyHandlerCode "Apache.rputs 'three,'; Apache::Async.sleep 100; Apache.rputs 'four'"
</Location>
<Location /raise_after>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'x'; Apache::Async.sleep 100; raise ArgumentError, 'raised after the resume'"
</Location>
<Location /fixups_sleep>
    mrubyFixupsCode "Apache::Async.sleep 100; Apache::Request.new.notes['s'] = 'slept in fixups'"
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs Apache::Request.new.notes['s']"
</Location>
<Location /indirect>
    SetHandler mruby-native-script
    mrubyHandlerCode "def nap; Apache::Async.sleep 50; end unless respond_to?(:nap, true); Apache.rputs 'p'; nap; Apache.rputs 'q'"
</Location>
<Location /fast>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'fast'"
</Location>
<Location /sleeper>
    SetHandler mruby-native-script
    mrubyHandlerCode "i = Apache::Request.new.args; dir = '{root}/sleepers/'; Apache.rputs 'start ' + i; File.open(dir + i, 'w') { |f| f.write 'asleep' }; deadline = Time.now + 30; Apache::Async.sleep 50 until File.exist?(dir + 'release') || Time.now > deadline; Apache.rputs(File.exist?(dir + 'release') ? ' end' : ' never released')"
</Location>
"""

FILES = {
    "htdocs/sleep.mrb": "Apache.rputs 'file '\nApache::Async.sleep 100\nApache.rputs 'done'\n",
    "htdocs/yield.mrb": "Fiber.yield 1 if Apache::Async\nApache.rputs 'not reached'\n",
    # Blocks kept from earlier runs read the variables of scripts whose
    # fibers have ended and been collected.
    "htdocs/keep.mrb": """
$kept ||= []
word = Apache::Request.new.args.to_s
Apache::Async.sleep 5
$kept << proc { word }
GC.start
Apache.rputs $kept.map(&:call).join(',')
""",
    # The top level of a script that runs in a fiber is the top level of any
    # script: its self, def and class, rescue and ensure, return.
    "htdocs/toplevel.mrb": """
def twice(x)
  x * 2
end
class Greeter
  def hi
    'hi'
  end
end
Apache::Async.sleep 10
out = [twice(2), Greeter.new.hi, self.to_s]
begin
  Apache::Async.sleep 10
  raise 'inside'
rescue => e
  out << e.message
ensure
  out << 'ensured'
end
[1, 2].each { |i| Apache::Async.sleep 5; out << i.to_s }
Apache.rputs out.join(',')
return if out.size > 1
Apache.rputs 'not reached'
""",
}

server = module_httpd("async", BODY, files=FILES)


def test_top_level_return_ends_the_script(server):
    for _ in range(2):
        r = server.get("/return")
        assert (r.status, r.body) == (200, b"hoge")


@pytest.mark.parametrize("path", ["/return_through_ensure", "/return_through_ensure_that_sleeps"])
def test_top_level_return_through_ensure(server, path):
    # mruby left its marker of the return in the VM's exception slot: the
    # harness took it for an exception, logged as "raised (null)": a 500.
    mark = len(server.error_log())
    for _ in range(2):
        r = server.get(path)
        assert (r.status, r.body) == (200, b"ae")
    assert "MRB00030" not in server.error_log()[mark:]


def test_top_level_return_in_other_phases(server):
    r = server.get("/return_in_fixups")
    assert (r.status, r.body) == (200, b"before")


def test_output_before_and_after_a_sleep_arrives_in_order(server):
    for _ in range(2):
        r = server.get("/sleep")
        assert (r.status, r.body) == (200, b"ab")


def test_sleep_in_a_loop(server):
    r = server.get("/loop")
    assert (r.status, r.body) == (200, b"01234")


def test_a_sleeping_script_has_an_ordinary_top_level(server):
    r = server.get("/toplevel.mrb")
    assert (r.status, r.body) == (200, b"4,hi,main,inside,ensured,1,2")


def test_blocks_outlive_the_fiber_of_their_script(server):
    assert_blocks_keep_their_runs(server, "/keep.mrb")


def test_sleep_in_a_file_script(server):
    r = server.get("/sleep.mrb")
    assert (r.status, r.body) == (200, b"file done")


def test_scripts_after_a_sleeping_one_run_after_it(server):
    r = server.get("/two")
    assert (r.status, r.body) == (200, b"one,two,three,four")


def test_exception_after_resume_is_500_and_logged(server):
    r, _ = server.expect("/raise_after", 500,
                         r"MRB00030: Handler script .* raised ArgumentError at .*: raised after the resume")
    assert b"x" not in r.body
    assert server.get("/fast").body == b"fast"


def test_sleep_blocks_in_other_phases(server):
    r = server.get("/fixups_sleep")
    assert (r.status, r.body) == (200, b"slept in fixups")


def test_sleep_through_a_method_defined_elsewhere(server):
    # the first run of each VM blocks; later ones run in a fiber
    for _ in range(4):
        r = server.get("/indirect")
        assert (r.status, r.body) == (200, b"pq")


def test_many_sleepers_keep_their_own_state(server):
    mark = len(server.error_log())
    tokens = ["t%02d" % i for i in range(40)]
    with concurrent.futures.ThreadPoolExecutor(20) as pool:
        results = list(pool.map(lambda t: server.get("/state?" + t), tokens))
    for t, r in zip(tokens, results):
        assert r.status == 200
        assert r.body.decode() == "%s0,%s1,%s2" % (t, t, t)
        assert r.headers["X-Token"] == t
    assert "[mruby:error]" not in server.error_log()[mark:]


def test_a_request_pipelined_after_one_that_sleeps(server):
    """The event MPM cannot take a suspended connection back, so a request
    that slept closes its connection: the request pipelined behind it is not
    answered. The answer says so (Connection: close) and the connection ends
    with a FIN, not a reset, so an HTTP client retries what it pipelined
    (RFC 9112, 9.3.2). Elsewhere the sleep blocks and both are answered."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(b"GET /sleep HTTP/1.1\r\nHost: x\r\n\r\nGET /fast HTTP/1.1\r\nHost: x\r\n\r\n")
        data = b""
        while True:
            chunk = s.recv(65536)  # a reset would raise here
            if not chunk:
                break
            data += chunk
            if server.mpm != "event" and data.endswith(b"fast"):
                break
    answers = data.count(b"HTTP/1.1 200 OK")
    if server.mpm == "event":
        assert answers == 1, data
        assert b"Connection: close\r\n" in data
        assert data.endswith(b"\r\n\r\nab")
    else:
        assert answers == 2, data
        assert data.endswith(b"fast")


def test_yielding_the_script_fiber_directly_is_an_error(server):
    if server.mpm != "event":
        # No fiber: Fiber.yield at top level is mruby's own error.
        assert server.get("/yield.mrb").status == 500
        return
    server.expect("/yield.mrb", 500, r"MRB00060: Handler script .*yield\.mrb left its fiber")


# A script that sleeps 10 ms and answers "ab", for the tests below that run
# it beside others in one VM.
SLEEP = r"""
<Location /sleep>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'a'; Apache::Async.sleep 10; Apache.rputs 'b'"
</Location>
"""

REDEFINED_FIBER = r"""
<Location /redefine_fiber>
    SetHandler mruby-native-script
    mrubyHandlerCode "class Fiber; def initialize(*args, &block); end; end; Apache.rputs 'redefined'"
</Location>
""" + SLEEP


def test_fiber_initialize_redefined_by_a_script(make_httpd, mpm):
    # One thread: the script that sleeps meets the VM where Fiber#initialize
    # was redefined. Its fiber cannot be made (the child crashed on the
    # fiber left without a context): a 500, and the VM is replaced.
    srv = make_httpd("fiberinit", mpm, REDEFINED_FIBER, mpm_conf=SINGLE_WORKER[mpm]).start()
    assert srv.get("/redefine_fiber").body == b"redefined"
    if mpm == "event":
        srv.expect("/sleep", 500,
                   r"MRB00030: Handler script .* raised RuntimeError .*Fiber#initialize was redefined")
    else:
        r = srv.get("/sleep")
        assert (r.status, r.body) == (200, b"ab")  # no fiber: the sleep blocks
    r = srv.get("/sleep")
    assert (r.status, r.body) == (200, b"ab")


KEPT_FIBER = r"""
<Location /keep_fiber>
    SetHandler mruby-native-script
    mrubyHandlerCode "$sleeper = Fiber.current; Apache.rputs 'a'; File.open('{root}/out/asleep', 'w') { }; Apache::Async.sleep 3000; Apache.rputs 'b'"
</Location>
<Location /resume_kept>
    SetHandler mruby-native-script
    mrubyHandlerCode "begin; $sleeper.resume; Apache.rputs 'resumed'; rescue FiberError => e; Apache.rputs e.message; end"
</Location>
"""


def test_another_request_cannot_resume_a_sleeping_script(make_httpd):
    # One thread, so one VM: while the first script sleeps, the second one
    # resumes the fiber it kept. That ran the sleeper's script in the
    # second request, and the child crashed when the sleeper woke.
    #
    # The second request must reach the child while its one thread is idle:
    # the event MPM stops accepting when a connection comes while all its
    # threads are busy, and with one thread it accepts again only once it
    # holds no connection, so not before the sleeper ends (then the fiber
    # is gone: "uninitialized Fiber"). The sleeper's mark is written just
    # before the thread is given back; the half second after it is for the
    # thread to leave the MPM's code for the request.
    srv = make_httpd("keptfiber", "event", KEPT_FIBER, mpm_conf=SINGLE_WORKER["event"],
                     log_level="warn mpm_event:debug").start()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        sleeper = pool.submit(srv.get, "/keep_fiber")
        deadline = time.time() + 30
        while not os.path.exists(srv.path("out/asleep")) and time.time() < deadline:
            time.sleep(0.02)
        time.sleep(0.5)
        r = srv.get("/resume_kept")
        assert (r.status, r.body) == (200, b"double resume"), srv.log_lines("not accepting new conns")
        assert not sleeper.done()
        r = sleeper.result()
    assert (r.status, r.body) == (200, b"ab")


AFTER_A_SLEEP = SLEEP + r"""
<Location /define>
    SetHandler mruby-native-script
    mrubyHandlerCode "def greeting; 'hi'; end; class Greeter; end; Apache.rputs greeting"
</Location>
<Location /transfer>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs Fiber.new { 'transferred' }.transfer"
</Location>
"""


def test_scripts_run_directly_after_a_sleep_in_their_vm(make_httpd, mpm):
    # One thread, so one VM. The sleep left its marks on the frame where
    # the scripts that need no fiber run: in every later one, a top-level
    # def or class raised TypeError, and Fiber#transfer raised FiberError.
    srv = make_httpd("aftersleep", mpm, AFTER_A_SLEEP, mpm_conf=SINGLE_WORKER[mpm]).start()
    for _ in range(2):
        assert srv.get("/sleep").body == b"ab"
        for _ in range(2):
            r = srv.get("/define")
            assert (r.status, r.body) == (200, b"hi")
            r = srv.get("/transfer")
            assert (r.status, r.body) == (200, b"transferred")
    assert "[mruby:error]" not in srv.error_log()


FIBER_REMOVED = r"""
<Location /remove_fiber>
    SetHandler mruby-native-script
    mrubyHandlerCode "Object.send(:remove_const, :Fiber); GC.start; Apache.rputs 'removed'"
</Location>
<Location /churn>
    SetHandler mruby-native-script
    mrubyHandlerCode "a = []; 20_000.times { |i| a << [i.to_s] }; a = nil; GC.start; Apache.rputs 'churned'"
</Location>
""" + SLEEP


def test_a_script_that_removes_the_fiber_constant(make_httpd, mpm):
    # One thread, so one VM. The harness kept the Fiber class it makes the
    # fibers of sleeping scripts with, but not from the collector: once the
    # constant was gone, the class was freed, and the next script that may
    # sleep had its fiber made of a freed object (a TypeError if the slot
    # was still free, else whatever object had taken it).
    srv = make_httpd("nofiber", mpm, FIBER_REMOVED, mpm_conf=SINGLE_WORKER[mpm]).start()
    assert srv.get("/remove_fiber").body == b"removed"
    for _ in range(3):
        assert srv.get("/churn").body == b"churned"
        r = srv.get("/sleep")
        assert (r.status, r.body) == (200, b"ab")
    assert "[mruby:error]" not in srv.error_log()


ENDED_MID_FIBER = r"""
<Location /ends_mid_fiber>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache::Async; $kept = Fiber.current; Fiber.new { raise 'out of a transferred fiber' }.transfer; Apache.rputs 'the rest of the first script'"
</Location>
<Location /transfer_to_kept>
    SetHandler mruby-native-script
    mrubyHandlerCode "begin; $kept.transfer; Apache.rputs ' the second script'; rescue FiberError => e; Apache.rputs e.message; end"
</Location>
"""


def test_a_fiber_left_by_an_exception_is_not_resumed_later(make_httpd, mpm):
    # One thread, so one VM. The exception out of the fiber the script
    # started with #transfer ends the run, not the script's own fiber,
    # which stayed resumable: a later request's script that kept it ran the
    # rest of the first script in its own request, and its own ended there.
    srv = make_httpd("endedmid", mpm, ENDED_MID_FIBER, mpm_conf=SINGLE_WORKER[mpm]).start()
    for _ in range(2):
        r = srv.get("/ends_mid_fiber")
        assert r.status == 500
        r = srv.get("/transfer_to_kept")
        if mpm == "event":
            assert (r.status, r.body) == (200, b"double resume")
        else:
            # no fiber of its own: the script kept the root fiber, and a
            # transfer to the fiber one runs in returns at once
            assert (r.status, r.body) == (200, b" the second script")
    srv.wait_log(r"MRB00030: Handler script .* raised RuntimeError at .*: out of a transferred fiber")


LEFT_FIBER = r"""
<Location /keep_root>
    SetHandler mruby-native-script
    mrubyHandlerCode "$root = Fiber.current; Apache.rputs 'kept'"
</Location>
<Location /transfer_to_root>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache::Async; $root.transfer; Apache.rputs 'after'"
</Location>
<Location /transferred_yields>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache::Async; Fiber.new { Fiber.yield }.transfer; Apache.rputs 'after'"
</Location>
""" + SLEEP


def test_a_script_that_leaves_its_fiber_to_the_root_fiber(make_httpd, mpm):
    # One thread, whose VM no script slept in yet. A fiber started with
    # #transfer goes back to the root fiber when it yields, and so does a
    # transfer to the root fiber (kept by a script run directly): in a
    # script that runs in a fiber of its own, the child crashed. Run
    # directly (no fiber: prefork, worker), they are plain Ruby.
    srv = make_httpd("leftfiber", mpm, LEFT_FIBER, mpm_conf=SINGLE_WORKER[mpm]).start()
    assert srv.get("/keep_root").body == b"kept"
    for path in ("/transferred_yields", "/transfer_to_root", "/transferred_yields"):
        r = srv.get(path)
        if mpm == "event":
            assert r.status == 500
        else:
            assert (r.status, r.body) == (200, b"after")
    if mpm == "event":
        srv.wait_log(r"MRB00060: Handler script .* left its fiber \(Fiber\.yield, Fiber#transfer\)")
    assert srv.get("/sleep").body == b"ab"
    assert srv.get("/keep_root").body == b"kept"


# ------------------------------------------------------------ event MPM

TWO_THREADS = dict(StartServers=1, ServerLimit=1, ThreadsPerChild=2, MinSpareThreads=2,
                   MaxSpareThreads=2, MaxRequestWorkers=2, AsyncRequestWorkerFactor=20)

SLEEP_1S = r"""
<Location /sleep1>
    SetHandler mruby-native-script
    mrubyHandlerCode "r = Apache::Request.new; Apache.rputs 'start ' + r.args; Apache::Async.sleep 1000; Apache.rputs ' end'"
</Location>
<Location /fast>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'fast'"
</Location>
<Location /sleeper>
    SetHandler mruby-native-script
    mrubyHandlerCode "i = Apache::Request.new.args; dir = '{root}/sleepers/'; Apache.rputs 'start ' + i; File.open(dir + i, 'w') { |f| f.write 'asleep' }; deadline = Time.now + 30; Apache::Async.sleep 50 until File.exist?(dir + 'release') || Time.now > deadline; Apache.rputs(File.exist?(dir + 'release') ? ' end' : ' never released')"
</Location>
"""


@pytest.fixture
def event_two_threads(make_httpd):
    return make_httpd("async-event", "event", SLEEP_1S, mpm_conf=TWO_THREADS).start()


def test_sleeping_requests_free_the_worker_threads(event_two_threads):
    """Twenty requests asleep at once in a child of two threads, and a
    third URL answered meanwhile. Shown without timing: each sleeper marks
    that it is asleep, and sleeps on until the test releases them all, which
    it does only once all twenty marks are there and /fast has answered. If a
    sleep held its thread, no more than two could ever be asleep."""
    srv = event_two_threads
    marks = srv.path("sleepers")
    os.makedirs(marks)
    os.chmod(marks, 0o777)
    assert srv.get("/fast").body == b"fast"
    with concurrent.futures.ThreadPoolExecutor(20) as pool:
        sleepers = [pool.submit(srv.get, "/sleeper?%d" % i, timeout=60) for i in range(20)]
        deadline = time.monotonic() + 20
        while len(os.listdir(marks)) < 20 and time.monotonic() < deadline:
            time.sleep(0.05)
        asleep = len(os.listdir(marks))
        fast = srv.get("/fast")
        with open(os.path.join(marks, "release"), "w") as f:
            f.write("go")
        results = [f.result() for f in sleepers]
    assert asleep == 20
    assert (fast.status, fast.body) == (200, b"fast")
    assert [(r.status, r.body) for r in results] == [(200, b"start %d end" % i) for i in range(20)]
    assert all(r.headers["Connection"] == "close" for r in results)


def test_client_disconnect_during_a_sleep(event_two_threads):
    srv = event_two_threads
    for _ in range(5):
        s = socket.create_connection(("127.0.0.1", srv.port))
        s.sendall(b"GET /sleep1?gone HTTP/1.1\r\nHost: x\r\n\r\n")
        time.sleep(0.05)
        s.close()
    time.sleep(1.5)  # the sleeps end and write to closed connections
    assert srv.get("/fast").body == b"fast"
    r = srv.get("/sleep1?after")
    assert (r.status, r.body) == (200, b"start after end")


def while_asleep(srv, n, action):
    """n requests to /sleeper; once all n are asleep (each has left its
    mark: a connection the MPM accepted but no thread has read yet would be
    closed by a stop or a restart, whatever mod_mruby does), action(), then
    the sleepers are released. Returns their responses."""
    marks = srv.path("sleepers")
    shutil.rmtree(marks, ignore_errors=True)
    os.makedirs(marks)
    os.chmod(marks, 0o777)
    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        sleepers = [pool.submit(srv.get, "/sleeper?%d" % i, timeout=90) for i in range(n)]
        deadline = time.monotonic() + 60
        while len(os.listdir(marks)) < n and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(os.listdir(marks)) == n
        action()
        with open(os.path.join(marks, "release"), "w") as f:
            f.write("go")
        return [f.result() for f in sleepers]


def test_graceful_restart_with_sleeping_requests(event_two_threads):
    srv = event_two_threads
    results = while_asleep(srv, 8, lambda: srv.graceful(wait=False))
    assert [(r.status, r.body) for r in results] == [(200, b"start %d end" % i) for i in range(8)]
    srv.graceful()  # the restart is complete
    assert srv.get("/fast").body == b"fast"


def test_graceful_stop_with_sleeping_requests(make_httpd):
    srv = make_httpd("async-stop", "event", SLEEP_1S, mpm_conf=TWO_THREADS).start()
    results = while_asleep(srv, 4, lambda: srv.signal(signal.SIGWINCH))
    assert [(r.status, r.body) for r in results] == [(200, b"start %d end" % i) for i in range(4)]
    srv.proc.wait(timeout=20)
    assert "AH00492: caught SIGWINCH, shutting down gracefully" in srv.error_log()


# A sleep that is due at once (0, or a few microseconds) woke the request
# while the worker thread that suspended it was still in the MPM's code for
# its connection: the wake completed the request and freed the connection
# under that thread, and the child crashed (the connection's memory written
# after it was freed, seen in notify_suspend). Checked under the load that
# showed it: many clients, one child of 16 threads, each request a new
# connection; every answer must be complete.
SHORT_SLEEPS = r"""
<Location /sleep0>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache::Async.sleep(0); Apache.rputs 'ok'"
</Location>
<Location /sleep_0_to_2>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache::Async.sleep(rand(3)); Apache.rputs 'ok'"
</Location>
"""

SIXTEEN_THREADS = dict(StartServers=1, ServerLimit=1, ThreadsPerChild=16, MinSpareThreads=16,
                       MaxSpareThreads=16, MaxRequestWorkers=16, AsyncRequestWorkerFactor=4)


def hammer(srv, path, seconds, clients=32, during=None):
    """clients threads, each sending GET path on a new connection and
    reading the answer to its end, for seconds; during(), if given, runs
    beside them. Returns the answers' statuses and bodies, counted."""
    stop = time.monotonic() + seconds
    request = ("GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path).encode()

    def client():
        seen = {}
        while time.monotonic() < stop:
            try:
                head, _, body = srv.exchange(request).partition(b"\r\n\r\n")
                key = (head.split(b"\r\n")[0], body)
            except OSError as e:
                key = ("error", type(e).__name__)
            seen[key] = seen.get(key, 0) + 1
        return seen

    with concurrent.futures.ThreadPoolExecutor(clients + 1) as pool:
        futures = [pool.submit(client) for _ in range(clients)]
        if during:
            pool.submit(during, stop).result()
        counts = {}
        for f in futures:
            for k, n in f.result().items():
                counts[k] = counts.get(k, 0) + n
    return counts


def test_a_sleep_due_at_once_under_load(make_httpd):
    srv = make_httpd("sleep0", "event", SHORT_SLEEPS, mpm_conf=SIXTEEN_THREADS).start()
    counts = hammer(srv, "/sleep0", 5)
    assert list(counts) == [(b"HTTP/1.1 200 OK", b"ok")], counts
    assert counts[(b"HTTP/1.1 200 OK", b"ok")] > 1000
    assert "exit signal" not in srv.error_log()


# Threads to spare: when every worker is busy, httpd's event MPM itself may
# reset a connection it accepted as a graceful restart began (seen with
# handlers that never sleep too; docs/reliability.md).
SIXTY_FOUR_THREADS = dict(StartServers=1, ServerLimit=1, ThreadsPerChild=64, MinSpareThreads=64,
                          MaxSpareThreads=64, MaxRequestWorkers=64, AsyncRequestWorkerFactor=4)


def test_short_sleeps_under_graceful_restarts(make_httpd):
    srv = make_httpd("sleep0restart", "event", SHORT_SLEEPS, mpm_conf=SIXTY_FOUR_THREADS).start()
    counts = hammer(srv, "/sleep_0_to_2", 6, during=lambda stop: srv.restart_every(1, stop))
    assert list(counts) == [(b"HTTP/1.1 200 OK", b"ok")], counts
    # (the last signals' lines may come after the load: waited for)
    assert srv.wait_log(r"AH00493: SIGUSR1 received\.  Doing graceful restart", count=4, timeout=20)
    assert "exit signal" not in srv.error_log()
