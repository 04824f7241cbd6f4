"""The test kit (tools/mod_mruby-test) run as a user runs it: on test
files written here, checking its exit status, its TAP and JUnit output,
the diffs it shows on failure, its error-log checks and crash detection
(a C module that segfaults on purpose, built with apxs)."""

import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from httpd import GC_STRESS, MODULE, MPMS, ROOT, TOOL_TIMEOUT, tool_env

KIT = os.path.join(ROOT, "tools", "mod_mruby-test")
APXS = os.environ.get("MM_APXS", "/usr/bin/apxs")
sys.path.insert(0, os.path.join(ROOT, "bench"))
from prereq import build_module  # noqa: E402

# The kit is checked here, not the module: under a GC-stressed libmruby
# (where every file would take minutes on three MPMs) the rest of the
# suite checks the module.
pytestmark = pytest.mark.skipif(GC_STRESS, reason="the kit's own tests; the module is checked by the rest")


def kit(tmp_path, text, *args, name="t.t"):
    """Runs the kit on a test file of text; returns (exit status, output)."""
    path = tmp_path / name
    path.write_text(text)
    p = subprocess.run([sys.executable, KIT, "--module", MODULE, "--timeout", TOOL_TIMEOUT, str(path)] + list(args),
                       capture_output=True, text=True, timeout=300, env=tool_env(str(tmp_path / "sanitizer")))
    return p.returncode, p.stdout + p.stderr


def points(out):
    """{title: ok?} of the TAP test points."""
    found = {}
    for m in re.finditer(r"^(ok|not ok) \d+ - \S+: (.*)$", out, re.M):
        found[m.group(2)] = m.group(1) == "ok"
    return found


# Every kind of section, every assertion kind passing.
PASSING = r"""
Files for every block, and server-wide configuration.
--- modules
headers
--- server_config
mrubyCache kit dict(1M)
--- file htdocs/static.txt
static file
--- file scripts/count.rb
Apache.errlogger(Apache::APLOG_WARNING, "kit-hit #{Apache::Request.new.uri}")
Apache.rputs "counted\n"

=== a script's answer, exactly
--- config
<Location /hello>
    SetHandler mruby-native-script
    mrubyHandlerCode "r = Apache::Request.new; r.content_type = 'text/plain'; r.headers_out['X-Kit'] = 'yes'; Apache.rputs 'hello ' + r.args.to_s"
</Location>
--- request
GET /hello?world
--- status
200
--- response_headers
X-Kit: yes
Content-Type: text/plain
!X-Absent
--- response_headers_like
Content-Length: \d+
--- response_body chomp
hello world

=== regular expressions and substrings; a POST body
--- config
<Location /echo>
    SetHandler mruby-native-script
    mrubyHandlerCode "r = Apache::Request.new; Apache.rputs(r.method + ' ' + r.body.to_s + ' ' + r.headers_in['X-Mine'].to_s + ' ' + r.hostname)"
</Location>
--- request
POST /echo
X-Mine: mine
Content-Type: text/plain

the body
--- response_body_like
\APOST the body mine block\d+\.kit\.test\Z
--- response_body_contains
the body
{host}

=== a file of the ServerRoot, two requests
--- request
GET /static.txt
--- response_body
static file
--- request
GET /missing.txt
--- status
404

=== a raw request
--- config
<Location /raw>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs Apache::Request.new.headers_in['X-Twice'].to_s"
</Location>
--- raw_request
GET /raw HTTP/1.1\r\nHost: {host}\r\n
X-Twice: a\r\nX-Twice: b\r\nConnection: close\r\n\r\n
--- response_body_like
\Aa, ?b\Z

=== the error log, expected and not
--- config
LogLevel warn
<Location /count>
    SetHandler mruby-native-script
    mrubyHandler scripts/count.rb
</Location>
--- request
GET /count
--- response_body
counted
--- error_log
MRB00400: .*kit-hit /count
--- no_error_log
\[error\]
kit-hit /other
"""


