"""Input filters in Ruby: the request body transformed chunk by chunk
before the handler reads it (mod_reflector, a Ruby handler) or mod_proxy
forwards it (to a second httpd that echoes it back), refused with 413 or
400, cut short with insert_eos, with state across chunks in Filter#ctx."""

import concurrent.futures
import http.client
import time
import uuid

import pytest

from httpd import MPMS, Httpd

# The backend echoes what it receives, with the length it was told.
BACKEND = r"""
<Location /echo>
    SetHandler reflector
</Location>
"""

FRONT = r"""
mrubyInputFilterNamed double_a {root}/scripts/double_a.rb
mrubyInputFilterNamedCode upcase "f = Apache::Filter.new; f.data = f.data.upcase"
mrubyInputFilterNamed guard {root}/scripts/guard.rb cache

<Location /echo>
    SetHandler reflector
    SetInputFilter mruby
    mrubyInputFilterCode "f = Apache::Filter.new; f.data = f.data.upcase"
</Location>
<Location /count>
    SetHandler reflector
    SetInputFilter mruby
    mrubyInputFilter {root}/scripts/count.rb
</Location>
<Location /first10>
    SetHandler reflector
    SetInputFilter mruby
    mrubyInputFilterCode "f = Apache::Filter.new; d = f.data; if d.bytesize >= 10 then f.data = d.byteslice(0, 10); f.insert_eos end"
</Location>
<Location /guarded>
    SetHandler reflector
    SetInputFilter guard
</Location>
<Location /raise>
    SetHandler reflector
    SetInputFilter mruby
    mrubyInputFilterCode "raise 'input filter bug'"
</Location>
<Location /raise-under-handler>
    SetInputFilter mruby
    mrubyInputFilterCode "raise 'filter bug under a handler'"
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'got: ' + Apache::Request.new.body.to_s"
</Location>
<Location /refuse-under-handler>
    SetInputFilter mruby
    mrubyInputFilterCode "Apache::Filter.new.error_create 403"
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'got: ' + Apache::Request.new.body.to_s"
</Location>
<Location /no-script>
    SetHandler reflector
    SetInputFilter mruby
</Location>
<Location /refuse-all>
    SetInputFilter mruby
    mrubyInputFilterCode "Apache::Filter.new.error_create 403"
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'no body, no filter'"
</Location>
<Location /proxy>
    SetInputFilter double_a
    ProxyPass http://127.0.0.1:{backend}/echo
</Location>
<Location /proxy-after-ruby>
    mrubyAccessCheckerCode "r = Apache::Request.new; r.err_headers_out['X-Ruby-Saw'] = r.body"
    SetInputFilter double_a
    ProxyPass http://127.0.0.1:{backend}/echo
</Location>
<Location /proxy-upcase>
    SetInputFilter upcase
    ProxyPass http://127.0.0.1:{backend}/echo
</Location>
<Location /proxy-guarded>
    SetInputFilter guard
    ProxyPass http://127.0.0.1:{backend}/echo
</Location>
<Location /proxy-guarded/doc>
    ErrorDocument 413 "body too large for the guard"
</Location>
<Location /read-then-redirect>
    SetInputFilter upcase
    SetHandler mruby-native-script
    mrubyHandlerCode "r = Apache::Request.new; r.body; r.internal_redirect '/plain-echo'"
</Location>
<Location /peek-then-redirect>
    SetInputFilter upcase
    SetHandler mruby-native-script
    mrubyHandlerCode "r = Apache::Request.new; r.input.read(4); r.internal_redirect '/plain-echo'"
</Location>
<Location /plain-echo>
    SetHandler reflector
</Location>
<Location /ruby>
    SetInputFilter upcase
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'handler got: ' + Apache::Request.new.body"
</Location>
"""

