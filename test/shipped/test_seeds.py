"""Configurations and scripts written for the original mod_mruby, verbatim:
directive names in any letter case, `require 'Apache'`, Apache.return
after output."""

from httpd import module_httpd

# The httpd.conf fragment of the thread-safety announcement, as published
# (note "Addhandler" and "sethandler").
SEED_000_CONF = """
LoadModule mruby_module       modules/mod_mruby.so
Addhandler mruby-script .mrb
<Location /mruby>
    sethandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'hello mod_mruby world'"
</Location>
"""

# The ngx_mruby comparison's location, with its lower-case directive.
SEED_002_CONF = """
<Location /mruby2>
    SetHandler mruby-native-script
    mrubyhandlercode "Apache.rputs 'hello mod_mruby world!'; Apache.return Apache::HTTP_OK;"
</Location>
<Location /upper>
    SETHANDLER MRUBY-NATIVE-SCRIPT
    MRUBYHANDLERCODE "Apache.rputs 'upper case'"
</Location>
"""

FILES = {
    "htdocs/hello.mrb": 'Apache.rputs("hello mruby world!!")\n',
    # The mod_lua comparison's script.
    "htdocs/hello_require.mrb": "require 'Apache'\nApache.rputs(\"hello world!\")\n",
}

# Our LoadModule line is in the generated config already: the seed's own
# (which names modules/mod_mruby.so under its ServerRoot) is left out.
BODY = SEED_000_CONF.replace("LoadModule mruby_module       modules/mod_mruby.so\n", "") + SEED_002_CONF

server = module_httpd("seeds", BODY, files=FILES)


def test_inline_handler_code(server):
    r = server.get("/mruby")
    assert r.status == 200
    assert r.body == b"hello mod_mruby world"
    assert r.headers["Content-Length"] == "21"


def test_file_handler_mrb(server):
    r = server.get("/hello.mrb")
    assert r.status == 200
    assert r.body == b"hello mruby world!!"


def test_require_apache_then_output(server):
    for _ in range(2):
        r = server.get("/hello_require.mrb")
        assert (r.status, r.body) == (200, b"hello world!")


def test_return_http_ok_after_output(server):
    r = server.get("/mruby2")
    assert (r.status, r.body) == (200, b"hello mod_mruby world!")


def test_directives_in_any_case(server):
    r = server.get("/upper")
    assert (r.status, r.body) == (200, b"upper case")


def test_static_files_unaffected(server):
    server.write("htdocs/static.txt", "plain file\n")
    r = server.get("/static.txt")
    assert (r.status, r.body) == (200, b"plain file\n")
    assert "[mruby:error]" not in server.error_log()