def test_passing_file(tmp_path):
    junit = tmp_path / "out.xml"
    status, out = kit(tmp_path, PASSING, "--repeat", "2", "--junit", str(junit), "--keep")
    assert status == 0, out
    found = points(out)
    assert len(found) == 6 * 3 and all(found.values()), out
    for mpm in MPMS:
        assert found["a raw request [%s]" % mpm]
        assert found["server starts, stops, no crash [%s]" % mpm]
    assert re.search(r"^1\.\.18$", out, re.M)
    assert "# 18 passed, 0 failed" in out
    # --repeat 2: each block twice on the same server (its log says so)
    roots = re.findall(r"^# ServerRoot kept: (\S+)$", out, re.M)
    assert len(roots) == 3
    try:
        for root in roots:
            logs = os.path.join(root, "logs")
            block = [f for f in os.listdir(logs) if f.startswith("block5.")]
            with open(os.path.join(logs, block[0])) as f:
                assert len(re.findall(r"kit-hit /count", f.read())) == 2
    finally:
        for root in roots:
            shutil.rmtree(root, ignore_errors=True)
    suites = ET.parse(str(junit)).getroot()
    assert len(suites) == 3
    for suite in suites:
        assert suite.get("tests") == "6" and suite.get("failures") == "0"
        assert {c.get("name") for c in suite} >= {"a raw request", "a script's answer, exactly"}


FAILING = r"""
=== passes beside the failures
--- config
<Location /ok>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'fine'"
</Location>
--- request
GET /ok
--- response_body chomp
fine

=== every assertion fails
--- config
<Location /say>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache::Request.new.headers_out['X-Kit'] = 'got'; Apache.rputs %Q(one\ntwo\nthree\n)"
</Location>
--- request
GET /say
--- status
201
--- response_headers
X-Kit: wanted
!X-Kit
X-None: x
--- response_headers_like
X-Kit: w.*
--- response_body
one
TWO
three
--- response_body_like
\Afour
--- response_body_contains
five
--- error_log
never logged
--- no_error_log
AH\d+
"""


def test_failing_file(tmp_path):
    junit = tmp_path / "out.xml"
    status, out = kit(tmp_path, FAILING, "--mpm", "event", "--junit", str(junit))
    assert status == 1, out
    found = points(out)
    assert found == {"passes beside the failures [event]": True, "every assertion fails [event]": False,
                     "server starts, stops, no crash [event]": True}, out
    for line in ("status: expected 201, got 200",
                 "header X-Kit: expected exactly 'wanted', got 'got'",
                 "header X-Kit: expected absent, got ['got']",
                 "header X-None: expected exactly 'x', got none",
                 "header X-Kit: expected to match 'w.*', got 'got'",
                 "response body differs:",
                 "-TWO", "+two", " one",
                 "response body does not match /\\Afour/:",
                 "response body does not contain 'five':",
                 "error log: no line matches /never logged/",
                 "error log of the block (last 20 lines):"):
        assert "#   " in out and line in out, (line, out)
    assert "# 2 passed, 1 failed" in out
    suite = ET.parse(str(junit)).getroot()[0]
    assert suite.get("failures") == "1"
    failure = [c for c in suite if c.get("name") == "every assertion fails"][0].find("failure")
    assert "status: expected 201, got 200" in failure.get("message") and "-TWO" in failure.text


RAISES = r"""
=== a script that raises
--- config
<Location /boom>
    SetHandler mruby-native-script
    mrubyHandlerCode "raise ArgumentError, 'kit boom'"
</Location>
--- request
GET /boom
--- status
500
{expect}
"""


def test_error_log_catches_a_script_that_raises(tmp_path):
    # By default any error line of mod_mruby fails the block...
    status, out = kit(tmp_path, RAISES.replace("{expect}", ""), "--mpm", "prefork,event")
    assert status == 1, out
    assert points(out) == {"a script that raises [prefork]": False, "a script that raises [event]": False,
                           "server starts, stops, no crash [prefork]": True,
                           "server starts, stops, no crash [event]": True}, out
    assert "mod_mruby logged errors no '--- error_log' expects" in out
    assert re.search(r"#\s+.*\[mruby:error\].*kit boom", out), out
    # ...unless the block expects it.
    status, out = kit(tmp_path, RAISES.replace("{expect}", "--- error_log\nArgumentError.*kit boom"),
                      "--mpm", "prefork,event")
    assert status == 0, out
    # and no_error_log catches it too
    status, out = kit(tmp_path, RAISES.replace("{expect}", "--- error_log\nkit boom\n--- no_error_log\n"
                                               "ArgumentError"), "--mpm", "worker")
    assert status == 1 and "lines match /ArgumentError/ (no_error_log)" in out, out


