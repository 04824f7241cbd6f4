"""The module's counters on mod_status's page: server-status?auto has one
line per counter, the HTML page a table, Apache::Status.counters a Hash;
the numbers are the server's (every child's, and those of children that
exited), and follow the requests the test makes."""

import concurrent.futures
import re
import time

import pytest

import procs
from httpd import MPMS, SINGLE_WORKER, Httpd, module_httpd, restarts

BODY = r"""
LoadModule status_module /usr/lib/apache2/modules/mod_status.so
<Location /server-status>
    SetHandler server-status
</Location>
<Location /ok>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'ok'"
</Location>
<Location /boom>
    SetHandler mruby-native-script
    mrubyHandlerCode "raise 'boom'"
</Location>
<Location /spin>
    SetHandler mruby-native-script
    mrubyTimeout 200
    mrubyHandlerCode "loop { }"
</Location>
<Location /nap>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'a'; Apache::Async.sleep 50; Apache.rputs 'b'"
</Location>
<Location /counters>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache::Status.counters.sort.each { |k, v| Apache.echo k + '=' + v.to_s }"
</Location>
<Location /file>
    SetHandler mruby-native-script
    mrubyHandler {root}/scripts/file.rb
</Location>
<Location /cache>
    SetHandler mruby-native-script
    mrubyHandlerCode "c = Apache::Cache; c['k'] = 'v'; c['k']; begin; c.incr('k'); rescue TypeError; end"
</Location>
<Location /pid>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs Process.pid.to_s"
</Location>
<Location /phases>
    mrubyFixupsCode "Apache::Request.new.notes['x'] = '1'"
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs Apache::Request.new.notes['x']"
</Location>
"""

NAMES = ("children", "vms_alive", "vms_created", "runs", "exceptions", "timeouts", "suspends", "suspended",
         "wakes", "io_wakes", "code_hits", "code_loads", "code_compiles", "cache_ops", "cache_errors", "timer_runs", "timer_failures")
AUTO = {"vms_alive": "MrubyVMs", "vms_created": "MrubyVMsCreated"}
KEYS = tuple(AUTO.get(n, "Mruby" + "".join(w.capitalize() for w in n.split("_"))) for n in NAMES)

FILES = {"scripts/file.rb": "Apache.rputs 'file 1'\n"}

# One worker thread in all: one child, one VM, which runs every script.
server = module_httpd("status", "mrubyCache\n" + BODY, mpm_conf=SINGLE_WORKER, files=FILES,
                      modules=("socache_shmcb",))


def counters(srv):
    text = srv.ok("/server-status?auto").text
    got = {}
    for line in text.splitlines():
        m = re.match(r"(Mruby\w+): (\d+)$", line)
        if m:
            got[m.group(1)] = int(m.group(2))
    assert set(got) == set(KEYS), text
    return got


def delta(srv, before):
    after = counters(srv)
    return {k: after[k] - before[k] for k in KEYS}, after


def test_runs_count_each_script_run(server):
    before = counters(server)
    for _ in range(7):
        assert server.ok("/ok").text == "ok"
    for _ in range(3):
        assert server.ok("/phases").text == "1"  # two scripts a request
    d, after = delta(server, before)
    assert d["MrubyRuns"] == 7 + 3 * 2
    assert d["MrubyExceptions"] == d["MrubyTimeouts"] == d["MrubySuspends"] == 0
    # inline code is loaded into the VM at its first run, then each run is a hit
    assert d["MrubyCodeHits"] + d["MrubyCodeLoads"] == 7 + 3 * 2 and d["MrubyCodeLoads"] <= 3
    assert d["MrubyCodeCompiles"] == 0
    # one child, one thread: one VM, which ran every script
    assert after["MrubyChildren"] == 1
    assert after["MrubyVMs"] == 1 and after["MrubyVMsCreated"] >= 1
    assert after["MrubySuspended"] == 0


def test_exceptions_and_timeouts(server):
    before = counters(server)
    for _ in range(4):
        assert server.get("/boom").status == 500
    for _ in range(2):
        assert server.get("/spin").status == 503
    d, _ = delta(server, before)
    assert d["MrubyRuns"] == 6
    assert d["MrubyExceptions"] == 6  # Apache::Timeout is an exception too
    assert d["MrubyTimeouts"] == 2
    server.wait_log("MRB00030: Handler script .* boom", count=4)


def test_suspends_counted_on_the_event_mpm(server):
    before = counters(server)
    for _ in range(3):
        assert server.ok("/nap").text == "ab"
    d, after = delta(server, before)
    assert d["MrubyRuns"] == 3
    # the event MPM puts the request to sleep; the others sleep in place
    assert d["MrubySuspends"] == (3 if server.mpm == "event" else 0)
    assert after["MrubySuspended"] == 0


