"""Errors: an exception is a 500 with httpd's own error page and one log
entry naming class, message, file:line and backtrace; the thread goes on
serving. Bad code is refused by `apache2 -t`."""

import os
import re

import pytest

from httpd import SINGLE_WORKER, measures_memory, module_httpd

BODY = r"""
AddHandler mruby-script .mrb
ErrorDocument 500 "custom error page"
<Location /raise>
    SetHandler mruby-native-script
    mrubyHandlerCode "def explode(x); raise ArgumentError, 'secret detail ' + x; end; explode('42')"
</Location>
<Location /raise_file>
    SetHandler mruby-native-script
    mrubyHandler {root}/scripts/raise.rb
</Location>
<Location /ok>
    SetHandler mruby-native-script
    mrubyHandlerCode "$n = ($n || 0) + 1; Apache.rputs 'ok ' + $n.to_s"
</Location>
<Location /after_output>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'partial'; raise 'late failure'"
</Location>
<Location /after_flush>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs('y' * 100_000); raise 'failure after flush'"
</Location>
<Location /nomethod>
    SetHandler mruby-native-script
    mrubyHandlerCode "nil.no_such_method"
</Location>
<Directory {docroot}/ht>
    AllowOverride All
</Directory>
<Directory {docroot}/htlist>
    AllowOverride None
    AllowOverrideList mrubyHandlerCode mrubyFixupsCode mrubyTranslateNameCode mrubyOutputFilterCode mrubyAuthnCheckPasswordCode mrubyTimeout mrubyRequestBodyLimit mrubyFormFieldsLimit mrubyHandlerEnable
</Directory>
<Location /wrong_kind>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.const_get(Apache::Request.new.args).new"
</Location>
<Location /backtrace_emptied>
    SetHandler mruby-native-script
    mrubyHandler {root}/scripts/emptied.rb
</Location>
<Location /big_message>
    SetHandler mruby-native-script
    mrubyHandlerCode "raise 1.chr * 40_000_000"
</Location>
<Location /big_log>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.errlogger Apache::APLOG_ERR, 0.chr * 40_000_000; Apache.rputs 'logged'"
</Location>
<Location /peak>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs File.read('/proc/self/status').split(10.chr).find { |l| l.start_with?('VmHWM') }.split[1]"
</Location>
<Location /replace_http_error>
    SetHandler mruby-native-script
    mrubyHandlerCode "class Apache; HTTPError = 42; end; Apache.rputs 'replaced'"
</Location>
<Location /remove_apache>
    SetHandler mruby-native-script
    mrubyHandlerCode "Object.send(:remove_const, :Apache)"
</Location>
<Location /message_raises>
    SetHandler mruby-native-script
    mrubyHandlerCode "class BadMessage < StandardError; def message; raise 'no'; end; end; def fail_here; raise BadMessage; end; fail_here"
</Location>
<Location /redefine>
    SetHandler mruby-native-script
    mrubyHandler {root}/scripts/redefine.rb
</Location>
<Location /overflow>
    SetHandler mruby-native-script
    mrubyHandlerCode "def deeper(n); deeper(n + 1); end; deeper(0)"
</Location>
<Location /raise_object>
    SetHandler mruby-native-script
    mrubyHandlerCode "class Boom < StandardError; end; raise Boom.new([1, 2])"
</Location>
<Location /newline>
    SetHandler mruby-native-script
    mrubyHandlerCode "raise %Q(line1\nline2)"
</Location>
"""

RAISE_RB = """# a file script that raises
def helper
  raise IndexError, "from a file"
end

helper
"""

# An exception whose backtrace (an Array of the script's, as set_backtrace
# keeps it) holds an object whose #to_s empties that Array while the log
# entry is being written.
EMPTIED_RB = """class Emptier
  def to_s
    $lines.clear
    GC.start
    "emptier"
  end
end
$lines = (1..15).map { |i| "line %d of a long backtrace" % i }
e = RuntimeError.new("backtrace emptied")
e.set_backtrace($lines)
$lines.unshift(Emptier.new)
raise e
"""

# Every reader of an exception's text redefined to never return: the log
# entry is written after the script's time is up (mrubyTimeout does not
# cover it), and the module's own call of #message hung the thread.
REDEFINE_RB = """[Exception, SystemStackError, StandardError].each do |c|
  c.class_eval do
    %i[message to_s inspect backtrace full_message].each do |m|
      define_method(m) { |*a| loop {} }
    end
  end
end
Apache.rputs 'redefined'
"""

FILES = {"scripts/raise.rb": RAISE_RB, "scripts/emptied.rb": EMPTIED_RB, "scripts/redefine.rb": REDEFINE_RB}

# One worker thread in all: consecutive requests meet the same VM.
server = module_httpd("errors", BODY, files=FILES, mpm_conf=None)