WHICH_MPM = r"""
=== which mpm
--- config
<Location /mpm>
    SetHandler mruby-native-script
    <IfModule mpm_prefork_module>
        mrubyHandlerCode "Apache.rputs 'prefork'"
    </IfModule>
    <IfModule mpm_worker_module>
        mrubyHandlerCode "Apache.rputs 'worker'"
    </IfModule>
    <IfModule mpm_event_module>
        mrubyHandlerCode "Apache.rputs 'event'"
    </IfModule>
</Location>
--- request
GET /mpm
--- response_body chomp
worker

=== another block
--- request
GET /
--- status
404
"""


def test_mpm_selection_and_k(tmp_path):
    status, out = kit(tmp_path, WHICH_MPM, "--mpm", "worker")
    assert status == 0, out
    assert set(points(out)) == {"which mpm [worker]", "another block [worker]",
                                "server starts, stops, no crash [worker]"}, out
    status, out = kit(tmp_path, WHICH_MPM, "--mpm", "prefork,event", "-k", "MPM")
    assert status == 1, out
    assert points(out) == {"which mpm [prefork]": False, "which mpm [event]": False,
                           "server starts, stops, no crash [prefork]": True,
                           "server starts, stops, no crash [event]": True}, out
    assert "-worker" in out and "+prefork" in out and "+event" in out
    status, out = kit(tmp_path, WHICH_MPM, "--mpm", "threaded")
    assert status == 2 and "unknown MPM threaded" in out
    status, out = kit(tmp_path, WHICH_MPM, "-k", "nothing such")
    assert status == 2 and "no block selected" in out


def test_format_errors_name_their_line(tmp_path):
    status, out = kit(tmp_path, "=== a\n--- request\nGET /\n--- satus\n200\n")
    assert status == 2 and re.search(r"t\.t:4: unknown section '--- satus'", out), out
    status, out = kit(tmp_path, "=== a\n--- status\n200\n--- request\nGET /\n")
    assert status == 2 and "t.t:2: '--- status' comes after the '--- request' it checks" in out, out
    status, out = kit(tmp_path, "=== a\n--- request\nGET /\n--- response_body_like\n(unclosed\n")
    assert status == 2 and "t.t:4: bad regular expression" in out, out
    status, out = kit(tmp_path, "--- request\nGET /\n")
    assert status == 2 and "belongs in a block" in out, out
    status, out = kit(tmp_path, "=== a\n--- file ../x\ny\n--- request\nGET /\n")
    assert status == 2 and "relative to the ServerRoot" in out, out


def test_parallel_blocks_do_not_interfere(tmp_path):
    """Twelve blocks at once, each with its own handler, each slow enough
    to overlap the others: each gets its own answer, and its error log
    holds its own lines only."""
    blocks = []
    for i in range(12):
        blocks.append(r"""
=== block {i}
--- config
<Location /who>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.errlogger(Apache::APLOG_WARNING, 'from b{i}.'); Apache.sleep(0.2); Apache.rputs 'b{i}'"
</Location>
--- request
GET /who
--- response_body chomp
b{i}
--- error_log
from b{i}\.
--- no_error_log
from b(?!{i}\.)\d+\.
""".replace("{i}", str(i)))
    status, out = kit(tmp_path, "".join(blocks), "--jobs", "12", "--repeat", "3")
    assert status == 0, out
    found = points(out)
    assert len(found) == 13 * 3 and all(found.values()), out


@pytest.fixture(scope="module")
def crasher(tmp_path_factory):
    if not os.access(APXS, os.X_OK):
        pytest.skip("no apxs at %s (Debian's apache2-dev): the crashing module cannot be built" % APXS)
    build = tmp_path_factory.mktemp("mm-crash")
    so = build_module(APXS, os.path.join(ROOT, "test", "mod_mm_crash.c"), str(build))
    # httpd's children (www-data) load it
    os.chmod(str(build), 0o755)
    yield so
    shutil.rmtree(str(build), ignore_errors=True)