FILES = {
    # Each "a" becomes "aa": the body grows, whatever the chunk boundaries.
    "scripts/double_a.rb": "f = Apache::Filter.new\nf.data = f.data.gsub('a', 'aa')\n",
    "scripts/count.rb": (
        "f = Apache::Filter.new\n"
        "f.ctx[:bytes] = (f.ctx[:bytes] || 0) + f.length\n"
        "f.ctx[:runs] = (f.ctx[:runs] || 0) + 1\n"
        "f.insert_tail \"[#{f.ctx[:bytes]} bytes, first run first: #{f.ctx[:first]}]\" if f.eos?\n"
        "f.ctx[:first] = f.first? if f.ctx[:runs] == 1\n"
    ),
    "scripts/guard.rb": (
        "f = Apache::Filter.new\n"
        "d = f.data\n"
        "f.ctx[:bytes] = (f.ctx[:bytes] || 0) + d.bytesize\n"
        "if d.include?('DROP TABLE')\n"
        "  f.error_create Apache::HTTP_BAD_REQUEST\n"
        "elsif f.ctx[:bytes] > 100_000\n"
        "  f.error_create Apache::HTTP_REQUEST_ENTITY_TOO_LARGE\n"
        "end\n"
    ),
}


@pytest.fixture(scope="module", params=MPMS)
def servers(request):
    backend = Httpd("inback", request.param, BACKEND, modules=("reflector",))
    front = Httpd("infront", request.param, FRONT, files=FILES, log_level="warn mruby:info",
                  modules=("reflector", "proxy", "proxy_http"))
    front.body = front.body.replace("{backend}", str(backend.port))
    started = []
    try:
        for srv in (backend, front):
            srv.start()
            started.append(srv)
        yield front, backend
    finally:
        for srv in started:
            srv.stop()
        for srv in (backend, front):
            srv.cleanup()


@pytest.fixture
def front(servers):
    return servers[0]


def access_log(srv):
    with open(srv.path("logs/access.log")) as f:
        return f.read()


def test_rewrites_the_body_the_handler_reads(front):
    for _ in range(2):
        r = front.request("POST", "/echo", body=b"hello body")
        assert r.status == 200
        assert r.body == b"HELLO BODY"


def test_chunked_body_and_state_across_chunks(front):
    pieces = [b"x" * 5000] * 20
    r = front.post_chunked("/count", pieces)
    assert r.status == 200
    assert r.body == b"x" * 100000 + b"[100000 bytes, first run first: true]"


def test_insert_eos_cuts_the_body_and_closes_the_connection(front):
    r = front.post_chunked("/first10", [b"0123456789abcdef", b"more" * 1000])
    assert r.status == 200
    assert r.body == b"0123456789"
    assert r.headers["Connection"] == "close"


def test_error_create_refuses_the_body(front):
    r, _ = front.expect("/guarded/x", 400, r"MRB00521: input filter guard .*guard\.rb\) refused the request "
                                           r"body of /guarded/x with 400",
                        method="POST", body=b"name=x; DROP TABLE users")
    assert b"DROP TABLE" not in r.body
    assert r.headers["Connection"] == "close"


def test_too_large_a_body_is_413_before_mod_proxy_sends_anything(servers):
    # A body with a Content-Length is read whole by mod_proxy (an input
    # filter may change its length) before anything goes to the backend.
    front, backend = servers
    big = front.request("POST", "/proxy-guarded/doc", body=b"y" * 200000)
    assert big.status == 413
    assert big.body == b"body too large for the guard"
    small = front.request("POST", "/proxy-guarded/doc", body=b"y" * 1000)
    assert small.status == 200
    assert small.body == b"y" * 1000
    # Only the small one went through (logged once the answer is out).
    deadline = time.time() + 10
    while access_log(backend).count("POST /echo") < 1 and time.time() < deadline:
        time.sleep(0.05)
    assert access_log(backend).count("POST /echo") == 1


def test_refusal_after_the_response_began_truncates_it(front):
    # mod_reflector answers as it reads: the refusal comes too late for a
    # status, so the response is cut.
    with pytest.raises((http.client.IncompleteRead, ConnectionError)):
        front.post_chunked("/guarded/late", [b"y" * 10000] * 20)
    front.wait_log(r"MRB00521: input filter guard .* refused the request body of /guarded/late with 413")


def test_exception_refuses_the_body_with_500(front):
    r, _ = front.expect("/raise", 500, r"MRB00030: InputFilter script .*httpd\.conf:\d+ raised RuntimeError "
                                       r".*input filter bug", method="POST", body=b"data")
    assert b"data" not in r.body