@pytest.fixture(params=["prefork", "worker", "event"])
def single(request, make_httpd):
    srv = make_httpd("single", request.param, BODY, mpm_conf=SINGLE_WORKER[request.param])
    for rel, content in FILES.items():
        srv.write(rel, content)
    return srv.start()


def test_exception_is_500_with_generic_page_and_logged(server):
    r, line = server.expect("/raise", 500, r"MRB00030: .*ArgumentError")
    assert r.body == b"custom error page"
    assert b"secret" not in r.body
    assert "secret detail 42" in line
    assert re.search(r"raised ArgumentError at %s:\d+: " % re.escape(server.conf_path), line)
    assert "in explode" in line


def test_exception_in_file_names_file_and_line(server):
    _, line = server.expect("/raise_file", 500, r"MRB00030: .*IndexError")
    path = server.path("scripts/raise.rb")
    assert "raised IndexError at %s:3: from a file" % path in line
    assert "%s:6" % path in line  # the caller, in the backtrace


def test_next_request_on_the_same_thread_is_fine(single):
    assert single.get("/raise").status == 500
    assert single.get("/nomethod").status == 500
    r = single.get("/ok")
    assert (r.status, r.body) == (200, b"ok 1")
    assert single.get("/raise_file").status == 500
    r = single.get("/ok")
    assert (r.status, r.body) == (200, b"ok 2")  # same VM: globals persist
    single.wait_log(r"MRB00030: .*NoMethodError")


def test_backtrace_emptied_while_it_is_logged(single):
    # The log entry is written from what the backtrace held when it was
    # read: the child goes on with the same VM (it crashed reading past the
    # end of the emptied Array). The object that is no String is named by
    # its class, its #to_s (the script's code) is not run.
    assert single.get("/ok").body == b"ok 1"
    _, line = single.expect("/backtrace_emptied", 500,
                            r"MRB00030: .*RuntimeError at #<Emptier>: backtrace emptied")
    assert "line 15 of a long backtrace" in line
    assert single.get("/ok").body == b"ok 2"


def test_exception_whose_message_raises_is_logged_with_its_place(server):
    # Its #message is not run: the entry has what Exception#to_s gives for
    # an exception made without a message, the class's name.
    _, line = server.expect("/message_raises", 500, r"MRB00030: .*raised BadMessage")
    assert re.search(r"raised BadMessage at %s:\d+: BadMessage "
                     r"\[backtrace: %s:\d+:in fail_here" % ((re.escape(server.conf_path),) * 2), line), line


def test_message_that_is_no_string_is_the_class_name(server):
    server.expect("/raise_object", 500, r"MRB00030: .*raised Boom at .*: Boom \[backtrace")


@pytest.mark.parametrize("path,cls,message", [
    ("/overflow", "SystemStackError", "stack level too deep"),
    ("/raise", "ArgumentError", "secret detail 42"),
    ("/nomethod", "NoMethodError", "undefined method 'no_such_method'"),
])
def test_readers_of_the_exception_redefined_to_loop(single, path, cls, message):
    # The entry is read from the exception itself, not through the
    # script's methods: the thread answers, logs and goes on serving.
    assert single.get("/redefine").body == b"redefined"
    _, line = single.expect(path, 500, r"MRB00030: .*raised %s" % cls, timeout=10)
    assert message in line, line
    assert "[backtrace: none]" not in line
    assert single.get("/ok", timeout=10).body == b"ok 1"
    single.expect(path, 500, r"MRB00030: .*raised %s" % cls, count=2, timeout=10)


def test_http_error_constant_replaced_by_a_script(single):
    # Which status an exception asks for was looked up through the
    # constant, after the script ended: a constant that was no class any
    # more raised where nothing could catch it, and mruby aborted the child.
    assert single.get("/ok").body == b"ok 1"
    assert single.get("/replace_http_error").body == b"replaced"
    assert single.get("/raise").status == 500
    assert single.get("/ok").body == b"ok 2"


def test_apache_constant_removed_by_a_script(single):
    # The next exception was logged, then the lookup of Apache::HTTPError
    # raised a NameError, and the child aborted.
    assert single.get("/remove_apache").status == 200
    single.expect("/raise", 500, r"MRB00030: .*raised ArgumentError")
    single.expect("/ok", 500, r"MRB00030: .*raised NameError")  # Apache.rputs: NameError in this VM now


@measures_memory
@pytest.mark.parametrize("path", ["/big_message", "/big_log"])
def test_long_text_for_the_log_is_not_copied_whole(single, path):
    # A log entry holds 8 KB: a 40 MB message was copied whole, and escaped
    # (4 bytes for a control byte or a NUL), and the child's memory peaked
    # some 200 MB above the script's own String.
    before = int(single.get("/peak").body)
    single.get(path)
    single.wait_log(r"MRB00(030|400): .*x0[01].*x0[01]")
    grown_mb = (int(single.get("/peak").body) - before) / 1024
    assert grown_mb < 100, grown_mb


