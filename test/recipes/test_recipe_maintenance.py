"""Recipe docs/recipes/maintenance: a flag file next to the script turns
maintenance mode on and off while the server runs; clients get a 503 page
with the flag's message, administrators (127.0.0.1) get through. Other
clients come from 127.0.0.2."""

import collections
import concurrent.futures
import os
import threading

import pytest

from recipes import recipe_httpd, server_root

FILES = {"htdocs/index.html": "the site\n"}

srv = recipe_httpd("maintenance", "", FILES)

VISITOR = "127.0.0.2"


@pytest.fixture
def flag(srv):
    """Writes the flag with the given text; removed after the test."""
    path = os.path.join(server_root(srv), "mruby", "maintenance.on")

    def switch_on(text=""):
        with open(path, "w") as f:
            f.write(text)

    yield switch_on
    if os.path.exists(path):
        os.unlink(path)


def test_off_by_default(srv):
    r = srv.get("/", source=VISITOR)
    assert r.status == 200 and r.body == b"the site\n"
    assert "X-Maintenance" not in r.headers


def test_on_with_a_message(srv, flag):
    flag("Back at 14:00 UTC <after the upgrade & checks>\nsecond line is not shown\n")
    for path in ("/", "/index.html", "/no/such/page", "/?x=1"):
        r = srv.get(path, source=VISITOR)
        assert r.status == 503, path
        assert r.headers["Retry-After"] == "300"
        assert r.headers["Cache-Control"] == "no-store"
        assert r.headers["Content-Type"] == "text/html; charset=utf-8"
        assert b"<h1>Down for maintenance</h1>" in r.body
        assert b"Back at 14:00 UTC &lt;after the upgrade &amp; checks&gt;" in r.body
        assert b"second line" not in r.body and b"the site" not in r.body
    r = srv.request("POST", "/form", body=b"a=1", source=VISITOR)
    assert r.status == 503
    r = srv.request("HEAD", "/", source=VISITOR)
    assert r.status == 503 and r.body == b""


def test_on_without_a_message(srv, flag):
    flag()
    r = srv.get("/", source=VISITOR)
    assert r.status == 503 and b"We will be back shortly." in r.body


def test_administrators_get_through(srv, flag):
    flag("upgrading")
    r = srv.get("/")
    assert r.status == 200 and r.body == b"the site\n"
    assert r.headers["X-Maintenance"] == "on (you are let through)"


def test_off_again(srv, flag):
    flag("upgrading")
    assert srv.get("/", source=VISITOR).status == 503
    os.unlink(os.path.join(server_root(srv), "mruby", "maintenance.on"))
    r = srv.get("/", source=VISITOR)
    assert r.status == 200 and r.body == b"the site\n"


def test_switching_while_requests_arrive(srv):
    """A flag removed between the script's look for it and its read means
    maintenance is off, not an error: while the flag is switched on and off
    as fast as can be, every answer is the site or the maintenance page."""
    path = os.path.join(server_root(srv), "mruby", "maintenance.on")
    stop = threading.Event()

    def switch():
        while not stop.is_set():
            with open(path, "w") as f:
                f.write("back soon\n")
            os.unlink(path)

    switcher = threading.Thread(target=switch)
    switcher.start()
    try:
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            statuses = collections.Counter(pool.map(lambda _: srv.get("/", source=VISITOR).status, range(3000)))
    finally:
        stop.set()
        switcher.join()
    # both answers, and nothing else: the flag was seen on and off
    assert set(statuses) == {200, 503}, statuses
