"""Graceful restarts and stops with calls in flight (test/outbound).

Each request holds a call its peer does not answer until the test says
so; the test signals httpd only once every request has reached its peer
(is inside its script: on the event MPM a connection accepted but not
yet read would be closed by the stop or restart itself, whatever
mod_mruby does), and has the answers sent only once the signal has taken
effect."""

import concurrent.futures
import signal
import time

import procs

# Enough children from the start for eight requests at once: prefork
# spawns more only at one a second at first.
EIGHT_AT_ONCE = {"prefork": dict(StartServers=10, MinSpareServers=10, MaxSpareServers=12)}


def in_flight(srv, paths, arrived, signal_, release):
    """GETs paths at once; once arrived() says every one is at its peer,
    signal_(), then release(); returns the responses."""
    with concurrent.futures.ThreadPoolExecutor(len(paths)) as pool:
        futures = [pool.submit(srv.get, p, timeout=60) for p in paths]
        deadline = time.monotonic() + 30
        while arrived() < len(paths) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert arrived() == len(paths), srv.error_log()[-2000:]
        signal_()
        release()
        return [f.result() for f in futures]


def restart_signal(srv):
    """A graceful restart, returned from once the new generation runs (the
    old one has been told to finish); the old children's pids."""
    old = procs.children(srv.pid)
    before = srv.error_log().count("resuming normal operations")

    def signal_():
        srv.signal(signal.SIGUSR1)
        srv.wait_log("resuming normal operations", count=before + 1)

    return old, signal_


def stop_signal(srv):
    def signal_():
        srv.signal(signal.SIGWINCH)
        srv.wait_log("caught SIGWINCH, shutting down gracefully")

    return signal_


def answers(srv, results):
    """The bodies without the pid of the child that answered; the pids."""
    assert all(r.status == 200 for r in results), (results, srv.error_log()[-3000:])
    split = [r.text.rsplit(" ", 1) for r in results]
    return [s[0] for s in split], {int(s[1]) for s in split}


def assert_quiet(srv):
    bad = srv.log_lines(r"\[mruby:(warn|error|crit|alert|emerg)\]")
    assert not bad, "\n".join(bad)