def test_output_before_exception_is_discarded(server):
    r, _ = server.expect("/after_output", 500, r"MRB00030: .*RuntimeError at .*: late failure")
    assert b"partial" not in r.body


def test_exception_after_output_was_sent_cuts_the_response(server):
    import http.client
    try:
        r = server.get("/after_flush")
    except http.client.IncompleteRead:
        pass  # the response is truncated: exactly what the client must see
    else:
        assert r.status == 200 and len(r.body) < 100_000
    server.wait_log(r"MRB00030: .*failure after flush")
    assert server.get("/ok").status == 200


@pytest.mark.parametrize("cls,where", [
    ("Filter", "filter scripts"),
    ("AuthnProvider", "authn provider scripts"),
    ("AuthzProvider", "authz provider scripts"),
])
def test_objects_of_another_kind_of_script_are_refused(server, cls, where):
    server.expect("/wrong_kind?" + cls, 500, r"MRB00030: .*RuntimeError at .*: Apache::%s can only be used "
                  r"in %s, not in a Handler script" % (cls, where))


def test_log_entry_is_one_line(server):
    server.get("/newline")
    line = server.wait_log(r"MRB00030: .*line1")[-1]
    assert "line2" in line  # escaped onto the same line


def test_syntax_error_in_mrb_then_fixed(single):
    single.write("htdocs/broken.mrb", "Apache.rputs 'a'\nif true\n  Apache.rputs(\n")
    _, line = single.expect("/broken.mrb", 500, r"MRB00020: .*broken\.mrb")
    assert re.search(r"broken\.mrb:\d+:\d+: syntax error", line)
    r = single.get("/broken.mrb")  # cached error: still 500, no crash
    assert r.status == 500
    single.write("htdocs/broken.mrb", "Apache.rputs 'fixed now'\n")
    r = single.get("/broken.mrb")
    assert (r.status, r.body) == (200, b"fixed now")


def test_syntax_error_in_inline_code_fails_configtest(make_httpd, mpm):
    srv = make_httpd("badinline", mpm)
    code, out = srv.configtest("""
<Location /x>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs('unclosed'"
</Location>
""")
    assert code != 0
    assert "Syntax error on line" in out and srv.conf_path in out
    assert "mrubyHandlerCode: Ruby error:" in out
    assert "syntax error" in out


def test_missing_handler_file_fails_configtest(make_httpd, mpm):
    srv = make_httpd("missing", mpm)
    code, out = srv.configtest("mrubyHandler {root}/scripts/nope.rb\n")
    assert code != 0
    assert "mrubyHandler: cannot open %s" % srv.path("scripts/nope.rb") in out


def test_syntax_error_in_handler_file_fails_configtest(make_httpd, mpm):
    srv = make_httpd("badfile", mpm)
    srv.write("scripts/bad.rb", "def x\n")
    code, out = srv.configtest("mrubyHandler {root}/scripts/bad.rb cache\n")
    assert code != 0
    assert "bad.rb:" in out and "syntax error" in out


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_script_that_is_not_a_regular_file_fails_configtest(make_httpd, kind):
    srv = make_httpd("notregular", "event")
    path = srv.path("scripts/handler.rb")
    if kind == "fifo":
        os.mkfifo(path)  # opening it would wait for a writer
    else:
        os.mkdir(path)
    code, out = srv.configtest("mrubyHandler {root}/scripts/handler.rb\n")
    assert code != 0
    assert "mrubyHandler: %s is not a regular file" % path in out, out


# Script files may be at most 16 MB; a sparse file takes no room on disk.
SCRIPT_MAX = 16 * 1024 * 1024


def sparse_script(path, size):
    with open(path, "wb") as f:
        f.write(b"Apache.rputs 'edge'\n")  # then NULs, where mruby's parser stops
        f.truncate(size)
    os.chmod(path, 0o644)
    return path


def too_large(path, size):
    return "%s is %d bytes, over the 16 MB (16777216 bytes) a script file may have" % (path, size)


@pytest.mark.parametrize("directive", ["mrubyHandler", "mrubyFixupsLast", "mrubyOutputFilter"])
def test_script_file_over_16_mb_fails_configtest(make_httpd, directive):
    srv = make_httpd("bigscript", "event")
    path = sparse_script(srv.path("scripts/big.rb"), SCRIPT_MAX + 1)
    code, out = srv.configtest("%s {root}/scripts/big.rb cache\n" % directive)
    assert code != 0
    assert "%s: %s" % (directive, too_large(path, SCRIPT_MAX + 1)) in out, out