def test_html_page(server):
    before = counters(server)
    server.ok("/ok")
    html = server.ok("/server-status").text
    assert "<h2>mod_mruby (all children, since httpd started)</h2>" in html, html
    runs = re.search(r"<tr><td>script runs</td><td>(\d+)</td></tr>", html)
    assert runs and int(runs.group(1)) == before["MrubyRuns"] + 1
    assert "<tr><td>VMs alive</td><td>1</td></tr>" in html
    notable = server.ok("/server-status?notable").text
    assert "<dt>script runs: %d</dt>" % (before["MrubyRuns"] + 1) in notable


def test_a_changed_file_is_compiled_again(server):
    before = counters(server)
    assert server.ok("/file").text == "file 1"  # compiled when read, loaded at its first run in the VM
    assert server.ok("/file").text == "file 1"
    d, _ = delta(server, before)
    assert d["MrubyCodeHits"] >= 1 and d["MrubyCodeHits"] + d["MrubyCodeLoads"] == 2
    assert d["MrubyCodeCompiles"] == 0
    time.sleep(1.1)  # a new modification time
    server.write("scripts/file.rb", "Apache.rputs 'file 2'\n")
    before = counters(server)
    assert server.ok("/file").text == "file 2"
    assert server.ok("/file").text == "file 2"
    d, _ = delta(server, before)
    assert (d["MrubyCodeCompiles"], d["MrubyCodeHits"]) == (1, 1)


def test_cache_operations_and_their_errors(server):
    before = counters(server)
    for _ in range(3):
        server.ok("/cache")
    d, _ = delta(server, before)
    # set, get and a refused incr (the value is not a number) each time
    assert (d["MrubyCacheOps"], d["MrubyCacheErrors"]) == (9, 3)


def test_the_hash_of_apache_status_is_what_server_status_shows(server):
    server.ok("/ok")  # the one thread's VM is made, if this is the server's first test
    auto = counters(server)
    got = dict(line.split("=") for line in server.ok("/counters").text.splitlines())
    assert sorted(got) == sorted(NAMES)
    for name, key in zip(NAMES, KEYS):
        # the /counters run is counted as it ends, its code hit or load as it begins
        more = 1 if name in ("code_hits", "code_loads") else 0
        assert auto[key] <= int(got[name]) <= auto[key] + more, (name, got, auto)
    assert int(got["code_hits"]) + int(got["code_loads"]) == auto["MrubyCodeHits"] + auto["MrubyCodeLoads"] + 1


@pytest.fixture(scope="module", params=MPMS)
def several(request):
    """Several children (prefork: 4; worker, event: 2), not one; prefork
    makes no fifth under a burst (two idle at least, as it would want)."""
    srv = Httpd("status-many", request.param, BODY, files=FILES,
                mpm_conf={"prefork": dict(ServerLimit=4, MaxRequestWorkers=4)})
    srv.start()
    yield srv
    srv.stop()
    srv.cleanup()


def test_sums_over_every_child(several):
    children = 4 if several.mpm == "prefork" else 2
    # httpd takes connections before its children have started (each
    # counts itself as it starts): waited for
    deadline = time.time() + 20
    while counters(several)["MrubyChildren"] < children and time.time() < deadline:
        time.sleep(0.1)
    before = counters(several)
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        pids = set(pool.map(lambda _: several.ok("/pid").text, range(40)))
    d, after = delta(several, before)
    # whichever child answers ?auto, it counts every child's runs
    assert d["MrubyRuns"] == 40
    assert after["MrubyChildren"] == children, after
    if several.mpm == "prefork":
        assert len(pids) > 1 and after["MrubyVMs"] >= len(pids)


@restarts
def test_counts_of_children_that_exited_stay(several):
    for _ in range(10):
        several.ok("/ok")
    before = counters(several)
    old = set(procs.children(several.pid))
    several.graceful()
    assert not old & set(procs.children(several.pid))  # every child is new
    several.ok("/ok")
    d, after = delta(several, before)
    assert d["MrubyRuns"] == 1  # the old children's runs are still counted
    # How many children the new generation has is httpd's choice: the
    # threaded MPMs start them as the old ones' slots free up, one
    # maintenance cycle (a second) apart, and prefork, whose first cycle
    # after the restart starts the children still to start in the slots
    # free then, replaces an old child that exited later only if fewer than
    # MinSpareServers are idle (2 here: under load, 3 of the 4 children
    # were seen to stay). What is checked: the count is that of the
    # children alive, once they have started.
    deadline = time.monotonic() + 10
    live = len(procs.children(several.pid))
    while after["MrubyChildren"] != live and time.monotonic() < deadline:
        time.sleep(0.1)
        after = counters(several)
        live = len(procs.children(several.pid))
    assert after["MrubyChildren"] == live >= 1, (after, live)
    assert after["MrubyRuns"] - before["MrubyRuns"] == 1