CRASH = r"""
--- server_config
LoadModule mm_crash_module {so}

=== a block before it
--- request
GET /
--- status
404

=== a handler that segfaults
--- config
<Location /crash>
    SetHandler mm-crash
</Location>
--- request
GET /crash
"""


def test_a_crash_is_detected(tmp_path, crasher):
    # One block at a time: a crash takes down the requests its process
    # (its threads) was serving.
    status, out = kit(tmp_path, CRASH.replace("{so}", crasher), "--jobs", "1")
    assert status == 1, out
    found = points(out)
    for mpm in MPMS:
        assert found["server starts, stops, no crash [%s]" % mpm] is False, out
        assert found["a handler that segfaults [%s]" % mpm] is False, out
        assert found["a block before it [%s]" % mpm] is True, out
    assert len(re.findall(r"httpd \((prefork|worker|event)\) crashed:", out)) == 3, out
    assert "exit signal Segmentation fault" in out
    assert "no response" in out


CAPTURE = r"""
=== a value captured from one response, sent in the next
--- config
<Location /make>
    SetHandler mruby-native-script
    mrubyHandlerCode "r = Apache::Request.new; r.headers_out['Location'] = '/show/' + r.args.to_s; Apache.rputs 'id=' + r.args.to_s + ';'"
</Location>
<Location /show>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs Apache::Request.new.uri"
</Location>
--- request
GET /make?x42
--- response_headers_like
Location: /show/(?<id>x\d+)
--- response_body_like
id=(?P<same>\w+);
--- request
GET /show/{id}
--- response_body chomp
/show/{same}
--- request
GET /show/{id}
--- response_body chomp
/show/other
"""


def test_named_groups_are_captured(tmp_path):
    status, out = kit(tmp_path, CAPTURE, "--mpm", "worker")
    assert status == 1, out
    assert "request 2 " not in out
    assert re.search(r"request 3 .*response body differs", out)
    assert "-/show/other" in out and "+/show/x42" in out


WHO = r"""
=== the children write a file
--- config
<Location /touch>
    SetHandler mruby-native-script
    mrubyHandlerCode "File.open('{root}/out/touched', 'w') { |f| f.write('x') }; Apache.rputs 'done'"
</Location>
--- request
GET /touch
--- response_body chomp
done
"""


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("runuser"), reason="needs root and runuser")
def test_as_root_and_as_a_normal_user(tmp_path):
    """As root, httpd's children run as www-data; as another user (nobody
    here), httpd runs as that user, on its own port and ServerRoot. As
    root, a --tmp that www-data cannot enter is refused, with why."""
    import pwd
    import tempfile
    p = subprocess.run([sys.executable, KIT, "--module", MODULE, "--timeout", TOOL_TIMEOUT, "--tmp", str(tmp_path), "x.t"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "is not open to others (o+x)" in p.stderr, p.stderr
    where = tempfile.mkdtemp(prefix="kit-who-")  # in /tmp: nobody reads it
    try:
        os.chmod(where, 0o755)
        path = os.path.join(where, "who.t")
        with open(path, "w") as f:
            f.write(WHO)
        os.chmod(path, 0o644)
        runs = {"www-data": [], "nobody": ["runuser", "-u", "nobody", "--"]}
        for user, prefix in runs.items():
            p = subprocess.run(prefix + [sys.executable, KIT, "--module", MODULE, "--timeout", TOOL_TIMEOUT,
                                         "--mpm", "event", "--keep", path],
                               capture_output=True, text=True, timeout=120, env=tool_env(os.path.join(where, "sanitizer-" + user)))
            out = p.stdout + p.stderr
            assert p.returncode == 0, out
            assert "# 2 passed, 0 failed" in out
            root = re.search(r"^# ServerRoot kept: (\S+)$", out, re.M).group(1)
            try:
                owner = pwd.getpwuid(os.stat(os.path.join(root, "out", "touched")).st_uid).pw_name
                assert owner == user
                assert pwd.getpwuid(os.stat(root).st_uid).pw_name == ("root" if user == "www-data" else user)
                with open(os.path.join(root, "httpd.conf")) as f:
                    conf = f.read()
                assert ("User www-data" in conf) == (user == "www-data")
            finally:
                shutil.rmtree(root, ignore_errors=True)
    finally:
        shutil.rmtree(where, ignore_errors=True)
