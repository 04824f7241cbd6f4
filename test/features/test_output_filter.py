"""Output filters in Ruby: the `mruby` filter of a section and named ones,
in buffer mode (the whole response, mod_mruby's API) and stream mode (one
run per chunk, state in Filter#ctx); headers fixed up when the body
changes; failures before and after the response began; with mod_include
before and mod_deflate after; reached through SetOutputFilter,
AddOutputFilterByType and mod_filter's FilterProvider."""

import concurrent.futures
import gzip
import http.client
import os
import re
import socket
import time

import pytest

from httpd import module_httpd

BODY = r"""
<Directory {docroot}>
    Require all granted
</Directory>
CustomLog "{root}/logs/filter.log" "%U %{mm_runs}n %{mm_bytes}n"

# Named filters exist for the whole server, before any section uses them.
mrubyOutputFilterNamed shout {root}/scripts/shout.rb
mrubyOutputFilterNamedCode brackets "f = Apache::Filter.new; f.body = '[' + f.body + ']'"
mrubyOutputFilterNamed count {root}/scripts/count.rb stream
mrubyOutputFilterNamed frame {root}/scripts/frame.rb cache stream
mrubyOutputFilterNamed late_failure {root}/scripts/late_failure.rb stream
mrubyOutputFilterNamedCode cut "f = Apache::Filter.new; f.data = f.data.byteslice(0, 5); f.insert_eos; f.insert_tail '<end>' if f.eos?" stream
mrubyOutputFilterNamedCode churn "f = Apache::Filter.new; a = []; 3000.times { |i| a << i.to_s }; GC.start; return unless f.eos?; f.insert_tail 'end'" stream

<Location /upper>
    SetOutputFilter mruby
    mrubyOutputFilterCode "f = Apache::Filter.new; f.body = f.body.upcase"
</Location>
<Location /peek>
    SetOutputFilter mruby
    mrubyOutputFilterCode "Apache::Request.new.err_headers_out['X-Seen'] = Apache::Filter.new.length.to_s"
</Location>
<Location /compat>
    SetOutputFilter mruby
    mrubyOutputFilter {root}/scripts/compat.rb
</Location>
<Location /error>
    SetOutputFilter mruby
    mrubyOutputFilterCode "Apache::Filter.new.error_create Apache::HTTP_SERVICE_UNAVAILABLE"
</Location>
<Location /error/doc>
    ErrorDocument 503 "the filter said no"
</Location>
<Location /bad_status>
    SetOutputFilter mruby
    mrubyOutputFilterCode "Apache::Filter.new.error_create 2**32 + 503"
</Location>
<Location /returned>
    SetOutputFilter mruby
    mrubyOutputFilterCode "Apache.return Apache::HTTP_FORBIDDEN"
</Location>
<Location /odd>
    SetOutputFilter mruby
    mrubyOutputFilterCode "Apache.return 7"
</Location>
<Location /raise>
    SetOutputFilter mruby
    mrubyOutputFilterCode "raise ArgumentError, 'bad filter'"
</Location>
<Location /rputs>
    SetOutputFilter mruby
    mrubyOutputFilterCode "Apache.rputs 'never shown'"
</Location>
<Location /none>
    SetOutputFilter mruby
</Location>
<Location /owner>
    SetOutputFilter mruby
    mrubyOutputFilterCode "f = Apache::Filter.new; f.body = [f.uid, f.gid].inspect"
</Location>
<Location /owner/made>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'made'"
</Location>
<Location /named>
    SetOutputFilter shout;brackets
</Location>
<Location /stream>
    SetOutputFilter count
</Location>
<Location /frame>
    SetOutputFilter frame
</Location>
<Location /cut>
    SetOutputFilter cut
</Location>
<Location /late>
    SetOutputFilter late_failure
</Location>
<Directory {docroot}/cgi>
    Options +ExecCGI
    AddHandler cgi-script .cgi
    SetOutputFilter count
</Directory>
<Directory {docroot}/cgiplain>
    Options +ExecCGI
    AddHandler cgi-script .cgi
</Directory>
<Directory {docroot}/cgi/bracketed>
    SetOutputFilter brackets
</Directory>
<Directory {docroot}/cgi/framed>
    SetOutputFilter frame
</Directory>
<Location /gz>
    SetOutputFilter mruby;DEFLATE
    mrubyOutputFilterCode "f = Apache::Filter.new; f.data = f.data.upcase" stream
</Location>
<Location /ssi>
    Options +Includes
    AddOutputFilter INCLUDES .shtml
    AddOutputFilterByType mruby text/html
    mrubyOutputFilterCode "f = Apache::Filter.new; f.body = f.body.upcase + '<!-- filtered once -->'"
</Location>
<Location /bytype>
    AddOutputFilterByType mruby text/html
    mrubyOutputFilterCode "f = Apache::Filter.new; f.body = '<!-- html only -->' + f.body"
</Location>
<Location /provider>
    FilterDeclare rubyhtml
    FilterProvider rubyhtml shout "%{CONTENT_TYPE} =~ m#^text/html#"
    FilterChain rubyhtml
</Location>
<Location /provider-section>
    FilterDeclare rubysection
    FilterProvider rubysection mruby "%{CONTENT_TYPE} =~ m#^text/plain#"
    FilterChain rubysection
    mrubyOutputFilterCode "f = Apache::Filter.new; f.data = '<' + f.data + '>'" stream
</Location>
<Location /handler-fail>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'handler output ' * 2000"
    SetOutputFilter mruby
    mrubyOutputFilterCode "raise 'filter of a Ruby handler failed'"
</Location>
<Location /handler-raise-late>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'handler output ' * 2000; raise 'handler failed after writing'"
    SetOutputFilter mruby
    mrubyOutputFilterCode "f = Apache::Filter.new; f.body = f.body.upcase"
</Location>
<Location /handler-late>
    SetHandler mruby-native-script
    mrubyHandlerCode "30.times { Apache.rputs 'x' * 10000 }; Apache.rputs 'end'"
    SetOutputFilter late_failure
</Location>
<Location /bigwrites>
    SetHandler mruby-native-script
    mrubyHandlerCode "3.times { |i| Apache.rputs i.to_s * 70000 }"
    SetOutputFilter churn
</Location>
<Location /sleeper>
    SetHandler mruby-native-script
    mrubyHandlerCode "3.times { |i| Apache.rputs i.to_s * 70000; Apache::Async.sleep 20 }"
    SetOutputFilter frame
</Location>
<Location /head-aware>
    SetHandler mruby-native-script
    mrubyHandlerCode "r = Apache::Request.new; r.headers_out['Content-Length'] = '12'; Apache.rputs 'hello world' + 10.chr unless r.method == 'HEAD'"
</Location>
<Location /head-aware/bracketed>
    SetOutputFilter brackets
</Location>
<Location /head-aware/framed>
    SetOutputFilter frame
</Location>
<Location /handler>
    SetHandler mruby-native-script
    mrubyHandlerCode "n = (Apache::Request.new.args || '3').to_i; n.times { |i| Apache.rputs 'line ' + i.to_s + 10.chr }"
    SetOutputFilter mruby
    mrubyOutputFilterCode "f = Apache::Filter.new; f.body = f.body.gsub('line', 'LINE')"
</Location>
"""

