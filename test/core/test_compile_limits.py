"""mrubyCompileLimit: how much Ruby one compilation may be given, and how
much CPU time its parsing may take. mruby 3.1's parser takes time that
grows with the square of a list's length (statements, arguments, array and
hash items, local variables), so a few hundred KB of Ruby could keep
`apachectl -t`, a worker or an `eval` busy for minutes. Over the limits,
inline code fails the configuration with the directive's file and line, a
script file gets a 500 and a log line naming it, and eval raises
ScriptError; the thread goes on serving."""

import os

import pytest

from httpd import PRELOAD, SINGLE_WORKER, module_httpd

# Slow for mruby 3.1 in every build: each new local variable is looked up
# in the list of those before it (20,000 take tens of seconds).
SLOW = "".join("v%d = 1\n" % i for i in range(20000)).encode()
# Long lists: Debian's libmruby takes minutes on this, the source build
# (with patches/mruby/parse-append.patch) milliseconds.
# (under the sanitizers, which make the parser 3 times slower, a shorter
# one: the patched parser's time is linear either way)
LONG = b"a = 1; " * (20000 if PRELOAD else 50000) + b"Apache.rputs 'long'\n"
PATCHED = os.environ.get("MM_MRUBY_MODE") == "source"
# Over the default size limit (1 MB), of code that would compile quickly.
BIG = b"# " + b"x" * (1024 * 1024) + b"\nApache.rputs 'big'\n"

BODY = r"""
mrubyCompileLimit 512K 300
AddHandler mruby-script .mrb
<Location /count>
    SetHandler mruby-native-script
    mrubyHandlerCode "$n = ($n || 0) + 1; Apache.rputs $n.to_s"
</Location>
<Location /eval>
    SetHandler mruby-native-script
    mrubyHandler {root}/scripts/eval.rb
</Location>
"""

EVAL_RB = r"""
x = 41
how, what = Apache::Request.new.args.split('-')
src = case what
      when 'fine' then 'x + 1'
      when 'big' then '1;' * 300_000
      else (0...20_000).map { |i| "v#{i} = 1" }.join("\n")
      end
begin
  v = case how
      when 'instance' then Object.new.instance_eval(src)
      when 'class' then Class.new.class_eval(src)
      when 'module' then Module.new.module_eval(src)
      when 'kernel' then Kernel.eval(src)
      else eval(src)
      end
  Apache.rputs "ok #{v}"
rescue ScriptError => e
  Apache.rputs "#{e.class}: #{e.message}"
end
"""

FILES = {
    "htdocs/slow.mrb": SLOW,
    "htdocs/big.mrb": BIG,
    "htdocs/fine.mrb": "Apache.rputs 'fine'\n",
    "htdocs/long.mrb": LONG,
    "scripts/eval.rb": EVAL_RB,
}

server = module_httpd("compile_limits", BODY, files=FILES, mpm_conf=SINGLE_WORKER)


def count(server):
    r = server.get("/count")
    assert r.status == 200
    return int(r.body)


def test_a_slow_file_gets_500_and_the_worker_goes_on(server):
    before = count(server)
    server.expect("/slow.mrb", 500, r"MRB00020: Handler script \S*/htdocs/slow\.mrb: compiling stopped after "
                                    r"300 ms of CPU time, near line \d+ of 20000")
    assert count(server) == before + 1  # the same worker, the same VM
    # Its error is kept until the file changes: not parsed again.
    server.expect("/slow.mrb", 500, r"htdocs/slow\.mrb: compiling stopped", count=2)
    assert server.error_log().count("compiling stopped") == 2
    assert server.get("/fine.mrb").body == b"fine"


def test_a_long_list_is_cut_short_or_compiles(server):
    if PATCHED:
        assert server.ok("/long.mrb").body == b"long"
    else:
        server.expect("/long.mrb", 500,
                      r"MRB00020: Handler script \S*/htdocs/long\.mrb: compiling stopped after 300 ms")


def test_a_big_file_gets_500_naming_it(server):
    server.expect("/big.mrb", 500, r"MRB00020: Handler script \S*/htdocs/big\.mrb: %d bytes of Ruby, over "
                                   r"the 524288 that mrubyCompileLimit allows" % (len(BIG)))
    assert server.get("/fine.mrb").status == 200


def test_a_file_fixed_compiles_again(server):
    server.write("htdocs/later.mrb", SLOW)
    assert server.get("/later.mrb").status == 500
    server.write("htdocs/later.mrb", "Apache.rputs 'fixed'\n")
    r = server.get("/later.mrb")
    assert r.status == 200
    assert r.body == b"fixed"


