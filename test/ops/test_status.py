"""The module's counters on mod_status's page: server-status?auto has one
line per counter, the HTML page a table; the numbers are those of the
answering child, and follow the requests the test makes."""

import re

import pytest

from httpd import SINGLE_WORKER, module_httpd

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
<Location /phases>
    mrubyFixupsCode "Apache::Request.new.notes['x'] = '1'"
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs Apache::Request.new.notes['x']"
</Location>
"""

KEYS = ("MrubyVMs", "MrubyVMsCreated", "MrubyRuns", "MrubyExceptions", "MrubyTimeouts", "MrubySuspended",
        "MrubySuspends", "MrubyTimerRuns", "MrubyTimerFailures")

# One worker thread in all: the status request is answered by the child
# (and the VM) that ran the scripts.
server = module_httpd("status", BODY, mpm_conf=SINGLE_WORKER)


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
    # one thread: one VM, which ran every script
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
    assert re.search(r"<h2>mod_mruby \(process \d+\)</h2>", html), html
    runs = re.search(r"<tr><td>script runs</td><td>(\d+)</td></tr>", html)
    assert runs and int(runs.group(1)) == before["MrubyRuns"] + 1
    assert "<tr><td>VMs alive</td><td>1</td></tr>" in html
    notable = server.ok("/server-status?notable").text
    assert "<dt>script runs: %d</dt>" % (before["MrubyRuns"] + 1) in notable