HEAD_CGI = (
    "#!/bin/sh\n"
    "printf 'Content-Type: text/plain\\r\\nContent-Length: 12\\r\\n\\r\\n'\n"
    "[ \"$REQUEST_METHOD\" = HEAD ] || echo 'hello world'\n"
)

FILES = {
    "scripts/shout.rb": "f = Apache::Filter.new\nf.body = f.body.upcase\n",
    # mod_mruby's own example, unchanged.
    "scripts/compat.rb": (
        "f = Apache::Filter.new\n"
        "data = f.flatten\n"
        "f.cleanup\n"
        "f.puts 'puts-'\n"
        "f.insert_tail data.upcase\n"
        "f.insert_tail '-tail'\n"
        "f.insert_head 'head-'\n"
        "f.insert_eos\n"
    ),
    # Stream mode, body untouched; the totals go to the access log.
    "scripts/count.rb": (
        "f = Apache::Filter.new\n"
        "c = f.ctx\n"
        "c[:runs] = (c[:runs] || 0) + 1\n"
        "c[:bytes] = (c[:bytes] || 0) + f.data.bytesize\n"
        "if f.eos?\n"
        "  n = Apache::Request.new.notes\n"
        "  n['mm_runs'] = c[:runs].to_s\n"
        "  n['mm_bytes'] = c[:bytes].to_s\n"
        "end\n"
    ),
    # Stream mode, binary framing: a head once, a tail with the run count.
    "scripts/frame.rb": (
        "f = Apache::Filter.new\n"
        "f.ctx[:runs] = (f.ctx[:runs] || 0) + 1\n"
        "f.insert_head \"\\x00\\xff<\" if f.first?\n"
        "f.insert_tail \">\\x00#{f.ctx[:runs]}\" if f.eos?\n"
    ),
    "scripts/late_failure.rb": (
        "f = Apache::Filter.new\n"
        "raise 'second chunk refused' unless f.first?\n"
    ),
    "htdocs/upper/a.txt": "hello filter\n",
    "htdocs/peek/a.txt": "twelve bytes",
    "htdocs/compat/a.txt": "hello\n",
    "htdocs/error/a.txt": "never shown\n",
    "htdocs/error/doc/a.txt": "never shown\n",
    "htdocs/bad_status/a.txt": "never shown\n",
    "htdocs/returned/a.txt": "never shown\n",
    "htdocs/raise/a.txt": "never shown\n",
    "htdocs/odd/a.txt": "never shown\n",
    "htdocs/rputs/a.txt": "never shown\n",
    "htdocs/none/a.txt": "as it is\n",
    "htdocs/named/a.txt": "named\n",
    "htdocs/owner/a.txt": "owned\n",
    "htdocs/stream/small.txt": "0123456789",
    "htdocs/stream/big.bin": bytes(range(256)) * 1000,
    "htdocs/frame/bin.dat": bytes(range(256)) * 1024,
    "htdocs/late/big.txt": "z" * 300000,
    "htdocs/cut/big.txt": "0123456789" * 30000,
    # Writes a line, then waits (10 s at most) for the client to create
    # out/go-QUERY before it writes the rest.
    "htdocs/cgi/slow.cgi": (
        "#!/bin/sh\n"
        "printf 'Content-Type: text/plain\\r\\n\\r\\n'\n"
        "echo first\n"
        "i=0\n"
        "while [ ! -e \"$DOCUMENT_ROOT/../out/go-$QUERY_STRING\" ] && [ $i -lt 100 ]; do\n"
        "  sleep 0.1; i=$((i + 1))\n"
        "done\n"
        "echo second\n"
    ),
    # Answers HEAD with its headers only.
    "htdocs/cgi/bracketed/head.cgi": HEAD_CGI,
    "htdocs/cgi/framed/head.cgi": HEAD_CGI,
    "htdocs/cgiplain/head.cgi": HEAD_CGI,
    "htdocs/gz/a.txt": "compress me " * 5000,
    "htdocs/ssi/page.shtml": '<p>top</p><!--#include virtual="/ssi/part.html" --><p>bottom</p>',
    "htdocs/ssi/part.html": "<b>included</b>",
    "htdocs/bytype/a.html": "<p>page</p>",
    "htdocs/bytype/a.txt": "text",
    "htdocs/provider/a.html": "<p>page</p>",
    "htdocs/provider/a.txt": "text",
    "htdocs/provider-section/a.txt": "plain",
    "htdocs/provider-section/a.html": "<p>html</p>",
}

