"""Shared fixtures: `start_httpd` starts a real httpd for a test module on
each MPM and stops it (checking its error log for crashes) at the end."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from httpd import HTTPD, MODULE, MPMS, Httpd  # noqa: E402


def pytest_configure(config):
    if not os.path.exists(HTTPD):
        raise pytest.UsageError("no httpd at %s (set MM_HTTPD)" % HTTPD)
    if not os.path.exists(MODULE):
        raise pytest.UsageError("no module at %s: run make first (or set MM_MODULE)" % MODULE)


@pytest.fixture(params=MPMS)
def mpm(request):
    return request.param


@pytest.fixture
def make_httpd(request):
    """Factory for servers owned by one test; each is stopped and its log
    checked when the test ends."""
    servers = []

    def make(name, mpm, body="", **kw):
        srv = Httpd(name, mpm, body, **kw)
        servers.append(srv)
        return srv

    yield make
    failures = []
    for srv in servers:
        try:
            srv.stop()
        except AssertionError as e:
            failures.append(str(e))
        else:
            srv.cleanup()
    assert not failures, "\n".join(failures)
