"""The table classes beyond the core: Apache::Env (CGI variables and
subprocess_env), multi-valued headers (get_all, add), nil for missing
keys everywhere, enumeration of every table."""

from httpd import module_httpd

BODY = r"""
AddHandler mruby-script .mrb
SetEnv FROM_CONFIG configured
"""

FILES = {
    "htdocs/env.mrb": (
        'e = Apache::Env.new\n'
        'Apache.echo e["QUERY_STRING"]\n'
        'Apache.echo e["REQUEST_METHOD"]\n'
        'Apache.echo e["SERVER_SOFTWARE"].to_s.start_with?("Apache")\n'
        'Apache.echo e["SCRIPT_FILENAME"]\n'
        'Apache.echo e["HTTP_X_CUSTOM"]\n'
        'Apache.echo e["FROM_CONFIG"]\n'
        'Apache.echo e["NO_SUCH_VARIABLE"].inspect\n'
        'e["AUTHOR"] = "first"\n'
        'e["AUTHOR"] = "second"\n'
        'Apache.echo Apache::Request.new.subprocess_env["AUTHOR"]\n'
        'Apache.echo e.all.key?("REMOTE_ADDR")\n'
        'Apache.echo e.keys.include?("DOCUMENT_ROOT")\n'
        'e["AUTHOR"] = nil\n'
        'Apache.echo e["AUTHOR"].inspect\n'
        'Apache.echo e.delete("NOPE").inspect\n'
    ),
    "htdocs/raw_env.mrb": (
        'env = Apache::Request.new.subprocess_env\n'
        'Apache.echo env["FROM_CONFIG"]\n'
        'Apache.echo env["QUERY_STRING"].inspect\n'
    ),
    "htdocs/multi.mrb": (
        'r = Apache::Request.new\n'
        'Apache.echo r.headers_in.get_all("X-Multi").inspect\n'
        'Apache.echo r.headers_in.get_all("X-None").inspect\n'
        'r.headers_out.add("X-Out", "one")\n'
        'r.headers_out.add("X-Out", "two")\n'
        'r.err_headers_out.add("X-Err", "e1")\n'
        'Apache.echo r.headers_out.get_all("x-out").inspect\n'
        'Apache.echo r.headers_out.to_a.select { |k, _| k == "X-Out" }.size\n'
        'begin; r.headers_out.add("X-Bad", "a\\nb"); rescue ArgumentError; Apache.echo "crlf refused"; end\n'
        'begin; r.headers_out.add("Bad:Name", "v"); rescue ArgumentError; Apache.echo "name refused"; end\n'
        'r.headers_out.add("X-Nil", nil)\n'
        'Apache.echo r.headers_out["X-Nil"].inspect\n'
        # the arguments however they are passed: spread, too few, too many,
        # with keywords
        'r.headers_out.send(:[]=, *["X-Splat", "spread"])\n'
        'r.headers_out.add(*["X-Out", "three"])\n'
        '[["X-Few"], ["X-Many", "v", "w"]].each do |a|\n'
        '  begin; r.headers_out.add(*a); rescue ArgumentError => e; Apache.echo e.message; end\n'
        'end\n'
        'begin; r.headers_out.add("X-Kw", "v", k: 1); rescue ArgumentError => e; Apache.echo e.message; end\n'
    ),
    "htdocs/ctl.mrb": (
        'r = Apache::Request.new\n'
        'out = []\n'
        '["a\\x01b", "a\\x1bb", "a\\x7fb", "a\\rb"].each do |v|\n'
        '  [r.headers_out, r.err_headers_out].each do |t|\n'
        '    begin; t["X-Ctl"] = v; out << "accepted"; rescue ArgumentError; out << "refused"; end\n'
        '  end\n'
        '  begin; r.content_type = "text/plain" + v; out << "accepted"; rescue ArgumentError; out << "refused"; end\n'
        'end\n'
        'r.headers_out["X-Tab"] = "a\\tb \\xC3\\xA9"\n'
        'Apache.rputs out.uniq.join(",")\n'
    ),
    "htdocs/refusals.mrb": (
        'r = Apache::Request.new\n'
        '[r.headers_in, r.headers_out, r.err_headers_out, r.notes, r.subprocess_env].each do |t|\n'
        '  ["a\\0b", "a\\r\\nX-Evil: 1"].each do |v|\n'
        '    begin; t["X-V"] = v; Apache.echo "accepted"; rescue ArgumentError => e; Apache.echo e.message; end\n'
        '  end\n'
        '  begin; t["Bad Name"] = "v"; Apache.echo "accepted"; rescue ArgumentError => e; Apache.echo e.message; end\n'
        'end\n'
    ),
    "htdocs/missing.mrb": (
        'r = Apache::Request.new\n'
        'out = []\n'
        '[r.headers_in, r.headers_out, r.err_headers_out, r.notes, r.subprocess_env].each do |t|\n'
        '  out << t["missing"].inspect << t.delete("missing").inspect << t["a\\0b"].inspect\n'
        '  out << t.get_all("missing").inspect << t.to_h.class.to_s << t.each.class.to_s\n'
        'end\n'
        'Apache.rputs out.uniq.join(",")\n'
    ),
    "htdocs/each.mrb": (
        'r = Apache::Request.new\n'
        'r.notes["n1"] = "v1"\n'
        'r.notes["n2"] = 2\n'
        'seen = []\n'
        'r.notes.each { |k, v| seen << "#{k}=#{v}" }\n'
        'Apache.echo seen.join(",")\n'
        'Apache.echo r.notes.keys.join(",")\n'
        'Apache.echo r.headers_in.keys.include?("Host")\n'
        'Apache.echo r.headers_in.map { |k, v| k }.include?("Host")\n'
        'Apache.echo [r.headers_in.referer.inspect, r.headers_in.user_agent.inspect].join(",")\n'
    ),
}

