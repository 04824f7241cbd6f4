"""The README's promises: its only commands are script/server and
script/test (test_demo.py runs the first, CI the second), and its
five-line configuration example works as written."""

import os

from httpd import MODULE, ROOT
from recipes import fenced_blocks


with open(os.path.join(ROOT, "README.md")) as f:
    README = f.read()


def blocks(lang):
    return [text for block_lang, text in fenced_blocks(README) if block_lang == lang]


def test_two_commands():
    commands = [line.split("#")[0].strip() for block in blocks("sh") for line in block.splitlines()]
    assert [c for c in commands if c] == ["script/server", "script/test"]
    assert {lang for lang, _ in fenced_blocks(README)} == {"sh", "apache"}


def test_example(make_httpd, mpm):
    example, = blocks("apache")
    lines = example.splitlines()
    assert len(lines) == 5
    # The tests load the module they built, not the installed one.
    assert lines[0] == "LoadModule mruby_module /usr/lib/apache2/modules/mod_mruby.so"
    srv = make_httpd("readme", mpm, "\n".join(lines[1:])).start()
    r = srv.get("/hello/world")
    assert r.status == 200 and r.body == b"hello from /hello/world"
    assert os.path.exists(MODULE)
