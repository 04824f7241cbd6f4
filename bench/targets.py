"""The benchmark's targets: what each one configures and loads, the URL it
answers and the body it must answer. Adding a target is one line in TARGETS
(mruby_inline() builds any inline mod_mruby target from its code)."""

import os

HTDOCS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "htdocs")

# Every hello-world target answers exactly this.
HELLO = "hello world!"

# The realistic handler's query: five parameters, 27 lines of about 39
# bytes, so the body is about 1 KB.
REALISTIC_QUERY = "name=bench&n=27&page=3&sort=asc&q=hello"

GROUP_HELLO = "hello"          # the 12-byte body; compared to the C floor and to static
GROUP_REALISTIC = "realistic"  # the realistic handler; mod_mruby compared to mod_lua

# How httpd maps a target's URL. A <Location> section costs every request a
# location walk and a configuration merge, and a URL with no file behind it
# a failed stat; a file named by AddHandler costs neither, which is worth
# about a microsecond of CPU. Each shape has its own C floor, so that "× C floor"
# compares handlers, not URL mappings.
#
# Targets compared with each other answer the same bytes (mod_bench_hello.c)
# at URLs of the same length: httpd's own work on a URL (normalizing it,
# joining it to the document root, the directory walk) grows with its
# length, 15 to 25 instructions per character, which the target with the
# longer URL would pay. So the <Location> targets are /c, /i and /f, and
# the file targets /hello.hlo, /hello.mrb, /hello.lua and /hello.txt.
SHAPE_LOCATION = "location"
SHAPE_FILE = "file"
FLOOR = {SHAPE_LOCATION: "c", SHAPE_FILE: "c_file"}


def script(name):
    with open(os.path.join(HTDOCS, name)) as f:
        return f.read()


class Target:
    """name: the key used on the command line and in results; label: what
    tables and charts call it; modules: keys of the module paths (see
    bench/run); conf: httpd configuration, where {docroot} and {threads}
    (worker threads per child) are filled in; files: docroot files."""

    def __init__(self, name, label, group, path, modules=(), conf="", files=None, expect=HELLO,
                 packages=(), shape=SHAPE_FILE):
        self.name = name
        self.shape = shape
        self.label = label
        self.group = group
        self.path = path
        self.modules = tuple(modules)
        self.conf = conf
        self.files = {"htdocs/" + k: v for k, v in (files or {}).items()}
        self.expect = expect  # the exact body, or None when it is checked otherwise
        self.packages = tuple(packages)  # Debian packages it needs


def mruby_inline(name, label, code, location=None):
    """An inline mod_mruby target: `code` under SetHandler
    mruby-native-script. The code is one configuration argument, so it
    must not contain double quotes."""
    location = location or "/" + name
    conf = ('<Location %s>\n    SetHandler mruby-native-script\n    mrubyHandlerCode "%s"\n</Location>'
            % (location, code))
    return Target(name, label, GROUP_HELLO, location, ["mruby"], conf, shape=SHAPE_LOCATION)


LUA_CONF = "LuaScope thread\nLuaCodeCache stat\nAddHandler lua-script .lua"

# Under a threaded MPM, mod_perl clones interpreters from a pool whose
# default maximum (5 per child) is far below the worker count: allowing one
# per worker keeps "a worker for every connection" true for it too.
PERL_CONF = """PerlModule ModPerl::Registry
<IfModule !mpm_prefork_module>
    PerlInterpStart 2
    PerlInterpMax {threads}
    PerlInterpMaxSpare {threads}
</IfModule>
<Files "*.pl">
    SetHandler perl-script
    Options +ExecCGI
    PerlResponseHandler ModPerl::Registry
    PerlOptions +ParseHeaders
</Files>"""

TARGETS = [
    Target("static", "static file", GROUP_HELLO, "/hello.txt", files={"hello.txt": HELLO}),
    Target("c", "C handler (floor)", GROUP_HELLO, "/c", ["bench_hello"],
           "<Location /c>\n    SetHandler bench-hello\n</Location>", shape=SHAPE_LOCATION),
    Target("c_file", "C handler, file (floor)", GROUP_HELLO, "/hello.hlo", ["bench_hello"],
           "AddHandler bench-hello .hlo", {"hello.hlo": ""}),
    Target("lua", "mod_lua", GROUP_HELLO, "/hello.lua", ["lua"], LUA_CONF,
           {"hello.lua": script("hello.lua")}),
    Target("perl", "mod_perl Registry", GROUP_HELLO, "/hello.pl", ["perl"], PERL_CONF,
           {"hello.pl": script("hello.pl")}, packages=["libapache2-mod-perl2"]),
    mruby_inline("mruby_inline", "mod_mruby inline", "Apache.rputs 'hello world!'", "/i"),
    # Naming Apache::Async makes the script run in a fiber (on the event MPM
    # only: elsewhere it cannot suspend, and runs directly). Against
    # mruby_inline, this also counts one constant lookup.
    mruby_inline("mruby_fiber", "mod_mruby fiber", "x = Apache::Async; Apache.rputs 'hello world!'", "/f"),

    Target("mruby_file", "mod_mruby file", GROUP_HELLO, "/hello.mrb", ["mruby"],
           "AddHandler mruby-script .mrb", {"hello.mrb": script("hello.mrb")}),
    Target("lua_realistic", "mod_lua realistic", GROUP_REALISTIC, "/realistic.lua?" + REALISTIC_QUERY,
           ["lua"], LUA_CONF, {"realistic.lua": script("realistic.lua")}, expect=None),
    Target("mruby_realistic", "mod_mruby realistic", GROUP_REALISTIC,
           "/realistic.mrb?" + REALISTIC_QUERY, ["mruby"], "AddHandler mruby-script .mrb",
           {"realistic.mrb": script("realistic.mrb")}, expect=None),
]

# Measured for instructions only (the callgrind table), not by ab: one
# HMAC-SHA256 of 1 KB from Ruby costs this target's count less mod_mruby
# inline's (less the 1 KB String it makes, a few hundred instructions).
INSTRUCTIONS_ONLY = [
    Target("mruby_hmac", "mod_mruby inline + HMAC-SHA256 of 1 KB", GROUP_HELLO, "/hmac", ["mruby"],
           '<Location /hmac>\n    SetHandler mruby-native-script\n    mrubyHandlerCode '
           '"Apache.rputs OpenSSL::HMAC.hexdigest(\'SHA256\', \'a secret key\', \'a\' * 1024)"\n</Location>',
           shape=SHAPE_LOCATION, expect="979d20e15e30f5483066653cf3da635853e18c242e13a36f144307b7700bf68a"),
]

BY_NAME = {t.name: t for t in TARGETS + INSTRUCTIONS_ONLY}

# The CPU-parallelism case: the same counted loop in each language, in one
# child process with several threads (see bench/cases.py).
SPIN = {
    "mruby": Target("mruby_spin", "mod_mruby", "spin", "/spin.mrb", ["mruby"],
                    "AddHandler mruby-script .mrb", {"spin.mrb": script("spin.mrb")}, expect=None),
    "lua": Target("lua_spin", "mod_lua", "spin", "/spin.lua", ["lua"], LUA_CONF,
                  {"spin.lua": script("spin.lua")}, expect=None),
}