def test_script_file_of_16_mb_is_accepted(make_httpd):
    srv = make_httpd("edgescript", "event")
    sparse_script(srv.path("scripts/edge.rb"), SCRIPT_MAX)
    # mrubyCompileLimit's default (1 MB) is lower than a file's own limit
    code, out = srv.configtest("mrubyCompileLimit 16M\nmrubyHandler {root}/scripts/edge.rb cache\n")
    assert code == 0, out


def test_mrb_file_over_16_mb_is_a_500_that_names_it(server):
    path = sparse_script(server.path("htdocs/big.mrb"), 17 * 1024 * 1024)
    for _ in range(2):
        r = server.get("/big.mrb")
        assert r.status == 500
        assert b"edge" not in r.body
    server.wait_log(r"MRB00020: Handler script %s" % re.escape(too_large(path, 17 * 1024 * 1024)))


# mruby keeps line numbers in 16 bits: a longer script runs all the same,
# and where it is compiled a warning says its errors may name wrong lines.
LONG_SCRIPT = "\n" * 69999 + "Apache.rputs 'long'\n"  # 70000 lines


def too_many_lines(path):
    return ("MRB00022: %s has 70000 lines: mruby numbers lines in 16 bits, so errors and backtraces past "
            "line 65535 name wrong lines" % path)


def test_mrb_file_over_65535_lines_runs_with_a_warning(server):
    path = server.write("htdocs/long.mrb", LONG_SCRIPT)
    for _ in range(2):
        r = server.get("/long.mrb")
        assert (r.status, r.body) == (200, b"long")
    server.wait_log(re.escape(too_many_lines(path)))


def test_script_file_over_65535_lines_runs_with_a_warning(make_httpd, mpm):
    srv = make_httpd("longscript", mpm, "<Location /long>\n    SetHandler mruby-native-script\n"
                                        "    mrubyHandler {root}/scripts/long.rb cache\n</Location>\n")
    path = srv.write("scripts/long.rb", LONG_SCRIPT)
    code, out = srv.configtest()
    assert code == 0 and too_many_lines(path) in out, out
    srv.start()
    for _ in range(2):
        r = srv.get("/long")
        assert (r.status, r.body) == (200, b"long")
    srv.wait_log(re.escape(too_many_lines(path)))


def test_bad_second_argument_fails_configtest(make_httpd, mpm):
    srv = make_httpd("badarg", mpm)
    srv.write("scripts/ok.rb", "Apache.rputs 1\n")
    code, out = srv.configtest("mrubyHandler {root}/scripts/ok.rb nocache\n")
    assert code != 0
    assert "the second argument can only be 'cache'" in out


def test_valid_configuration_passes_configtest(make_httpd, mpm):
    srv = make_httpd("goodconf", mpm)
    srv.write("scripts/ok.rb", "Apache.rputs 1\n")
    code, out = srv.configtest("mrubyHandler {root}/scripts/ok.rb cache\n"
                               "mrubyHandlerCode \"Apache.rputs 2\"\n")
    assert code == 0, out
    assert "Syntax OK" in out


def test_not_allowed_in_htaccess(server):
    server.write("htdocs/ht/.htaccess", 'mrubyHandlerCode "Apache.rputs 1"\n')
    server.write("htdocs/ht/index.txt", "x")
    server.expect("/ht/index.txt", 500, r"mrubyHandlerCode not allowed here")


# AllowOverrideList lets the directives it names into .htaccess whatever
# their own context says; ours refuse it themselves.
@pytest.mark.parametrize("line", [
    'mrubyHandlerCode "Apache.rputs %q(from htaccess)"',
    'mrubyFixupsCode "Apache::Request.new.headers_out[%q(X-Ht)] = %q(yes)"',
    'mrubyTranslateNameCode "Apache.return Apache::DECLINED"',
    'mrubyOutputFilterCode "Apache::Filter.new.body = %q(filtered)"',
    'mrubyAuthnCheckPasswordCode "Apache.return Apache::AuthnProvider::AUTH_GRANTED"',
    "mrubyTimeout off",
    "mrubyRequestBodyLimit 1",
    "mrubyFormFieldsLimit 5",
    "mrubyHandlerEnable On",  # does nothing, but is refused all the same
])
def test_not_allowed_in_htaccess_even_by_allow_override_list(server, line):
    directive = line.split()[0]
    server.write("htdocs/htlist/.htaccess", line + "\n")
    server.write("htdocs/htlist/index.txt", "static")
    for _ in range(3):
        r = server.get("/htlist/index.txt")
        assert r.status == 500, r
        assert b"htaccess" not in r.body and b"static" not in r.body
    server.wait_log(r"%s cannot occur within htaccess files" % directive)
