"""Configuration of filters and providers is checked when httpd reads it:
names that exist already, misplaced or misspelled directives, options a
directive does not take, Ruby syntax errors."""

import pytest

SCRIPT = "f = Apache::Filter.new\n"


@pytest.fixture
def conf(make_httpd, mpm):
    srv = make_httpd("slotconf", mpm, modules=("deflate", "authz_user"))
    srv.write("scripts/f.rb", SCRIPT)
    return srv


@pytest.mark.parametrize("line, message", [
    ("mrubyOutputFilterNamed DEFLATE {root}/scripts/f.rb",
     "an output filter named 'DEFLATE' exists already"),
    ("mrubyInputFilterNamed deflate {root}/scripts/f.rb",
     "an input filter named 'deflate' exists already"),
    ("mrubyAuthzProvider user {root}/scripts/f.rb",
     "an authz provider named 'user' exists already"),
    ("mrubyOutputFilterNamed mruby {root}/scripts/f.rb",
     "'mruby' is reserved (the section's own filters and authn provider)"),
    ("mrubyAuthzProvider mruby {root}/scripts/f.rb",
     "'mruby' is reserved (the section's own filters and authn provider)"),
    ("mrubyOutputFilterNamedCode 'a;b' 'x = 1'",
     "'a;b' is not a valid name"),
    ("mrubyOutputFilter {root}/scripts/f.rb bogus",
     "unknown option 'bogus'"),
    ("mrubyInputFilter {root}/scripts/f.rb stream",
     "unknown option 'stream'"),
    ("mrubyOutputFilterCode 'x = 1' cache",
     "unknown option 'cache'"),
    ("mrubyAuthnCheckPassword",
     "usage: mrubyAuthnCheckPassword file-path [cache]"),
    ("mrubyOutputFilter {root}/scripts/missing.rb",
     "cannot open"),
    ("mrubyOutputFilterCode 'f = Apache::Filter.new(('",
     "syntax error"),
    ("<Location /x>\n    mrubyOutputFilterNamed inner {root}/scripts/f.rb\n</Location>",
     "mrubyOutputFilterNamed not allowed in <Location> context"),
    ("<VirtualHost 127.0.0.1:{port}>\n    mrubyAuthzProvider inner {root}/scripts/f.rb\n</VirtualHost>",
     "cannot occur within <VirtualHost> section"),
    ("<Location /x>\n    Require team a\n</Location>\nmrubyAuthzProvider team {root}/scripts/f.rb",
     "Unknown Authz provider: team"),
])
def test_refused_at_configuration_time(conf, line, message):
    code, out = conf.configtest(line + "\n")
    assert code != 0, out
    assert message in out


def test_too_many_named_filters(conf):
    lines = "".join("mrubyOutputFilterNamedCode f%d 'x = 1'\n" % i for i in range(33))
    code, out = conf.configtest(lines)
    assert code != 0
    assert "at most 32 named output filters" in out


def test_a_complete_configuration_passes(conf):
    code, out = conf.configtest(r"""
mrubyOutputFilterNamed upper {root}/scripts/f.rb cache stream
mrubyOutputFilterNamedCode lower "x = 1" stream
mrubyInputFilterNamed in1 {root}/scripts/f.rb cache
mrubyAuthzProvider team {root}/scripts/f.rb
<Location /x>
    SetOutputFilter mruby;upper;lower
    SetInputFilter mruby;in1
    mrubyOutputFilter {root}/scripts/f.rb stream cache
    mrubyInputFilterCode "x = 1"
    mrubyAuthnCheckPassword {root}/scripts/f.rb cache
    mrubyAuthnGetRealmHashCode "x = 1"
    Require team a "b c"
</Location>
""")
    assert code == 0, out
    assert "Syntax OK" in out