MODULES = ("deflate", "include", "filter", "headers", "cgid")

srv = module_httpd("outfilter", BODY, files=FILES, modules=MODULES)


def access_line(srv, uri, count=1):
    """The last of the first `count` access log lines for uri: httpd
    writes them after the response, so they may come a moment later."""
    deadline = time.time() + 10
    while True:
        with open(srv.path("logs/filter.log")) as f:
            lines = [line.split() for line in f if line.startswith(uri + " ")]
        if len(lines) >= count or time.time() > deadline:
            break
        time.sleep(0.05)
    assert len(lines) >= count, "no access log line %d for %s" % (count, uri)
    return lines[count - 1]


def test_buffer_mode_rewrites_the_body_and_fixes_the_headers(srv):
    for _ in range(2):
        r = srv.get("/upper/a.txt")
        assert r.status == 200
        assert r.body == b"HELLO FILTER\n"
        assert r.headers["Content-Length"] == "13"
        assert r.headers.get("ETag") is None


def test_a_filter_that_only_reads_keeps_length_and_etag(srv):
    r = srv.get("/peek/a.txt")
    assert r.status == 200
    assert r.body == b"twelve bytes"
    assert r.headers["X-Seen"] == "12"
    assert r.headers["Content-Length"] == "12"
    assert r.headers.get("ETag")


def test_uid_and_gid_name_the_owner_of_the_file_served(srv):
    st = os.stat(os.path.join(srv.docroot, "owner/a.txt"))
    assert srv.get("/owner/a.txt").text == "[%d, %d]" % (st.st_uid, st.st_gid)
    # a response made by a handler comes from no file
    assert srv.get("/owner/made").text == "[nil, nil]"