@pytest.mark.parametrize("how, method", [
    ("eval", "eval"), ("kernel", "eval"), ("instance", "instance_eval"), ("class", "class_eval"),
    ("module", "module_eval"),
])
def test_eval_of_slow_code_raises_script_error(server, how, method):
    r = server.get("/eval?%s-slow" % how)
    assert r.status == 200
    assert r.body.startswith(b"ScriptError: " + method.encode()
                             + b": compiling stopped after 300 ms of CPU time, near line "), r.body
    assert count(server) > 0


def test_eval_of_big_code_raises_script_error(server):
    r = server.get("/eval?eval-big")
    assert r.status == 200
    assert r.body == b"ScriptError: eval: 600000 bytes of Ruby, over the 524288 that mrubyCompileLimit allows"


def test_eval_still_sees_the_callers_variables(server):
    r = server.get("/eval?eval-fine")
    assert r.body == b"ok 42"
    assert count(server) > 0


# ---------------------------------------------------- configuration time

@pytest.fixture
def conf(make_httpd):
    # apache2 -t runs no MPM: one of them is enough.
    srv = make_httpd("compile_conf", "event")
    srv.write("scripts/slow.rb", SLOW)
    return srv


def inline(code):
    """A directive of inline code on one line."""
    return "mrubyHandlerCode \"%s\"\n" % code.replace("\n", "; ")


def line_of(conf, start):
    """The line of the configuration written last that starts with start."""
    with open(conf.conf_path) as f:
        return next(i for i, line in enumerate(f, 1) if line.lstrip().startswith(start))


def test_inline_code_over_the_size_is_refused(conf):
    code, out = conf.configtest("<Location /x>\n" + inline("a = 1\n" * 200000) + "</Location>\n")
    assert code != 0
    line = line_of(conf, "mrubyHandlerCode")
    assert "Syntax error on line %d of %s" % (line, conf.conf_path) in out, out
    assert ("mrubyHandlerCode: %s:%d: " % (conf.conf_path, line)) in out
    assert "bytes of Ruby, over the 1048576 that mrubyCompileLimit allows" in out


def test_slow_inline_code_is_stopped(conf):
    code, out = conf.configtest("mrubyCompileLimit 1M 300\n<Location /x>\n" + inline(SLOW.decode())
                                + "</Location>\n")
    assert code != 0
    line = line_of(conf, "mrubyHandlerCode")
    assert "Syntax error on line %d of %s" % (line, conf.conf_path) in out, out
    assert "mrubyHandlerCode: %s:%d: compiling stopped after 300 ms of CPU time, near line %d of %d" % (
        conf.conf_path, line, line, line) in out


def test_slow_file_is_stopped(conf):
    code, out = conf.configtest("mrubyCompileLimit 1M 300\nmrubyHandler {root}/scripts/slow.rb cache\n")
    assert code != 0
    assert "mrubyHandler: %s: compiling stopped after 300 ms" % conf.path("scripts/slow.rb") in out, out


@pytest.mark.parametrize("line, message", [
    ("mrubyCompileLimit 1000", "mrubyCompileLimit: 1000 is below the minimum of 1024"),
    ("mrubyCompileLimit 17M", "mrubyCompileLimit: 17M is above the maximum of 16777216"),
    ("mrubyCompileLimit 1M 1s", "mrubyCompileLimit: '1s' is not a number"),
    ("<Location /x>\nmrubyCompileLimit 1M\n</Location>", "not allowed in <Location>"),
])
def test_bad_limits_are_refused(conf, line, message):
    code, out = conf.configtest(line + "\n")
    assert code != 0
    assert message in out, out


def test_the_limit_bounds_the_code_after_it(conf):
    big = "mrubyHandlerCode \"x = 1 # %s\"\n" % ("x" * 1200000)
    code, out = conf.configtest(big + "mrubyCompileLimit 2M\n")
    assert code != 0
    assert "over the 1048576 that mrubyCompileLimit allows" in out, out
    code, out = conf.configtest("mrubyCompileLimit 2M\n" + big)
    assert code == 0, out


def test_limits_that_fit_pass(conf):
    code, out = conf.configtest("mrubyCompileLimit 64K 0\nmrubyHandlerCode \"%s\"\n" % ("x = 1;" * 10000))
    assert code == 0, out
