"""How the VMs are made. In a child with threads, one thread of the
module's own (named mruby-vms) makes every worker thread's VM, and the
worker waits for it (vm.c, make_vm; benchmarks.md, "The VMs made by one
thread"). Under prefork, the child's one VM is made in the parent and each
child adopts its copy at its start (vm.c, mm_vm_post_config; benchmarks.md,
"The prefork child's VM made in the parent"). What the test can see: each
worker thread (each child) still has a VM of its own, whose random numbers
are its own (globals do not cross), threads asking at the same time each get
theirs, a VM replaced after mrubyMaxRequestsPerVM is made again, the child
has the maker thread under worker and event and not under prefork, and
prefork's children made no VM before their retirements. What it saves
(memory) is measured by the bench, not here."""

import concurrent.futures
import os
import re
import uuid

import pytest

import procs
from httpd import MPMS, ONE_CHILD, VALGRIND, Httpd

# /meet: the requests of one meeting each wait (spinning, so each holds its
# thread) until all have arrived, then answer their VM's id (a global set
# at the VM's first run) and their process.
BODY = r"""
LoadModule status_module /usr/lib/apache2/modules/mod_status.so
mrubyMaxRequestsPerVM 3
<Location /server-status>
    SetHandler server-status
</Location>
<Location /meet>
    SetHandler mruby-native-script
    mrubyHandlerCode "me, *others = Apache::Request.new.args.split(','); dir = '{root}/meet/'; File.open(dir + me, 'w') { |f| f.write 'here' }; deadline = Time.now + 30; nil until others.all? { |o| File.exist?(dir + o) } || Time.now > deadline; $vm ||= rand(1 << 40).to_s; pid = File.open('/proc/self/stat') { |f| f.read }.split(' ')[0]; Apache.rputs [others.all? { |o| File.exist?(dir + o) } ? 'met' : 'alone', $vm, pid].join(' ')"
</Location>
<Location /vm>
    SetHandler mruby-native-script
    mrubyHandlerCode "$runs = ($runs || 0) + 1; $vm ||= rand(1 << 40).to_s; Apache.rputs [$vm, $runs].join(' ')"
</Location>
"""

MAKER = "mruby-vms"


def thread_names(pid):
    names = []
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                names.append(f.read().strip())
        except OSError:
            continue
    return names


def vms_created(srv):
    text = srv.ok("/server-status?auto").text
    found = re.search(r"^MrubyVMsCreated: (\d+)$", text, re.M)
    assert found, text
    return int(found.group(1))


def serving_pids(srv):
    # apache2 -X (the valgrind runs) serves in its one process
    return procs.children(srv.pid) or [srv.pid]


def meet(server):
    """Four requests at once (two under prefork: two children), each on a
    thread that has no VM yet (under prefork: whose VM the parent made)."""
    before = vms_created(server)
    if server.mpm == "prefork":
        assert before == len(serving_pids(server))  # adopted at the children's start
    ids = [uuid.uuid4().hex for _ in range(4 if server.mpm != "prefork" else 2)]
    args = [",".join([me] + [o for o in ids if o != me]) for me in ids]
    with concurrent.futures.ThreadPoolExecutor(len(ids)) as pool:
        answers = list(pool.map(lambda a: server.get("/meet?" + a, timeout=120), args))
    assert [r.status for r in answers] == [200] * len(ids)
    words = [r.text.split(" ") for r in answers]
    assert [w[0] for w in words] == ["met"] * len(ids), words
    # every request had a thread, and every thread a VM of its own
    assert len({w[1] for w in words}) == len(ids), words
    if server.mpm != "prefork":
        assert len({w[2] for w in words}) == 1, words  # one child
    # the first requests of these threads (mod_status's own made none);
    # under prefork, each child's VM was there before its first request,
    # and its random numbers are still its own: the same first number
    # drawn in both children's VMs (the parent's generator, copied) fails
    # the distinct ids above
    assert vms_created(server) - before == (0 if server.mpm == "prefork" else len(ids))


# One server per MPM for the three checks (a server start is the test's
# cost, under ASan and valgrind most of all): first the meeting, on
# threads that have no VM yet, then the thread, then the retirements.
@pytest.mark.parametrize("mpm", MPMS)
def test_vms_made_by_the_maker_thread(mpm):
    server = Httpd("vm_maker", mpm, BODY, mpm_conf=ONE_CHILD[mpm], log_level="warn mruby:debug")
    server.shared_dir("meet")
    server.start()
    try:
        if not VALGRIND:  # apache2 -X serves one request at a time
            meet(server)

        # the thread, where a child has threads
        assert server.ok("/vm").status == 200
        pids = serving_pids(server)
        # the VMs made so far, by process: under prefork, the parent's one,
        # which its children adopted; else the child's, one a thread
        made = re.findall(r"MRB00012: created an mruby VM for pid (\d+)", server.error_log())
        if mpm == "prefork":
            assert made == [str(server.pid)], made
        else:
            assert made and set(made) <= {str(pid) for pid in pids}, made
        makers = [thread_names(pid).count(MAKER) for pid in pids]
        assert makers == [0 if mpm == "prefork" else 1] * len(pids), makers

        # mrubyMaxRequestsPerVM 3: a VM serves three runs, then the thread
        # has a new one, made again
        seen = {}
        for _ in range(12):
            vm, runs = server.ok("/vm").text.split(" ")
            assert 1 <= int(runs) <= 3
            seen[vm] = max(seen.get(vm, 0), int(runs))
        # no VM served more than three runs: twelve took at least four VMs
        assert len(seen) >= 4, seen

        log = server.error_log()
        assert "MRB00018" not in log and "[mruby:error]" not in log
    finally:
        server.stop()
        server.cleanup()
