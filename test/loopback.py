"""What a test or benchmark httpd needs of this machine: a free loopback
port, and the user its children run as. Shared by test/httpd.py and
bench/server.py; imports nothing outside the standard library."""

import grp
import os
import pwd
import random
import socket
import threading


# Ports are taken below the kernel's ephemeral range (32768 and up on
# Debian), where no client connection of a test can hold them, each
# process of a parallel run (pytest-xdist's PYTEST_XDIST_WORKER=gwN) from
# a block of its own, in turn, from a random place (runs of other
# checkouts may share the machine): two servers started at once never draw
# the same port, and a port is not drawn again until the block has wrapped.
PORTS_FROM = 10000
PORTS_PER_PROCESS = 1500
_next_port = [random.randrange(PORTS_PER_PROCESS)]


def _port_block():
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    index = int(worker[2:]) + 1 if worker.startswith("gw") and worker[2:].isdigit() else 0
    return PORTS_FROM + (index % 14) * PORTS_PER_PROCESS


def free_port():
    base = _port_block()
    for _ in range(PORTS_PER_PROCESS):
        port = base + _next_port[0] % PORTS_PER_PROCESS
        _next_port[0] += 1
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue  # in use, or a closed connection's TIME_WAIT
            return port
    raise RuntimeError("no free loopback port in %d..%d" % (base, base + PORTS_PER_PROCESS - 1))


def run_user():
    """(user, group) httpd's children run as: they must not run as root, so
    when this runs as root, www-data (or nobody); None otherwise."""
    if os.geteuid() != 0:
        return None
    for user in ("www-data", "nobody"):
        try:
            pw = pwd.getpwnam(user)
            return user, grp.getgrgid(pw.pw_gid).gr_name
        except KeyError:
            continue
    return None


class TCPServer:
    """A loopback TCP server of a test: each connection it accepts is
    answered by answer(conn), in a thread of its own, until the listening
    socket is closed. Subclasses define answer; accepted(conn) is called
    first, in the accepting thread."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted(conn)
            threading.Thread(target=self.answer, args=(conn,), daemon=True).start()

    def accepted(self, conn):
        pass

    def answer(self, conn):
        raise NotImplementedError