def test_mod_mruby_head_tail_example_runs_unchanged(srv):
    r = srv.get("/compat/a.txt")
    assert r.status == 200
    assert r.body == b"head-puts-HELLO\n-tail"
    assert r.headers["Content-Length"] == str(len(r.body))


@pytest.mark.parametrize("path, status, log", [
    # error_create: httpd's own error page for the status
    ("/error/a.txt", 503, None),
    ("/returned/a.txt", 403, None),
    ("/raise/a.txt", 500,
     r"MRB00030: OutputFilter script .*httpd\.conf:\d+ raised ArgumentError .*bad filter"),
    # the status as given, not cut to 32 bits (which read 503)
    ("/bad_status/a.txt", 500,
     r"MRB00030: OutputFilter script .* raised ArgumentError .*4294967799 is not an HTTP error status \(400\.\.599\)"),
    ("/odd/a.txt", 500,
     r"MRB00500: OutputFilter mruby \(.*httpd\.conf:\d+\): Apache\.return\(7\) means nothing to a filter"),
    ("/rputs/a.txt", 500,
     r"MRB00030: OutputFilter .*Apache\.rputs cannot be used in a OutputFilter script"),
])
def test_failure_before_anything_was_sent_is_an_error_page(srv, path, status, log):
    r, _ = srv.expect(path, status, log)
    assert r.headers["Content-Type"].startswith("text/html")
    assert b"never shown" not in r.body and b"bad filter" not in r.body


@pytest.mark.parametrize("path, status, body", [
    # ErrorDocument applies to error_create's status
    ("/error/doc/a.txt", 503, b"the filter said no"),
    # SetOutputFilter shout;brackets: in that order
    ("/named/a.txt", 200, b"[NAMED\n]"),
    # behind mod_include: the whole page, included part and all, once
    ("/ssi/page.shtml", 200, b"<P>TOP</P><B>INCLUDED</B><P>BOTTOM</P><!-- filtered once -->"),
    # AddOutputFilterByType mruby text/html
    ("/bytype/a.html", 200, b"<!-- html only --><p>page</p>"),
    ("/bytype/a.txt", 200, b"text"),
    # a named filter as mod_filter's provider, for HTML only
    ("/provider/a.html", 200, b"<P>PAGE</P>"),
    ("/provider/a.txt", 200, b"text"),
    # the section's filter as mod_filter's provider, for plain text only
    ("/provider-section/a.txt", 200, b"<plain>"),
    ("/provider-section/a.html", 200, b"<p>html</p>"),
])
def test_where_filters_apply(srv, path, status, body):
    r = srv.get(path)
    assert r.status == status
    assert r.body == body


def test_mruby_filter_without_a_script_passes_and_warns(srv):
    r, _ = srv.expect("/none/a.txt", 200, r"MRB00510: .*/none/a\.txt.*no mrubyOutputFilter applies")
    assert r.body == b"as it is\n"


def test_stream_mode_small_response_keeps_its_length(srv):
    r = srv.get("/stream/small.txt")
    assert r.status == 200
    assert r.body == b"0123456789"
    assert r.headers["Content-Length"] == "10"
    assert r.headers.get("ETag")
    assert access_line(srv, "/stream/small.txt")[1:] == ["1", "10"]


