"""Input filters and the ways a module reads a body: a C reader
(test/mod_mm_reader.c, built here with apxs) reads it directly with
ap_get_brigade in each mode (bytes, lines, non-blocking lines, peeks,
exhaustive, a mix) and must get the script's output, with the script's
line ends, never the client's bytes; a refusal answers 413 in every mode."""

import os
import shutil
import sys
import time

import pytest

from httpd import MPMS, ROOT, Httpd

sys.path.insert(0, os.path.join(ROOT, "bench"))
from prereq import build_module  # noqa: E402

APXS = os.environ.get("MM_APXS", "/usr/bin/apxs")
APR_EOF = 70014
MODES = ("readbytes", "getline", "nonblock", "exhaustive", "speculative", "mixed")

BODY = r"""
LoadModule mm_reader_module {reader}
mrubyInputFilterNamedCode upcase "f = Apache::Filter.new; f.data = f.data.upcase"

<Location /upcase>
    SetHandler mm-reader
    SetInputFilter mruby
    mrubyInputFilterCode "f = Apache::Filter.new; f.data = f.data.upcase"
</Location>
<Location /named>
    SetHandler mm-reader
    SetInputFilter upcase
</Location>
<Location /split>
    SetHandler mm-reader
    SetInputFilter mruby
    mrubyInputFilterCode "f = Apache::Filter.new; f.data = f.data.tr(';', %Q(\n))"
</Location>
<Location /join>
    SetHandler mm-reader
    SetInputFilter mruby
    mrubyInputFilterCode "f = Apache::Filter.new; f.data = f.data.delete(%Q(\n))"
</Location>
<Location /hold>
    SetHandler mm-reader
    SetInputFilter mruby
    mrubyInputFilter {root}/scripts/hold.rb
</Location>
<Location /refuse>
    SetHandler mm-reader
    SetInputFilter mruby
    mrubyInputFilterCode "Apache::Filter.new.error_create Apache::HTTP_REQUEST_ENTITY_TOO_LARGE"
</Location>
"""

FILES = {
    # Hands up nothing before the end of the body, then all of it.
    "scripts/hold.rb": (
        "f = Apache::Filter.new\n"
        "f.ctx[:kept] = (f.ctx[:kept] || '') + f.data\n"
        "f.data = f.eos? ? f.ctx[:kept].upcase : ''\n"
    ),
}


@pytest.fixture(scope="module")
def reader(tmp_path_factory):
    if not os.access(APXS, os.X_OK):
        pytest.skip("no apxs at %s (Debian's apache2-dev): the C reader cannot be built" % APXS)
    src = os.path.join(ROOT, "test", "mod_mm_reader.c")
    build = tmp_path_factory.mktemp("mm-reader")
    so = build_module(APXS, src, str(build))
    yield so
    shutil.rmtree(str(build), ignore_errors=True)


@pytest.fixture(scope="module", params=MPMS)
def srv(request, reader):
    s = Httpd("inmodes", request.param, BODY.replace("{reader}", reader), files=FILES,
              log_level="warn mruby:info")
    s.start()
    yield s
    s.stop()
    s.cleanup()


def unescape(s):
    out, i = [], 0
    while i < len(s):
        if s[i] == "\\":
            out.append({"n": "\n", "r": "\r", "\\": "\\"}[s[i + 1]])
            i += 2
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


class Reads:
    """The reader's records: (kind, status, eos, data) for each read, and
    ("eagain", None, False, "") for each non-blocking read that waited."""

    def __init__(self, resp):
        assert resp.status == 200, resp
        self.records = []
        for line in resp.body.decode().split("\n")[:-1]:
            if line == "eagain":
                self.records.append(("eagain", None, False, ""))
                continue
            kind, status, eos, data = line.split(" ", 3)
            self.records.append((kind, int(status), eos == "1", unescape(data)))

    def of(self, *kinds):
        return [r for r in self.records if r[0] in kinds]

    @property
    def body(self):
        """What the reads that consume (all but the peeks) got."""
        return "".join(r[3] for r in self.of("read", "line", "all"))

    @property
    def lines(self):
        return [r[3] for r in self.of("line") if r[3]]


def read(srv, path, mode, body, n=None, chunked=False):
    url = "%s?mode=%s%s" % (path, mode, "&n=%d" % n if n else "")
    if chunked:
        return Reads(srv.post_chunked(url, body))
    return Reads(srv.request("POST", url, body=body))


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_reads_the_transformed_body(srv, mode):
    for path in ("/upcase", "/named"):
        for _ in range(2):
            reads = read(srv, path, mode, b"hello\nworld\nthe end")
            assert reads.body == "HELLO\nWORLD\nTHE END"
            assert reads.of("read", "line", "all")[-1][2], "the last read has the EOS"
            assert all(r[1] == 0 for r in reads.of("read", "line", "all"))


