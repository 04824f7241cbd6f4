"""ChildExit: scripts run when a child process stops (graceful stop,
graceful restart's old generation, a child the MPM retires), in a VM of
their own and without a request, First, Middle then Last. Observed through
the files they write."""

import os
import re
import time

import pytest

from httpd import restarts

INIT = "File.open('{root}/out/init-' + Process.pid.to_s, 'w') { |f| f.write 'up' }"

BODY = r"""
mrubyChildInitCode "%s; $from_init = 'kept'"
mrubyChildExitFirstCode "File.open('{root}/out/exit-' + Process.pid.to_s, 'a') { |f| f.write 'first,' }"
mrubyChildExitCode "File.open('{root}/out/exit-' + Process.pid.to_s, 'a') { |f| f.write 'middle,' + $from_init.inspect + ',' }"
mrubyChildExitLast {root}/scripts/last.rb
<Location /hello>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs Process.pid.to_s"
</Location>
""" % INIT

LAST_RB = r'''
begin
  Apache::Request.new
  req = "request"
rescue RuntimeError
  req = "no request"
end
File.open("{root}/out/exit-" + Process.pid.to_s, "a") { |f| f.write "last,#{req}" }
'''


def pids(srv, prefix):
    out = {}
    for name in os.listdir(srv.path("out")):
        if name.startswith(prefix):
            with open(srv.path("out/" + name)) as f:
                out[int(name[len(prefix):])] = f.read()
    return out


def wait_started(srv, before=frozenset(), timeout=10):
    """The pids of a generation's first children (not in before), once
    each has run its ChildInit script: httpd says it is ready before they
    all have."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        started = set(pids(srv, "init-")) - before
        if len(started) >= srv.mpm_conf["StartServers"]:
            return started
        time.sleep(0.05)
    raise AssertionError("children did not start: %s" % started)


def start(make_httpd, mpm, body=BODY):
    srv = make_httpd("child-exit", mpm, body)
    srv.write("scripts/last.rb", srv.fill(LAST_RB))
    srv.start()
    return srv


def test_runs_on_graceful_stop_in_every_child(make_httpd, mpm):
    srv = start(make_httpd, mpm)
    served = {int(srv.ok("/hello").text) for _ in range(20)}
    assert served <= set(pids(srv, "init-"))
    assert pids(srv, "exit-") == {}  # nothing ran before a child stops
    srv.stop()
    started = pids(srv, "init-")  # all of them, those the MPM added too
    exits = pids(srv, "exit-")
    # every child that started ran its exit scripts, in order, once
    assert set(exits) == set(started), (exits, started, srv.error_log())
    for text in exits.values():
        # a VM of its own: the ChildInit's globals are not there
        assert text == "first,middle,nil,last,no request"


# Each exiting child counts itself in the shared dictionary, which the
# next generation reads.
CACHE_BODY = BODY + r"""
mrubyCache dict:exits
mrubyChildExitLastCode "Apache::Cache.incr('exits')"
<Location /exits>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs Apache::Cache['exits'].to_s"
</Location>
"""


@restarts
def test_runs_in_the_old_generation_on_graceful_restart(make_httpd, mpm):
    srv = start(make_httpd, mpm, CACHE_BODY)
    assert srv.ok("/exits").text == ""
    old = wait_started(srv)
    srv.graceful()  # returns once the old children are gone
    exits = pids(srv, "exit-")
    assert old <= set(exits), (old, exits)
    new = wait_started(srv, old)
    assert not new & set(exits)
    # the new generation serves, and sees what the old one's exits counted
    assert int(srv.ok("/hello").text) in new
    assert int(srv.ok("/exits").text) == len(exits)


def test_exception_is_logged_and_the_rest_runs(make_httpd, mpm):
    body = BODY.replace("mrubyChildExitFirstCode \"", "mrubyChildExitFirstCode \"raise 'cleanup failed'; ")
    srv = start(make_httpd, mpm, body)
    srv.ok("/hello")
    srv.stop()
    started = pids(srv, "init-")
    exits = pids(srv, "exit-")
    assert set(exits) == set(started)
    for text in exits.values():
        assert text == "middle,nil,last,no request"
    lines = srv.log_lines(r"ChildExit script .*cleanup failed")
    assert len(lines) == len(started), srv.error_log()


@pytest.mark.parametrize("where", ["<Location /x>", "<VirtualHost *:80>"])
def test_only_in_the_main_server(make_httpd, mpm, where):
    srv = make_httpd("child-exit-where", mpm)
    end = "</%s>" % where[1:].split()[0].rstrip(">")
    rc, out = srv.configtest("%s\nmrubyChildExitCode \"1\"\n%s\n" % (where, end))
    assert rc != 0 and "mrubyChildExitCode" in out, out