def test_stream_mode_sees_each_chunk_once_with_state_per_request(srv):
    expected = bytes(range(256)) * 1000
    for i in range(2):  # state must not leak from one request to the next
        r = srv.get("/stream/big.bin")
        assert r.status == 200
        assert r.body == expected
        # The headers went with the first chunk, when later ones could
        # still change: no length, no ETag, though the script only reads.
        assert r.headers.get("Content-Length") is None
        assert r.headers.get("ETag") is None
        runs, nbytes = access_line(srv, "/stream/big.bin", i + 1)[1:]
        assert nbytes == str(len(expected))
        assert int(runs) == -(-len(expected) // 65536)  # 64 KB chunks


def test_stream_mode_is_binary_safe_and_runs_head_and_tail_once(srv):
    data = bytes(range(256)) * 1024
    r = srv.get("/frame/bin.dat")
    assert r.status == 200
    runs = -(-len(data) // 65536)
    assert r.body == b"\x00\xff<" + data + b">\x00" + str(runs).encode()


def test_stream_mode_passes_what_came_while_the_rest_is_awaited(srv):
    # A CGI's output arrives as it is written: the filter runs over what
    # came and sends it on, instead of holding it until 64 KB or the end.
    os.chmod(srv.path("htdocs/cgi/slow.cgi"), 0o755)
    for i in range(2):
        token = "%s-%d" % (srv.mpm, i)
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
        try:
            conn.request("GET", "/cgi/slow.cgi?" + token)
            resp = conn.getresponse()
            assert resp.status == 200
            assert resp.read(6) == b"first\n"  # before the CGI ends
            with open(srv.path("out/go-" + token), "w"):
                pass
            assert resp.read() == b"second\n"
        finally:
            conn.close()
        assert int(access_line(srv, "/cgi/slow.cgi", i + 1)[1]) >= 2  # one run per piece


@pytest.mark.parametrize("path, plain, get_body", [
    # a Ruby handler that sets the length and writes nothing for HEAD
    ("/head-aware/bracketed", "/head-aware/plain", b"[hello world\n]"),  # buffer mode
    ("/head-aware/framed", "/head-aware/plain", None),  # stream mode
    # a CGI that writes no body for HEAD (httpd drops its length then)
    ("/cgi/bracketed/head.cgi", "/cgiplain/head.cgi", b"[hello world\n]"),
    ("/cgi/framed/head.cgi", "/cgiplain/head.cgi", None),
])
def test_head_answered_without_a_body_is_not_filtered(srv, path, plain, get_body):
    # The script would make a body out of nothing ('[]', a frame around
    # no data), and its length replaced the handler's. As httpd's own
    # filters do, the filter steps aside: HEAD gets the headers it gets
    # without the filter.
    for p in (path, plain):
        if p.endswith(".cgi"):
            os.chmod(srv.path("htdocs" + p), 0o755)
    expected = srv.request("HEAD", plain).headers.get("Content-Length")
    if not plain.endswith(".cgi"):
        assert expected == "12"
    for _ in range(2):
        get = srv.get(path)
        assert get.status == 200
        if get_body is not None:
            assert get.body == get_body
            assert get.headers["Content-Length"] == str(len(get_body))
        else:
            assert get.body.startswith(b"\x00\xff<hello world\n>\x00")
        head = srv.request("HEAD", path)
        assert head.status == 200
        assert head.headers.get("Content-Length") == expected


def test_eos_is_true_once_the_script_ended_the_body(srv):
    # The first of several chunks: insert_eos ends the body after this
    # run's data, which is what eos? tells, so the tail is added.
    for _ in range(2):
        r = srv.get("/cut/big.txt")
        assert r.status == 200
        assert r.body == b"01234<end>"
        assert r.headers["Content-Length"] == "10"


def test_head_of_a_static_file_is_filtered_as_get(srv):
    # The default handler sends the body for HEAD too: the script runs
    # over it, and HEAD gets the length GET gets.
    head = srv.request("HEAD", "/upper/a.txt")
    assert head.status == 200
    assert head.headers["Content-Length"] == "13"
    assert head.headers.get("ETag") is None


def assert_cut_short(srv, path):
    """The response begins (200, the first chunk) and never completes."""
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        assert resp.status == 200
        with pytest.raises((http.client.IncompleteRead, ConnectionError, socket.timeout)):
            resp.read()
    finally:
        conn.close()


def test_failure_after_the_response_began_cuts_the_connection(srv):
    assert_cut_short(srv, "/late/big.txt")
    srv.wait_log(r"MRB00030: OutputFilter script .*late_failure\.rb raised RuntimeError .*second chunk refused")
    srv.wait_log(r"MRB00511: output filter late_failure .* after the response to /late/big.txt began: "
                 r"connection aborted")


def test_stream_filter_in_front_of_mod_deflate(srv):
    r = srv.get("/gz/a.txt", headers={"Accept-Encoding": "gzip"})
    assert r.status == 200
    assert r.headers["Content-Encoding"] == "gzip"
    assert gzip.decompress(r.body) == b"COMPRESS ME " * 5000
    plain = srv.get("/gz/a.txt")
    assert plain.headers.get("Content-Encoding") is None
    assert plain.body == b"COMPRESS ME " * 5000


def test_one_end_of_stream_per_response_on_a_kept_alive_connection(srv):
    # A second EOS would end the chunked body twice, or send bytes past a
    # Content-Length: the next response on the connection would not parse.
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
    try:
        for path, body in (("/compat/a.txt", b"head-puts-HELLO\n-tail"), ("/frame/bin.dat", None),
                           ("/compat/a.txt", b"head-puts-HELLO\n-tail"), ("/upper/a.txt", b"HELLO FILTER\n"),
                           ("/stream/big.bin", bytes(range(256)) * 1000), ("/upper/a.txt", b"HELLO FILTER\n")):
            conn.request("GET", path)
            resp = conn.getresponse()
            data = resp.read()
            assert resp.status == 200
            assert resp.getheader("Connection") != "close"
            if body is not None:
                assert data == body
            else:
                assert data.endswith(b">\x004")
    finally:
        conn.close()


def test_a_ruby_handlers_output_through_a_ruby_filter(srv):
    small = srv.get("/handler?3")
    assert small.status == 200
    assert small.body == b"LINE 0\nLINE 1\nLINE 2\n"
    assert small.headers["Content-Length"] == str(len(small.body))
    big = srv.get("/handler?5000")  # flushed down in 8 KB pieces, buffered by the filter
    assert big.status == 200
    lines = big.body.decode().splitlines()
    assert len(lines) == 5000 and lines[0] == "LINE 0" and lines[-1] == "LINE 4999"
    assert not re.search(r"\bline\b", big.body.decode())


def test_a_failing_filter_of_a_ruby_handler_is_a_500(srv):
    r, _ = srv.expect("/handler-fail", 500, r"MRB00030: OutputFilter script .* raised RuntimeError "
                                            r".*filter of a Ruby handler failed")
    assert b"handler output" not in r.body
    assert srv.get("/handler?2").body == b"LINE 0\nLINE 1\n"  # the thread's VM serves on


def test_a_handler_failing_after_writing_into_a_buffering_filter_is_a_500(srv):
    # 28 KB went down the chain before the exception, but the filter held
    # it all: no status line went out, so httpd's error page can still
    # answer (the connection was closed with no response at all).
    for _ in range(2):
        r = srv.get("/handler-raise-late")
        assert r.status == 500
        assert b"HANDLER OUTPUT" not in r.body and b"handler output" not in r.body
    srv.wait_log(r"MRB00030: Handler script .* raised RuntimeError .*handler failed after writing")
    assert srv.get("/handler?2").body == b"LINE 0\nLINE 1\n"


def test_a_stream_filter_failing_late_on_a_ruby_handlers_output(srv):
    assert_cut_short(srv, "/handler-late")
    srv.wait_log(r"MRB00511: output filter late_failure .* after the response to /handler-late began")
    assert srv.get("/handler?1").body == b"LINE 0\n"


def test_many_clients_each_get_their_own_filtered_response(srv):
    big = bytes(range(256)) * 1000
    framed = b"\x00\xff<" + bytes(range(256)) * 1024 + b">\x004"

    def client(n):
        wrong = []
        for i in range(12):
            lines = (n * 7 + i) % 50 + 1
            for path, expected in (("/stream/big.bin", big), ("/frame/bin.dat", framed),
                                   ("/handler?%d" % lines,
                                    "".join("LINE %d\n" % k for k in range(lines)).encode())):
                r = srv.get(path)
                if r.status != 200 or r.body != expected:
                    wrong.append((path, r.status, len(r.body)))
        return wrong

    errors_before = srv.error_log().count("[mruby:error]")
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        wrong = [w for ws in pool.map(client, range(16)) for w in ws]
    assert wrong == []
    assert srv.error_log().count("[mruby:error]") == errors_before


def test_stream_filter_state_survives_a_handler_that_sleeps(srv):
    # Under the event MPM the handler's script sleeps without its thread and
    # resumes on any: the filter's runs and their ctx follow it.
    for _ in range(2):
        r = srv.get("/sleeper")
        assert r.status == 200
        body = b"".join(str(i).encode() * 70000 for i in range(3))
        assert r.body.startswith(b"\x00\xff<" + body + b">\x00")
        runs = int(r.body[len(body) + 5:])
        assert runs >= 4  # at least one per 64 KB, and the end


def test_a_filter_collecting_garbage_under_a_handlers_large_writes(srv):
    # Each 70 KB write goes down the chain as it is written, pointing into
    # the handler's String, while the filter's script runs and collects
    # garbage: the String must survive it. The filter's top-level return
    # ends only its own script.
    r = srv.get("/bigwrites")
    assert r.status == 200
    assert r.body == b"".join(str(i).encode() * 70000 for i in range(3)) + b"end"
