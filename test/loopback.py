"""What a test or benchmark httpd needs of this machine: a free loopback
port, and the user its children run as. Shared by test/httpd.py and
bench/server.py; imports nothing outside the standard library."""

import grp
import os
import pwd
import socket


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