def test_refusal_under_a_handler_is_one_error_entry(front):
    """A handler reading the body of a request its input filter refused
    stops with the Apache::HTTPError Request#body raises: the client has
    its answer already and the refusal (or the filter's exception) is
    logged where it happened, so the handler's entry is at info level,
    not a second error."""
    handler = (r"\[mruby:%s\].*MRB00030: Handler script .*httpd\.conf:\d+ raised Apache::HTTPError "
               r".*httpd refused the request body")
    before = len(front.log_lines(handler % "info"))
    r = front.request("POST", "/raise-under-handler", body=b"data")
    assert (r.status, b"got" in r.body) == (500, False)
    front.wait_log(r"\[mruby:error\].*MRB00030: InputFilter script .* raised RuntimeError .*filter bug under a handler")
    r = front.request("POST", "/refuse-under-handler", body=b"data")
    assert (r.status, b"got" in r.body) == (403, False)
    front.wait_log(r"MRB00521: input filter mruby .* refused the request body of /refuse-under-handler with 403")
    assert len(front.wait_log(handler % "info", count=before + 2)) == before + 2, front.error_log()[-3000:]
    assert front.log_lines(handler % "error") == []


def test_mod_proxy_forwards_the_rewritten_body(front):
    body = b"banana " * 50000  # 350 KB: several chunks, and spooled by mod_proxy
    r = front.request("POST", "/proxy", body=body)
    assert r.status == 200
    assert r.body == body.replace(b"a", b"aa")
    assert r.headers["Content-Length"] == str(len(body.replace(b"a", b"aa")))
    small = front.request("POST", "/proxy-upcase", body=b"small one")
    assert small.status == 200
    assert small.body == b"SMALL ONE"


def test_mod_proxy_never_forwards_a_refused_body(servers):
    front, backend = servers
    r = front.request("POST", "/proxy-guarded", body=b"1; DROP TABLE x")
    assert r.status == 400
    assert b"DROP TABLE" not in r.body
    assert "DROP" not in access_log(backend)


def test_a_body_ruby_read_early_still_goes_through_the_filter_to_mod_proxy(front):
    # Request#body in AccessChecker keeps the client's bytes; mod_proxy then
    # reads them again, through the input filter.
    r = front.request("POST", "/proxy-after-ruby", body=b"a banana")
    assert r.status == 200
    assert r.headers["X-Ruby-Saw"] == "a banana"
    assert r.body == b"aa baanaanaa"


def test_a_ruby_handler_reads_the_rewritten_body(front):

    r = front.request("POST", "/ruby", body=b"from the client")
    assert r.status == 200
    assert r.body == b"handler got: FROM THE CLIENT"


def test_a_body_ruby_read_through_the_filter_goes_on_after_an_internal_redirect(front):
    # The handler's script read the body through the section's input
    # filter: those bytes are gone from the client, so the redirected
    # request's reader (mod_reflector) must get them from what was kept,
    # then the rest through the same filter.
    for _ in range(2):
        r = front.request("POST", "/read-then-redirect", body=b"from the client")
        assert (r.status, r.body) == (200, b"FROM THE CLIENT")
    body = b"abcdefghij" * 30000  # 300 KB: the script read the first piece only
    r = front.request("POST", "/peek-then-redirect", body=body)
    assert r.status == 200
    assert r.body == body.upper()
    r = front.post_chunked("/peek-then-redirect", body)
    assert r.status == 200
    assert r.body == body.upper()


def test_many_clients_each_get_their_own_body_back(front):
    def client(n):
        wrong = []
        for i in range(10):
            token = uuid.uuid4().hex.encode()
            r = front.request("POST", "/echo", body=token * (n + 1))
            if r.status != 200 or r.body != token.upper() * (n + 1):
                wrong.append(("/echo", r.status))
            r = front.post_chunked("/count", [token] * (i + 1))
            expected = token * (i + 1) + b"[%d bytes, first run first: true]" % (len(token) * (i + 1))
            if r.status != 200 or r.body != expected:
                wrong.append(("/count", r.status, r.body[-40:]))
        return wrong

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        wrong = [w for ws in pool.map(client, range(16)) for w in ws]
    assert wrong == []


def test_a_request_without_a_body_is_not_filtered(front):
    for method in ("GET", "DELETE"):
        r = front.request(method, "/refuse-all")
        assert r.status == 200
        assert r.body == b"no body, no filter"
    assert "/refuse-all" not in front.error_log()


def test_mruby_input_filter_without_a_script_passes_and_warns(front):
    r, _ = front.expect("/no-script", 200, r"MRB00520: .*/no-script, but no mrubyInputFilter applies there",
                        method="POST", body=b"as it came")
    assert r.body == b"as it came"
