"""Recipe docs/recipes/blocklist: each child's timer reads blocklist.txt
into the "blocklist" cache; the access check refuses the addresses on it.
Edits apply within the refresh time; a missing file keeps the list."""

import os
import time

import pytest

import system_apache
from recipes import Recipe, recipe_httpd, replace_file, server_root, set_setting, with_dependencies

FILES = {"htdocs/index.html": "home\n"}



def quick_refresh(server):
    set_setting(server, "blocklist_timer.rb", "BLOCKLIST_REFRESH", 0.5)


srv = recipe_httpd("blocklist", "DirectoryIndex index.html\n", FILES, settings=quick_refresh)

# The timer reads the file every BLOCKLIST_REFRESH seconds (2 as shipped):
# the tests set 0.5, and wait for every child's timer to have read it
# (twice that on an idle machine; under ASan on a loaded one more: waited
# for, up to REFRESH seconds, not slept for).
REFRESH = 20


def list_path(server):
    return os.path.join(server_root(server), "mruby", "blocklist.txt")


def replace_list(server, text):
    replace_file(list_path(server), text)


def statuses(server, source, n=6):
    return {server.get("/", source=source).status for _ in range(n)}


def refreshed(server, source, expected):
    """source's statuses once they are expected (within REFRESH s)."""
    deadline = time.time() + REFRESH
    while True:
        got = statuses(server, source)
        if got == expected or time.time() > deadline:
            return got
        time.sleep(0.1)


def test_shipped_list_refuses_none_of_ours(srv):
    for source in ("127.0.0.1", "127.0.0.3"):
        assert statuses(srv, source) == {200}


def test_added_address_refused_then_let_in_again(srv):
    path = list_path(srv)
    with open(path) as f:
        shipped = f.read()
    try:
        replace_list(srv, shipped + "127.0.0.3   # the test's scanner\n")
        assert refreshed(srv, "127.0.0.3", {403}) == {403}
        assert statuses(srv, "127.0.0.1") == {200}
    finally:
        replace_list(srv, shipped)
    assert refreshed(srv, "127.0.0.3", {200}) == {200}


def test_missing_file_keeps_the_list(srv):
    path = list_path(srv)
    with open(path) as f:
        shipped = f.read()
    try:
        replace_list(srv, shipped + "127.0.0.4\n")
        assert refreshed(srv, "127.0.0.4", {403}) == {403}
        os.unlink(path)
        srv.wait_log(r"MRB00031: Timers script timer every 500 ms \(.*blocklist_timer\.rb:\d+\) raised "
                     r".*blocklist\.txt", timeout=5)
        assert statuses(srv, "127.0.0.4") == {403}
        assert statuses(srv, "127.0.0.1") == {200}
    finally:
        replace_list(srv, shipped)
    assert refreshed(srv, "127.0.0.4", {200}) == {200}


@pytest.mark.skipif(system_apache.enabled(), reason="a second server of its own: test servers only")
def test_no_list_read_yet_lets_everyone_in(make_httpd, mpm):
    """Before the timer's first read there is no list in the cache (here
    the file is missing when the server starts): every client gets in, and
    none gets a 500 from the check."""
    recipe = Recipe("blocklist")
    srv = make_httpd("recipe-blocklist-nolist", mpm, "IncludeOptional conf-enabled/*.conf\nDirectoryIndex index.html\n",
                     modules=with_dependencies(recipe.modules()), files=FILES)
    recipe.install(srv)
    os.unlink(list_path(srv))
    srv.start()
    srv.wait_log(r"MRB00031: .*blocklist_timer\.rb:\d+.* raised .*blocklist\.txt", timeout=10)
    assert statuses(srv, "127.0.0.1") == {200}
    assert statuses(srv, "127.0.0.3") == {200}
    assert "blocklist_check.rb" not in srv.error_log()