server = module_httpd("table", BODY, files=FILES, modules=("env",))


def test_env_has_cgi_variables(server):
    out = server.lines("/env.mrb?a=1&b=2", headers={"X-Custom": "custom"})
    assert out == ["a=1&b=2", "GET", "true", server.docroot + "/env.mrb", "custom", "configured",
                   "nil", "second", "true", "true", "nil", "nil"]


def test_subprocess_env_is_the_table_as_is(server):
    assert server.lines("/raw_env.mrb?q=1") == ["configured", "nil"]


def test_multi_valued_headers(server):
    r = server.raw(b"GET /multi.mrb HTTP/1.1\r\nHost: x\r\nX-Multi: a\r\nX-Multi: b\r\n"
                   b"Connection: close\r\n\r\n")
    assert r.status == 200
    # httpd merges a repeated request header into one value
    assert r.text.splitlines() == ['["a, b"]', "[]", '["one", "two"]', "2", "crlf refused",
                                   "name refused", "nil",
                                   "wrong number of arguments (given 1, expected 2)",
                                   "wrong number of arguments (given 3, expected 2)",
                                   "wrong number of arguments (given 3, expected 2)"]
    assert r.headers.get_all("X-Out") == ["one", "two", "three"]
    assert r.headers["X-Splat"] == "spread"
    assert "X-Few" not in r.headers and "X-Many" not in r.headers and "X-Kw" not in r.headers
    assert r.headers["X-Err"] == "e1"
    assert "X-Bad" not in r.headers


def test_header_values_with_control_characters_are_refused(server):
    # httpd refuses such a value when the response goes out (500, AH02430):
    # the script gets the ArgumentError where it sets the value instead
    r = server.get("/ctl.mrb")
    assert (r.status, r.body) == (200, b"refused"), server.error_log()[-2000:]
    assert r.headers["X-Tab"].encode("latin-1") == b"a\tb \xc3\xa9"  # HTAB and obs-text are fine
    assert "X-Ctl" not in r.headers


def test_which_tables_refuse_what(server):
    # The header tables refuse NUL, CR, LF (and the other control characters)
    # in values and names that are not tokens, with the message of their
    # class; notes and subprocess_env take any name and refuse only NUL.
    out = server.lines("/refusals.mrb")
    expected = []
    for cls in ("Headers_in", "Headers_out", "Err_headers_out"):
        expected += ["Apache::%s: header value must not contain a NUL byte" % cls,
                     "Apache::%s: header value must not contain CR, LF or other control characters" % cls,
                     "Apache::%s: invalid header name" % cls]
    expected += ["a table value must not contain a NUL byte", "accepted", "accepted"] * 2
    assert out == expected


def test_missing_keys_are_nil_in_every_table(server):
    assert server.get("/missing.mrb").text == "nil,[],Hash,Enumerator"


def test_enumeration(server):
    assert server.lines("/each.mrb", headers={"Referer": "http://ref.test/"}) == [
        "n1=v1,n2=2", "n1,n2", "true", "true", '"http://ref.test/",nil']