@pytest.mark.parametrize("mode", MODES)
def test_a_chunked_body_the_script_holds_to_its_end(srv, mode):
    reads = read(srv, "/hold", mode, [b"abc;", b"def\n" * 3000, b"gh"], chunked=True)
    assert reads.body == "ABC;" + "DEF\n" * 3000 + "GH"


def test_line_reads_end_where_the_script_put_line_ends(srv):
    reads = read(srv, "/split", "getline", b"a;bc;\nd;e")
    assert reads.lines == ["a\n", "bc\n", "\n", "d\n", "e"]
    assert [r[2] for r in reads.of("line")] == [False] * 4 + [True]
    reads = read(srv, "/join", "getline", b"one\ntwo\nthree\n")
    assert reads.of("line") == [("line", 0, True, "onetwothree")]


def test_lines_do_not_depend_on_the_client_chunks(srv):
    chunks = [b"ab;c", b"d;", b"ef", b"\ngh;", b"ij\nk"]
    for mode in ("getline", "nonblock"):
        reads = read(srv, "/split", mode, chunks, chunked=True)
        assert reads.lines == ["ab\n", "cd\n", "ef\n", "gh\n", "ij\n", "k"]


def test_a_line_longer_than_httpd_reads_comes_in_pieces(srv):
    # httpd's core filter hands a line up in pieces of HUGE_STRING_LEN
    # (8192) bytes at most.
    body = b"x" * 20000 + b"\ny"
    reads = read(srv, "/upcase", "getline", body)
    assert [len(s) for s in reads.lines] == [8192, 8192, 3617, 1]
    assert "".join(reads.lines) == body.decode().upper()


def test_a_peek_gets_what_the_next_read_gets(srv):
    for path, body, chunked in (("/upcase", b"hello world", False),
                                ("/hold", [b"hello", b" world"], True)):
        reads = read(srv, path, "speculative", body, n=5, chunked=chunked)
        first, again, last = reads.of("peek")
        assert first == again == ("peek", 0, False, "HELLO")
        assert reads.body == "HELLO WORLD"
        # the body read, a peek gets no EOS but APR_EOF, as from httpd's core
        assert last == ("peek", APR_EOF, False, "")


def test_a_peek_larger_than_the_body_gets_no_eos(srv):
    reads = read(srv, "/upcase", "speculative", b"tiny", n=1000)
    assert reads.of("peek")[:2] == [("peek", 0, False, "TINY")] * 2
    assert reads.body == "TINY"


def test_a_peek_then_a_line_then_bytes(srv):
    reads = read(srv, "/split", "mixed", b"abc;def;ghi", n=3)
    assert reads.records[:2] == [("peek", 0, False, "abc"), ("line", 0, False, "abc\n")]
    assert reads.body == "abc\ndef\nghi"
    assert reads.records[-1][2]


def test_an_exhaustive_read_gets_everything_at_once(srv):
    body = b"line;" * 10000
    reads = read(srv, "/split", "exhaustive", body)
    assert reads.records == [("all", 0, True, "line\n" * 10000)]


def paused(chunks, pause=0.4):
    """The chunks of a chunked body, with a pause before each after the
    first (http.client sends each as it comes)."""
    for i, chunk in enumerate(chunks):
        if i:
            time.sleep(pause)
        yield chunk


def test_a_non_blocking_line_read_waits_for_the_whole_line(srv):
    reads = Reads(srv.post_chunked("/upcase?mode=nonblock", paused([b"abc", b"def\nghi"])))
    # a partial line is never handed up: the reader is told to come back
    assert reads.lines == ["ABCDEF\n", "GHI"]
    assert reads.records.index(("eagain", None, False, "")) < reads.records.index(
        ("line", 0, False, "ABCDEF\n"))


@pytest.mark.parametrize("mode", MODES)
def test_a_refused_body_is_413_in_every_mode(srv, mode):
    refusal = r"MRB00521: .*refused the request body of /refuse with 413"
    before = len(srv.log_lines(refusal))
    for chunked in (False, True):
        url = "/refuse?mode=%s&n=4" % mode
        if chunked:
            r = srv.post_chunked(url, [b"secret", b" data\n"])
        else:
            r = srv.request("POST", url, body=b"secret data\n")
        assert r.status == 413
        assert b"secret" not in r.body and b"SECRET" not in r.body
    srv.wait_log(refusal, count=before + 2)
