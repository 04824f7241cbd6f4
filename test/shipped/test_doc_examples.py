"""The examples of docs/directives.md and docs/ruby-api.md work as their
text says. Each test reads its example from the page when it runs (an
edited example is tested as it now is), found by the heading of its
section, and fails when the section or the block is gone.

What an administrator would change to use an example is changed here too,
and only that, by `adapt`: each substitution names the text it replaces
and fails when that text is no longer in the example. The paths of the
examples (/etc/apache2/mruby/, /srv/..., /run/apache2/) become paths under
the test server's root, ports become the test server's (or its backend's),
the memcached servers of mrubyCache's example two started by the test,
and a `LoadModule mruby_module` line is dropped: the test server loads the
module that was built. Scripts an example names without showing them are
written by the test, which says what they do.

Every code block of the two pages is tested; test_no_example_is_left_out
fails when a page gains one that no test runs. mrubyTimeout's is skipped
with a libmruby without the instruction hook (Debian's), as in
test_limits.py.

The last tests hold the pages to the module: every directive of
directives.md is one httpd knows from mod_mruby (and the reverse),
allowed in the sections its Context row names and only there, and every
method and constant listed in ruby-api.md exists in the VM (with the
value the page gives, where it gives one), and the reverse: every method,
constant and class the module adds to the VM is listed there or reserved
(its Reserved names section)."""

import base64
import concurrent.futures
import gzip
import hashlib
import hmac
import os
import re
import shutil
import subprocess
import time

import pytest

import tls
from auth_clients import basic, digest_get
from cache_servers import memcached_backend
from httpd import HTTPD, well_inside_window
from loopback import free_port
from recipes import ROOT, fenced_blocks

HOOKED = os.environ.get("MM_MRUBY_MODE") == "source"

AUTH_MODULES = ("auth_basic", "auth_digest", "authn_core", "authn_file", "authz_user")


def page(name):
    with open(os.path.join(ROOT, "docs", name)) as f:
        return f.read()


def headings(lines):
    """(line index, level, title) of each Markdown heading, code blocks
    (where a Ruby or Apache comment starts with #) left out."""
    out, fenced = [], False
    for i, line in enumerate(lines):
        if line.startswith("```"):
            fenced = not fenced
        m = None if fenced else re.match(r"(#+) (.*)", line)
        if m:
            out.append((i, len(m.group(1)), m.group(2)))
    return out


def section(name, heading):
    """The text of the section of docs/NAME whose heading is `heading`,
    or else the first that starts with it, up to the next heading of its
    level or above."""
    lines = page(name).splitlines()
    titles = headings(lines)
    found = ([t for t in titles if t[2] == heading]
             or [t for t in titles if t[2].startswith(heading)])
    if not found:
        pytest.fail("docs/%s has no section %r" % (name, heading))
    i, level, _ = found[0]
    end = next((j for j, lv, _ in titles if j > i and lv <= level), len(lines))
    return "\n".join(lines[i + 1:end])


def example(name, heading, lang, index=0, count=None):
    """The index-th fenced block in `lang` of that section; `count`, when
    given, is how many such blocks the section must have."""
    blocks = [text for block_lang, text in fenced_blocks(section(name, heading)) if block_lang == lang]
    if count is not None:
        assert len(blocks) == count, "docs/%s, %r: %d %s blocks, expected %d" % (
            name, heading, len(blocks), lang, count)
    assert len(blocks) > index, "docs/%s, %r: no %s block #%d" % (name, heading, lang, index)
    return blocks[index]


def adapt(text, *subs):
    """text with each (old, new) substitution made; old must be there."""
    for old, new in subs:
        assert old in text, "the example no longer has %r:\n%s" % (old, text)
        text = text.replace(old, new)
    return text


# What Debian's apache2.conf says of the file system, before any example.
DEBIAN_ROOT = "<Directory />\n    AllowOverride None\n    Require all denied\n</Directory>\n"

# What every adapted example needs.
ETC = ("/etc/apache2/mruby/", "{root}/mruby/")
RUN = ("/run/apache2/", "{root}/run/")
OWN_MODULE = ("LoadModule mruby_module /usr/lib/apache2/modules/mod_mruby.so\n", "")


def directives_example(heading, lang="apache", **kw):
    return example("directives.md", heading, lang, **kw)


def api_example(heading, lang="apache", **kw):
    return example("ruby-api.md", heading, lang, **kw)


def answering(path, code):
    """A section of the test's own at path whose handler is code (in
    single quotes only)."""
    return ('<Location %s>\n    SetHandler mruby-native-script\n    mrubyHandlerCode "%s"\n</Location>\n'
            % (path, code))


# ------------------------------------------------------- directives.md

def answered(srv, path, done, timeout=20):
    """path's text once done(text) holds (within timeout s). A timer's
    first call comes its interval after the child started, and httpd takes
    connections before its child has forked and run the mrubyTimers
    scripts: waited for, not slept for."""
    deadline = time.time() + timeout
    while True:
        text = srv.ok(path).text
        if done(text) or time.time() > deadline:
            return text
        time.sleep(0.1)


def test_child_exit(make_httpd, mpm):
    """The example of mrubyChildExit: each child, as it stops, says so in
    the file (here under the server's root)."""
    conf = adapt(directives_example("mrubyChildExit, mrubyChildExitCode, and their First, Middle, Last forms"),
                 ("/var/log/apache2/", "{root}/out/"))
    srv = make_httpd("doc-child-exit", mpm, conf + answering("/pid", "Apache.rputs Process.pid.to_s")).start()
    pid = int(srv.ok("/pid").text)
    assert not os.path.exists(srv.path("out/children.log"))
    srv.stop()
    with open(srv.path("out/children.log")) as f:
        lines = f.read().splitlines()
    assert "%d stopped" % pid in lines
    assert all(re.fullmatch(r"\d+ stopped", line) for line in lines), lines


def test_timers_directive(make_httpd, mpm):
    """The example of mrubyTimers: the heartbeat in the cache follows the
    clock, each second."""
    conf = directives_example("mrubyTimers, mrubyTimersCode, and their First, Middle, Last forms")
    srv = make_httpd("doc-timers", mpm, conf + answering("/beat", "Apache.rputs Apache::Cache[%q(heartbeat)].to_s"))
    srv.start()
    first = int(answered(srv, "/beat", lambda text: text != "") or "0")
    assert abs(first - time.time()) < 2
    assert int(answered(srv, "/beat", lambda text: int(text) > first, timeout=10)) > first


def test_handlers(make_httpd, mpm):
    """The two handlers: mruby-script makes .mrb files scripts,
    mruby-native-script answers with the section's script."""
    conf = adapt(directives_example("mod_mruby directives"), OWN_MODULE)
    srv = make_httpd("doc-handlers", mpm, conf, files={"htdocs/hi.mrb": "Apache.rputs 'from a file'"}).start()
    assert srv.ok("/mruby").body == b"hello mod_mruby world"
    assert srv.ok("/hi.mrb").body == b"from a file"


def test_inheritance(make_httpd, mpm):
    """Fixups are inherited per phase: /app and /app/static get the
    server's header, /app/embed replaces it, the virtual host inherits
    it. /srv/app/main.rb is a script that answers "app"."""
    conf = adapt(directives_example("Inheritance"), ("/srv/app/", "{root}/srv/app/"),
                 ("<VirtualHost *:80>", "<VirtualHost *:{port}>"))
    files = {
        "srv/app/main.rb": "Apache.rputs 'app'",
        "htdocs/app/static/a.txt": "static",
        "htdocs/app/embed/b.txt": "embed",
        "htdocs/c.txt": "vhost",
    }
    srv = make_httpd("doc-inherit", mpm, conf, files=files).start()
    r = srv.ok("/app/x")
    assert r.body == b"app" and r.headers["X-Frame-Options"] == "DENY"
    r = srv.ok("/app/static/a.txt")
    assert r.body == b"static" and r.headers["X-Frame-Options"] == "DENY"
    r = srv.ok("/app/embed/b.txt")
    assert r.headers.get_all("X-Frame-Options") == ["SAMEORIGIN"]
    r = srv.ok("/c.txt", headers={"Host": "api.example.com"})
    assert r.body == b"vhost" and r.headers["X-Frame-Options"] == "DENY"


def test_if_instead_of_limit(make_httpd, mpm):
    """The <If> gives POST a 50M body limit; other methods keep the 8 MB
    default. The test adds a handler that reads the body."""
    conf = directives_example("`<Limit>` and `<LimitExcept>`")
    conf += answering("/upload", "Apache.rputs Apache::Request.new.body.size")
    srv = make_httpd("doc-if", mpm, conf).start()
    body = b"x" * (9 * 1024 * 1024)
    assert srv.ok("/upload", method="POST", body=body).body == str(len(body)).encode()
    assert srv.request("PUT", "/upload", body=body).status == 413
    too_big = srv.raw(b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n"
                      b"Connection: close\r\n\r\n" % (50 * 1024 * 1024 + 1))
    assert too_big.status == 413


def test_post_read_request(make_httpd, mpm):
    """The note set right after the request is read is seen by the later
    phases (the test's handler shows it)."""
    conf = directives_example("mrubyPostReadRequest,", count=1)
    conf += answering("/t0", "Apache.rputs Apache::Request.new.notes['t0']")
    srv = make_httpd("doc-prr", mpm, conf).start()
    t0 = float(srv.ok("/t0").text)
    assert abs(t0 - time.time()) < 60


def test_quick_handler(make_httpd, mpm):
    conf = directives_example("mrubyQuickHandler,", count=1)
    srv = make_httpd("doc-quick", mpm, conf, files={"htdocs/other.txt": "other"}).start()
    assert srv.ok("/ping").body == b"pong"
    assert srv.ok("/other.txt").body == b"other"


def test_translate_name(make_httpd, mpm):
    """/docs/... is served from /srv/docs/..., in a server that denies
    every directory as Debian's apache2.conf does."""
    conf = DEBIAN_ROOT + adapt(directives_example("mrubyTranslateName,", count=1),
                               ("/srv/docs", "{root}/srv/docs"))
    srv = make_httpd("doc-translate", mpm, conf, files={"srv/docs/guide.txt": "the guide"}).start()
    assert srv.ok("/docs/guide.txt").body == b"the guide"
    assert srv.get("/docs/missing.txt").status == 404


def test_map_to_storage(make_httpd, mpm):
    """Under /api/ the directory walk is skipped: the test's <Directory>
    that denies everything applies to the other URIs only."""
    conf = directives_example("mrubyMapToStorage,", count=1)
    conf += '<Directory "{docroot}">\n    Require all denied\n</Directory>\n'
    conf += answering("/api/", "Apache.rputs 'api'")
    srv = make_httpd("doc-m2s", mpm, conf, files={"htdocs/page.txt": "page"}).start()
    assert srv.ok("/api/items").body == b"api"
    assert srv.get("/page.txt").status == 403


def test_access_checker(make_httpd, mpm):
    conf = directives_example("mrubyAccessChecker,", count=1)
    srv = make_httpd("doc-access", mpm, conf, files={"htdocs/admin/index.txt": "admin"}).start()
    assert srv.get("/admin/index.txt").status == 403
    assert srv.get("/admin/index.txt", headers={"X-Admin-Token": "guess"}).status == 403
    assert srv.ok("/admin/index.txt", headers={"X-Admin-Token": "s3cret"}).body == b"admin"


def test_fixups(make_httpd, mpm):
    conf = directives_example("mrubyFixups,", count=1)
    srv = make_httpd("doc-fixups", mpm, conf, files={"htdocs/a.txt": "a"}).start()
    assert srv.ok("/a.txt").headers["X-Content-Type-Options"] == "nosniff"


def test_handler_file_cached(make_httpd, mpm):
    """With `cache` the script is compiled once: a change of the file is
    not seen. app.rb is the test's."""
    conf = adapt(directives_example("mrubyHandler", count=1), ETC)
    srv = make_httpd("doc-handler", mpm, conf, files={"mruby/app.rb": "Apache.rputs 'first'"}).start()
    assert srv.ok("/app").body == b"first"
    srv.write("mruby/app.rb", "Apache.rputs 'second'")
    for _ in range(5):
        assert srv.ok("/app").body == b"first"


def test_handler_code(make_httpd, mpm):
    srv = make_httpd("doc-handler-code", mpm, directives_example("mrubyHandlerCode", count=1)).start()
    assert srv.ok("/hello").body == b"hello"


@pytest.mark.skipif(not HOOKED, reason="mrubyTimeout needs libmruby with MRB_USE_DEBUG_HOOK (source build)")
def test_timeout(make_httpd, mpm):
    """A script under /api that runs past 2 s is stopped with a 503."""
    conf = directives_example("mrubyTimeout", count=1)
    conf += answering("/api/spin", "loop { }")
    srv = make_httpd("doc-timeout", mpm, conf).start()
    t = time.time()
    assert srv.get("/api/spin").status == 503
    assert 1.5 < time.time() - t < 10


def test_request_body_limit(make_httpd, mpm):
    """/upload takes bodies up to 50 MB. upload.rb is the test's: it
    answers the size of the body it read."""
    conf = adapt(directives_example("mrubyRequestBodyLimit", count=1), ETC)
    files = {"mruby/upload.rb": "Apache.rputs Apache::Request.new.body.size"}
    srv = make_httpd("doc-body-limit", mpm, conf, files=files).start()
    body = b"x" * (9 * 1024 * 1024)
    assert srv.ok("/upload", method="POST", body=body).body == str(len(body)).encode()
    r = srv.raw(b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 52428801\r\n"
                b"Connection: close\r\n\r\n")
    assert r.status == 413


def test_default_return(make_httpd, mpm):
    """The virtual host runs the original mod_mruby's proxying script,
    which ends without Apache.return (the test's proxy.rb, to a backend of
    the test's); the main server, without the directive, refuses it."""
    backend = make_httpd("doc-return-backend", mpm, answering("/app", "Apache.rputs 'backend'")).start()
    conf = adapt(directives_example("mrubyDefaultReturn", count=1), ETC,
                 ("<VirtualHost *:80>", "<VirtualHost *:{port}>"))
    conf = ('<VirtualHost *:{port}>\n    ServerName main.example.com\n'
            '    mrubyTranslateName {root}/mruby/proxy.rb\n</VirtualHost>\n') + conf
    proxy = ('r = Apache::Request.new\nr.handler = "proxy-server"\n'
             'r.proxyreq = Apache::PROXYREQ_REVERSE\n'
             'r.filename = "proxy:http://127.0.0.1:%d/app" + r.uri\n' % backend.port)
    srv = make_httpd("doc-return", mpm, conf, files={"mruby/proxy.rb": proxy},
                     modules=("proxy", "proxy_http")).start()
    assert srv.ok("/x", headers={"Host": "legacy.example.com"}).body == b"backend"
    assert srv.get("/x", headers={"Host": "main.example.com"}).status == 403


def test_directory_walk(make_httpd, mpm):
    """The example's gateway reaches a backend of the test's (under
    Debian's <Directory />), and its own Require applies: a client from
    another address is refused. (test_directory_walk.py shows what the
    walk's absence changes.)"""
    backend = make_httpd("doc-walk-backend", mpm,
                         answering("/api", "Apache.rputs 'backend ' + Apache::Request.new.uri")).start()
    example = directives_example("mrubyDirectoryWalk", count=1)
    conf = DEBIAN_ROOT + adapt(example, ("http://10.0.0.5:8080", "http://127.0.0.1:%d" % backend.port),
                               ("Require ip 10.0.0.0/8", "Require ip 127.0.0.1"))
    srv = make_httpd("doc-walk", mpm, conf, modules=("authz_host",)).start()
    assert srv.ok("/api/v1").body == b"backend /api/v1"
    assert srv.request("GET", "/api/v1", source="127.0.0.2").status == 403


def test_server_token(make_httpd, mpm):
    conf = directives_example("mrubyServerToken", count=1)
    srv = make_httpd("doc-token", mpm, conf, files={"htdocs/a.txt": "a"}).start()
    version = srv.ok("/a.txt").headers["Server"]
    promised = conf.split("# Server: ", 1)[1].split("\n")[0]
    # the example's comment shows the form: httpd's own part, then ours
    assert re.fullmatch(r"Apache/[\d.]+ \(\w+\) mod_mruby/[\d.]+", promised)
    assert re.fullmatch(r"Apache/[\d.]+ \(\w+\) mod_mruby/[\d.]+", version), version
    assert version.endswith(promised.rsplit(" ", 1)[1])


def test_output_filter(make_httpd, mpm):
    conf = directives_example("mrubyOutputFilter, mrubyOutputFilterCode", count=1)
    files = {"htdocs/docs/links.html": '<a href="http://example.com/">x</a> http://a'}
    srv = make_httpd("doc-out", mpm, conf, files=files).start()
    assert srv.ok("/docs/links.html").body == b'<a href="https://example.com/">x</a> https://a'


def test_output_filter_of_mod_mruby(make_httpd, mpm):
    """mod_mruby's own filter example, as the script of the mruby output
    filter: the body upper-cased, after a comment."""
    script = example("directives.md", "mrubyOutputFilter, mrubyOutputFilterCode", "ruby", count=1)
    conf = ('<Location /up>\n    SetOutputFilter mruby\n'
            '    mrubyOutputFilter {root}/mruby/upcase.rb\n</Location>\n')
    files = {
        "mruby/upcase.rb": script,
        "htdocs/up/a.txt": "hello filter",
    }
    srv = make_httpd("doc-out-mod", mpm, conf, files=files).start()
    assert srv.ok("/up/a.txt").body == b"<!-- head -->HELLO FILTER"


def test_output_filter_named(make_httpd, mpm):
    """A named filter chained with DEFLATE. banner.rb is the test's: a
    stream filter that puts a line before the body."""
    conf = adapt(directives_example("mrubyOutputFilterNamed"), ETC)
    files = {
        "mruby/banner.rb": "f = Apache::Filter.new; f.insert_head \"banner\\n\" if f.first?",
        "htdocs/app/a.txt": "content " * 100,
    }
    srv = make_httpd("doc-out-named", mpm, conf, modules=("filter", "deflate"), files=files).start()
    r = srv.ok("/app/a.txt", headers={"Accept-Encoding": "gzip"})
    assert r.headers["Content-Encoding"] == "gzip"
    assert gzip.decompress(r.body) == b"banner\n" + b"content " * 100


def test_input_filter(make_httpd, mpm):
    """A body with <script is refused with 400 before the backend (a
    second server that echoes the body) sees it."""
    backend = make_httpd("doc-in-backend", mpm, answering("/api", "Apache.rputs Apache::Request.new.body")).start()
    conf = adapt(directives_example("mrubyInputFilter, mrubyInputFilterCode", count=1),
                 ("127.0.0.1:8081", "127.0.0.1:%d" % backend.port))
    srv = make_httpd("doc-in", mpm, conf, modules=("proxy", "proxy_http")).start()
    assert srv.ok("/api", method="POST", body=b"name=x").body == b"name=x"
    assert srv.request("POST", "/api", body=b"<script>alert(1)</script>").status == 400
    # the word across two pieces: two chunks of the client's, or the end
    # of the first 64 KB that mod_proxy reads
    assert srv.post_chunked("/api", [b"a" * 1000 + b"<scr", b"ipt>x"]).status == 400
    assert srv.request("POST", "/api", body=b"a" * 65530 + b"<script>x").status == 400
    assert srv.ok("/api", method="POST", body=b"a" * 65530 + b"<scrip>").body == b"a" * 65530 + b"<scrip>"


def auth_server(make_httpd, mpm, name, conf, files=()):
    """A server, started, with the Basic example's script
    (authn_basic.rb), an htpasswd file of the test's that knows sam
    (password "potatoes"), and files."""
    sha = base64.b64encode(hashlib.sha1(b"potatoes").digest()).decode()
    files = dict(files, **{
        "mruby/authn_basic.rb": example("directives.md", "mrubyAuthnCheckPassword,", "ruby", count=1),
        "htpasswd": "sam:{SHA}%s\n" % sha,
        "htdocs/private/a.txt": "private",
        "htdocs/admin/a.txt": "admin",
    })
    return make_httpd(name, mpm, conf, modules=AUTH_MODULES, files=files).start()


def test_authn_check_password(make_httpd, mpm):
    """The script knows bilbo and frodo; a user it does not know is asked
    of the next provider (the file)."""
    conf = adapt(directives_example("mrubyAuthnCheckPassword,", count=1), ETC,
                 ("/etc/apache2/htpasswd", "{root}/htpasswd"))
    srv = auth_server(make_httpd, mpm, "doc-authn", conf)
    assert srv.get("/private/a.txt").status == 401
    assert srv.ok("/private/a.txt", headers=basic("bilbo", "foo")).body == b"private"
    assert srv.ok("/private/a.txt", headers=basic("frodo", "bar")).body == b"private"
    assert srv.get("/private/a.txt", headers=basic("bilbo", "bar")).status == 401
    assert srv.ok("/private/a.txt", headers=basic("sam", "potatoes")).body == b"private"
    assert srv.get("/private/a.txt", headers=basic("sam", "chips")).status == 401


def test_authn_get_realm_hash(make_httpd, mpm):
    """The Digest example's script, for a section of realm "hobbits"."""
    conf = ('<Location /shire>\n    AuthType Digest\n    AuthName "hobbits"\n'
            '    AuthDigestProvider mruby\n    mrubyAuthnGetRealmHash {root}/mruby/digest.rb\n'
            '    Require valid-user\n</Location>\n')
    files = {
        "mruby/digest.rb": example("directives.md", "mrubyAuthnGetRealmHash,", "ruby", count=1),
        "htdocs/shire/a.txt": "shire",
    }
    srv = make_httpd("doc-digest", mpm, conf, modules=AUTH_MODULES, files=files).start()
    assert digest_get(srv, "/shire/a.txt", "frodo", "bar").body == b"shire"
    assert digest_get(srv, "/shire/a.txt", "frodo", "baz").status == 401
    assert digest_get(srv, "/shire/a.txt", "bilbo", "foo").status == 401


def test_authz_provider(make_httpd, mpm):
    """`Require team admins "night shift"` lets in the members of either
    team, with the Basic example's users. A second section of the test's
    requires the admins only: the other team's member is refused."""
    conf = adapt(directives_example("mrubyAuthzProvider,", count=1), ETC)
    conf += ('<Location /admin/only>\n    AuthType Basic\n    AuthName "staff"\n'
             '    AuthBasicProvider mruby\n    mrubyAuthnCheckPassword {root}/mruby/authn_basic.rb\n'
             '    Require team admins\n</Location>\n')
    srv = auth_server(make_httpd, mpm, "doc-authz", conf, files={
        "mruby/team.rb": example("directives.md", "mrubyAuthzProvider,", "ruby", count=1),
        "htdocs/admin/only/a.txt": "only",
    })
    assert srv.get("/admin/a.txt").status == 401
    assert srv.ok("/admin/a.txt", headers=basic("bilbo", "foo")).body == b"admin"
    assert srv.ok("/admin/a.txt", headers=basic("frodo", "bar")).body == b"admin"
    assert srv.ok("/admin/only/a.txt", headers=basic("bilbo", "foo")).body == b"only"
    # httpd answers a user it refuses 401, to let another one log in
    srv.expect("/admin/only/a.txt", 401,
               r'AH01631: user frodo: authorization failure for "/admin/only/a.txt"',
               headers=basic("frodo", "bar"))


def test_cache(make_httpd, mpm):
    """The default cache on the shared dictionary, the named one on two
    memcached of the test's (for 10.0.0.5 and 10.0.0.6), with its
    max-value."""
    servers = [memcached_backend().start() for _ in range(2)]
    try:
        conf = adapt(directives_example("mrubyCache", index=0, count=2), RUN,
                     ("10.0.0.5:11211,10.0.0.6:11211", ",".join(s.spec.split(":", 1)[1] for s in servers)))
        conf += answering("/c", "r = Apache::Request.new; s = Apache::Cache.named(:sessions); "
                          "Apache::Cache[r.args] = 'd'; s[r.args] = 's'; Apache.rputs [Apache::Cache[r.args], "
                          "s[r.args], s.max_value, Apache::Cache.incr('n')].join(' ')")
        srv = make_httpd("doc-cache", mpm, conf).start()
        assert srv.ok("/c?k1").text == "d s 262144 1"
        assert srv.ok("/c?k2").text == "d s 262144 2"
    finally:
        for s in servers:
            s.stop()
            s.cleanup()


# --------------------------------------------------------- ruby-api.md

def handler_server(make_httpd, mpm, name, script, conf="", **kw):
    """A server whose /x answers with script (a file) as its handler,
    after the configuration conf."""
    conf += ('<Location /x>\n    SetHandler mruby-native-script\n'
             '    mrubyHandler {root}/mruby/x.rb\n</Location>\n')
    return make_httpd(name, mpm, conf, files={"mruby/x.rb": script}, **kw).start()


def test_return_ends_a_script(make_httpd, mpm):
    script = api_example("Ending a script early", "ruby", count=1)
    srv = handler_server(make_httpd, mpm, "doc-return", script)
    assert srv.ok("/x").body == b"hoge"


def test_error_log_entry(make_httpd, mpm):
    """An exception is a 500 and the log entry of the page's sample: the
    script, the exception, its line and message, the backtrace. The
    script is the test's, with the sample's lines (3 and 9)."""
    sample = api_example("Errors", "", count=1).strip()
    script = "# an app\ndef check(v)\n  raise ArgumentError, 'bad input' unless v\nend\n\n\n\n\ncheck(nil)\n"
    srv = handler_server(make_httpd, mpm, "doc-error", script)
    assert srv.get("/x").status == 500
    path = srv.path("mruby/x.rb")
    entry = sample.split("] MRB00030: ", 1)[1].replace("/srv/app.rb", path)
    line, = srv.wait_log("MRB00030")
    assert line.startswith("[") and "[mruby:error]" in line
    assert line.endswith("MRB00030: " + entry), (line, entry)


def test_http_error(make_httpd, mpm):
    """The Errors section's two raises of Apache::HTTPError, each the
    script of a handler: the status they name, and the log entry."""
    promised = re.findall(r"`(raise Apache::HTTPError[^`]*)` answers (\d+)", section("ruby-api.md", "Errors"))
    assert len(promised) == 2, promised
    conf = "".join(answering("/e%d" % i, code.replace('"', "'")) for i, (code, _) in enumerate(promised))
    srv = make_httpd("doc-http-error", mpm, conf).start()
    for i, (code, status) in enumerate(promised):
        assert srv.get("/e%d" % i).status == int(status)
    srv.wait_log(r"MRB00030: .* raised Apache::HTTPError .*: no such item")
    srv.wait_log(r"MRB00030: .* raised Apache::HTTPError .*: text")


def test_async_sleep(make_httpd, mpm):
    """Five sleeps of 100 ms, the output in order."""
    script = api_example("Apache::Async", "ruby", count=1)
    srv = handler_server(make_httpd, mpm, "doc-async", script)
    t = time.time()
    r = srv.ok("/x")
    assert r.body == b"01234"
    assert time.time() - t >= 0.5
    if mpm == "event":  # the request was suspended: it ends its connection
        assert r.headers["Connection"] == "close"


def test_status_counters(make_httpd, mpm):
    """The example of Apache::Status: the server's runs before this one."""
    script = api_example("Apache::Status", "ruby", count=1)
    srv = handler_server(make_httpd, mpm, "doc-status", script)
    first = srv.ok("/x").text
    assert re.fullmatch(r"(\d+) runs, 0 exceptions in (\d+) children\n", first), first
    second = srv.ok("/x").text
    assert int(second.split()[0]) == int(first.split()[0]) + 1


def test_tls_facts(make_httpd, mpm):
    """The example of TLS facts, as an AccessChecker before a handler that
    says who the user is: alice's verified certificate makes her the user;
    a client without a certificate, or over plain HTTP, is nobody."""
    script = api_example("TLS facts: Request#ssl? and Request#ssl_var", "ruby", count=1)
    tls_port = free_port()
    conf = tls.vhost(tls_port) + (
        "<Location /who>\n    mrubyAccessChecker {root}/mruby/tls.rb\n</Location>\n"
        + answering("/who", "Apache.rputs Apache::Request.new.user.inspect"))
    srv = make_httpd("doc-tls", mpm, conf, modules=("socache_shmcb", "ssl"), files={"mruby/tls.rb": script})
    tls.make_pki(srv.path("pki"))
    srv.start()
    pki = srv.path("pki")
    assert tls.get(tls_port, "/who", tls.context(pki, "alice")) == (200, '"alice"')
    assert tls.get(tls_port, "/who", tls.context(pki)) == (200, "nil")
    assert srv.ok("/who").text == "nil"


def test_timer_refreshes_from_a_file(make_httpd, mpm):
    """Apache::Timer's example: the file's text reaches the cache within
    the timer's interval, and an edit follows."""
    script = adapt(api_example("Apache::Timer", "ruby", count=1), ("/etc/apache2/", "{root}/out/"))
    conf = ("mrubyCache\nmrubyTimers {root}/mruby/t.rb\n"
            + answering("/list", "Apache.rputs Apache::Cache[%q(blocklist)].to_s"))
    srv = make_httpd("doc-timer", mpm, conf, files={"out/blocklist.txt": "192.0.2.1\n"})
    srv.write("mruby/t.rb", srv.fill(script))
    srv.start()
    assert srv.ok("/list").text == ""
    assert answered(srv, "/list", lambda text: text != "") == "192.0.2.1\n"
    srv.write("out/blocklist.txt", "192.0.2.1\n198.51.100.7\n")
    # the timer's next call (2 s) reads it again
    assert answered(srv, "/list", lambda text: text != "192.0.2.1\n", timeout=10) == "192.0.2.1\n198.51.100.7\n"


def test_rack(make_httpd, mpm):
    script = api_example("Rack", "ruby", count=1)
    srv = handler_server(make_httpd, mpm, "doc-rack", script)
    r = srv.ok("/x/y")
    assert r.body == b"hello /x/y" and r.headers["Content-Type"] == "text/plain"


def cache_conf():
    """The cache the Apache::Cache section configures, with the Mutex line
    of directives.md's mrubyCache section."""
    conf = adapt(api_example("Apache::Cache", index=0, count=3), RUN)
    return conf + adapt(example("directives.md", "Locking: the `mruby-cache` mutex", "apache", count=1),
                        ("/run/apache2/locks", "{root}/run"))


def test_rate_limit(make_httpd, mpm):
    """100 requests a minute from one address, then 429 with Retry-After.
    The test's /api/ping answers what is let through."""
    conf = cache_conf() + adapt(api_example("Example: a rate limiter", count=1), ETC)
    conf += answering("/api/ping", "Apache.rputs 'pong'")
    files = {"mruby/rate_limit.rb": api_example("Example: a rate limiter", "ruby", count=1)}
    srv = make_httpd("doc-rate", mpm, conf, files=files).start()
    well_inside_window(60, 20)  # the limiter counts by minute of the clock
    for n in range(100):
        r = srv.ok("/api/ping")
        assert r.headers["X-RateLimit-Remaining"] == str(99 - n)
    r = srv.get("/api/ping")
    assert r.status == 429  # an error page: headers_out is not sent, err_headers_out is
    assert 0 < int(r.headers["Retry-After"]) <= 60
    assert srv.ok("/api/ping", source="127.0.0.2").headers["X-RateLimit-Remaining"] == "99"
    # many clients of one address at once, over threads and processes:
    # the counter is shared, so exactly 100 of 160 get through
    well_inside_window(60, 20)  # the limiter counts by minute of the clock
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        statuses = list(pool.map(lambda i: srv.get("/api/ping", source="127.0.0.3").status, range(160)))
    assert statuses.count(200) == 100 and statuses.count(429) == 60


def test_page_cache(make_httpd, mpm):
    """The page is built once, then served from the cache (one per
    query string) by every thread and process."""
    conf = cache_conf() + adapt(api_example("Example: a page cache", count=1), RUN, ETC)
    files = {"mruby/page_cache.rb": api_example("Example: a page cache", "ruby", count=1)}
    srv = make_httpd("doc-pages", mpm, conf, files=files).start()
    first = srv.ok("/report?a")
    assert first.headers["X-Cache"] == "MISS" and b"<td>20</td><td>400</td>" in first.body
    for _ in range(10):
        r = srv.ok("/report?a")
        assert r.headers["X-Cache"] == "HIT" and r.body == first.body
    assert srv.ok("/report?b").headers["X-Cache"] == "MISS"
    # many clients at once, over threads and processes: one stored copy
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        bodies = list(pool.map(lambda i: srv.ok("/report?b").body, range(64)))
    assert set(bodies) == {srv.ok("/report?b").body}


def test_stream_filter_counts_bytes(make_httpd, mpm):
    """The byte-counting stream filter over a body of several chunks."""
    conf = ('<Location /big>\n    SetOutputFilter mruby\n'
            '    mrubyOutputFilter {root}/mruby/count.rb stream\n</Location>\n')
    srv = make_httpd("doc-count", mpm, conf)
    srv.write("mruby/count.rb", api_example("Apache::Filter", "ruby", count=1))
    content = b"0123456789" * 30000
    srv.write("htdocs/big/a.txt", content)
    srv.start()
    r = srv.ok("/big/a.txt")
    assert r.body == b"<!-- start -->" + content + b"<!-- %d bytes -->" % len(content)


def test_json_example(make_httpd, mpm):
    """The JSON example answers an order with its total."""
    conf = '<Location /order>\n    SetHandler mruby-native-script\n    mrubyHandler {root}/mruby/order.rb\n</Location>\n'
    srv = make_httpd("doc-json", mpm, conf)
    srv.write("mruby/order.rb", api_example("JSON", "ruby"))
    srv.start()
    order = b'{"customer": "ann", "items": [{"price": 3, "qty": 2}, {"price": 10, "qty": 1}]}'
    r = srv.request("POST", "/order", body=order)
    assert (r.status, r.headers["Content-Type"], r.body) == (200, "application/json",
                                                             b'{"customer":"ann","total":16}')


def test_http_example(make_httpd, mpm):
    """The Apache::HTTP example merges two backends' answers; a backend
    that does not answer in time leaves its part "unknown"."""
    conf = ('<Location /user>\n    SetHandler mruby-native-script\n    mrubyHandler {root}/mruby/user.rb\n'
            '</Location>\n' + answering("/stock", "Apache::Async.sleep Apache::Request.new.args.to_i; "
                                                   "Apache.rputs 'in stock'"))
    user = "r = Apache::Request.new\nApache.rputs JSON.generate('id' => r.args.split('=')[1].to_i)\n"
    backend = make_httpd("doc-http-backend", "event", conf, files={"mruby/user.rb": user}).start()
    script = adapt(api_example("Apache::HTTP", "ruby", count=1),
                   ("127.0.0.1:8081", "127.0.0.1:%d" % backend.port),
                   ('127.0.0.1:8082/stock"', '127.0.0.1:%d/stock?#{r.args}"' % backend.port))
    srv = handler_server(make_httpd, mpm, "doc-http", script)
    r = srv.ok("/x?0")
    assert (r.headers["Content-Type"], r.body) == ("application/json", b'{"user":{"id":42},"stock":"in stock"}')
    assert srv.ok("/x?2000").body == b'{"user":{"id":42},"stock":"unknown"}'


def test_signed_value_example(make_httpd, mpm):
    """The HMAC example signs a value, checks it, refuses it changed."""
    srv = handler_server(make_httpd, mpm, "doc-hmac", api_example("Digest, HMAC and secure compares", "ruby"))
    secret = b"a secret of 32 random bytes or more, not in the script"
    mac = base64.urlsafe_b64encode(hmac.new(secret, b"user=ann", hashlib.sha256).digest()).rstrip(b"=")
    assert srv.ok("/x").body.split(b"\n") == [b"user=ann." + mac, b'"user=ann"', b"nil",
                                               hashlib.sha256(b"").hexdigest().encode()]


# (section, language) of every code block of the pages, in order, each
# run by the test named beside it.
EXAMPLES = {
    "directives.md": [
        ("mod_mruby directives", "apache"),  # test_handlers
        ("Inheritance", "apache"),  # test_inheritance
        ("`<Limit>` and `<LimitExcept>`", "apache"),  # test_if_instead_of_limit
        ("mrubyPostReadRequest, mrubyPostReadRequestCode, and their First, Middle, Last forms", "apache"),
        ("mrubyQuickHandler, mrubyQuickHandlerCode, and their First, Middle, Last forms", "apache"),
        ("mrubyTranslateName, mrubyTranslateNameCode, and their First, Middle, Last forms", "apache"),
        ("mrubyMapToStorage, mrubyMapToStorageCode, and their First, Middle, Last forms", "apache"),
        ("mrubyAccessChecker, mrubyAccessCheckerCode, and their First, Middle, Last forms", "apache"),
        ("mrubyFixups, mrubyFixupsCode, and their First, Middle, Last forms", "apache"),
        ("mrubyChildExit, mrubyChildExitCode, and their First, Middle, Last forms", "apache"),
        ("mrubyTimers, mrubyTimersCode, and their First, Middle, Last forms", "apache"),
        ("mrubyHandler", "apache"),  # test_handler_file_cached
        ("mrubyHandlerCode", "apache"),
        ("mrubyTimeout", "apache"),
        ("mrubyRequestBodyLimit", "apache"),
        ("mrubyDefaultReturn", "apache"),
        ("mrubyDirectoryWalk", "apache"),
        ("mrubyServerToken", "apache"),
        ("mrubyCache", "apache"),  # test_cache
        ("Locking: the `mruby-cache` mutex", "apache"),  # cache_conf
        ("mrubyOutputFilter, mrubyOutputFilterCode", "apache"),
        ("mrubyOutputFilter, mrubyOutputFilterCode", "ruby"),  # test_output_filter_of_mod_mruby
        ("mrubyOutputFilterNamed, mrubyOutputFilterNamedCode", "apache"),
        ("mrubyInputFilter, mrubyInputFilterCode", "apache"),
        ("mrubyAuthnCheckPassword, mrubyAuthnCheckPasswordCode", "apache"),
        ("mrubyAuthnCheckPassword, mrubyAuthnCheckPasswordCode", "ruby"),  # auth_server
        ("mrubyAuthnGetRealmHash, mrubyAuthnGetRealmHashCode", "ruby"),
        ("mrubyAuthzProvider, mrubyAuthzProviderCode", "apache"),
        ("mrubyAuthzProvider, mrubyAuthzProviderCode", "ruby"),
    ],
    "ruby-api.md": [
        ("Errors", ""),  # test_error_log_entry
        ("Ending a script early", "ruby"),  # test_return_ends_a_script
        ("Apache::Async", "ruby"),
        ("Apache::Timer", "ruby"),
        ("TLS facts: Request#ssl? and Request#ssl_var", "ruby"),
        ("Apache::Status", "ruby"),  # test_status_counters
        ("Rack", "ruby"),
        ("Apache::Cache", "apache"),  # cache_conf
        ("Example: a rate limiter", "apache"),
        ("Example: a rate limiter", "ruby"),
        ("Example: a page cache", "apache"),
        ("Example: a page cache", "ruby"),
        ("Apache::HTTP", "ruby"),  # test_http_example
        ("JSON", "ruby"),  # test_json_example
        ("Digest, HMAC and secure compares", "ruby"),  # test_signed_value_example
        ("Apache::Filter", "ruby"),  # test_stream_filter_counts_bytes
    ],
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_no_example_is_left_out(name):
    """The code blocks of the page, by the heading they are under, are
    those the tests above run: a new one needs a test."""
    lines = page(name).splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("```")][::2]
    titles = headings(lines)
    found = [([t for j, _, t in titles if j < i][-1], lines[i][3:].strip()) for i in starts]
    assert found == EXAMPLES[name]


# ------------------------------------------- the pages against the module

def documented_directives():
    """{directive: its Context row} from the reference entries of
    directives.md: a heading names directives, "and their First, Middle,
    Last forms" and "(and their Code forms)" add what they say."""
    text = page("directives.md")
    out = {}
    for i, level, title in headings(text.splitlines()):
        if level != 2 or not title.startswith("mruby"):
            continue
        names = re.findall(r"\bmruby\w+", title)
        if "and their First, Middle, Last forms" in title:
            names += [n[:-len("Code")] + pos + "Code" if n.endswith("Code") else n + pos
                      for n in list(names) for pos in ("First", "Middle", "Last")]
        if "(and their Code forms)" in title:
            names += [n + "Code" for n in list(names)]
        context = re.search(r"^\| \*\*Context\*\* \| (.*) \|$", section("directives.md", title), re.M)
        assert context, "no Context row under %r" % title
        for n in names:
            out[n] = context.group(1)
    return out


def module_directives(make_httpd):
    """{directive: where httpd allows it} for mod_mruby's directives, as
    `apache2 -L` lists them."""
    srv = make_httpd("doc-directives", "prefork")
    srv.write_config()
    out = subprocess.run([HTTPD, "-f", srv.conf_path, "-L"], capture_output=True,
                         text=True, env=srv.httpd_env(), timeout=60).stdout
    found = re.findall(r"^(\S+) \(mod_mruby\.c\)\n\t.*\n\t(.*)$", out, re.M)
    assert found, out
    return dict(found)


def test_every_directive_is_documented_and_exists(make_httpd):
    documented = documented_directives()
    known = module_directives(make_httpd)
    assert sorted(set(documented) - set(known)) == [], "documented, unknown to httpd"
    assert sorted(set(known) - set(documented)) == [], "known to httpd, not documented"
    # "directory" (or a section named) in the Context row: httpd allows it in sections
    wrong = [(n, documented[n], known[n]) for n in documented
             if allowed_in(documented[n], "<Location>") != (known[n] == "Allowed in *.conf anywhere")]
    assert wrong == []


# The receivers the tables of ruby-api.md write, and what they are.
RECEIVERS = {
    "r": ("instance", "Apache::Request"), "f": ("instance", "Apache::Filter"),
    "anp": ("instance", "Apache::AuthnProvider"), "z": ("instance", "Apache::AuthzProvider"),
    "t": ("instance", "Apache::Table"), "input": ("instance", "Apache::Input"),
    "p": ("instance", "Apache::Params"), "Headers_in": ("instance", "Apache::Headers_in"),
    "d": ("instance", "Digest::Base"), "key": ("instance", "OpenSSL::PKey::PKey"),
    "res": ("instance", "Apache::HTTP::Response"), "hdrs": ("instance", "Apache::HTTP::Headers"),
    "sock": ("instance", "Apache::Socket"), "db": ("instance", "Apache::Redis"),
}
# What a method without a receiver belongs to, by the section it is in.
SECTION_RECEIVERS = {
    "Apache::Request": ("instance", "Apache::Request"),
    "Apache::Connection": ("instance", "Apache::Connection"),
    "Apache::Server": ("instance", "Apache::Server"),
    "Apache::Scoreboard": ("instance", "Apache::Scoreboard"),
    "Apache::Cache": ("object", "Apache::Cache.default"),
    "Kernel": ("object", "self"),
}


def documented_methods():
    """(kind, receiver, method) for every method of the tables of
    ruby-api.md whose first column is "Method" or "Field", of the list of
    Finfo's readers and of the Regexp section's lists. kind is
    "instance" (receiver is a class) or "object" (receiver is an object,
    e.g. Apache for Apache.rputs)."""
    lines = page("ruby-api.md").splitlines()
    titles = {i: title for i, level, title in headings(lines) if level == 2}
    out, current, header = [], None, None
    for i, line in enumerate(lines):
        current = titles.get(i, current)
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if header is None:
            header = cells[0]
            continue
        if header not in ("Method", "Field") or set(cells[0]) <= set("-"):
            continue
        previous = None
        for token in re.findall(r"`([^`]+)`", cells[0]):
            m = re.match(r"^([\w:]+)\[[^\]]*\]( = \w+)?$", token)
            if m:
                kind, recv = RECEIVERS.get(m.group(1), ("object", m.group(1)))
                out.append((kind, recv, "[]=" if m.group(2) else "[]"))
                continue
            m = re.match(r"^(?:([\w:]+)?(\.|#))?([a-z_]\w*[?!=]?)( = \w+)?", token)
            assert m, "cannot read %r in %r" % (token, line)
            recv, sep, name = m.group(1), m.group(2), m.group(3) + ("=" if m.group(4) else "")
            if sep == "#":
                recv = recv or previous
                previous = recv
            if recv in RECEIVERS:
                out.append((RECEIVERS[recv][0], RECEIVERS[recv][1], name))
            elif recv:
                out.append(("object", recv, name))
            else:
                assert current in SECTION_RECEIVERS, "%r: whose method is %r?" % (current, token)
                out.append(SECTION_RECEIVERS[current] + (name,))
            if header == "Field":  # "Each has a reader ... and a writer"
                out.append(out[-1][:2] + (name + "=",))
    # Finfo's readers are a list in a sentence: "Read-only Integers: `permission` ..."
    finfo = section("ruby-api.md", "Apache::Finfo")
    assert "Read-only Integers:" in finfo
    out += [("instance", "Apache::Finfo", name)
            for name in re.findall(r"`([a-z_]+)`", finfo.split("Read-only Integers:", 1)[1])]
    return out + regexp_methods()


def regexp_methods():
    """The methods of the Regexp section's lists: the bullets that start
    with `Regexp.new`, `MatchData` and `String#=~`. What parentheses say
    (options, argument forms) is left out; `Regexp.name` is a class
    method, and so is a name after it and a slash (`Regexp.escape`/`quote`);
    the others are instance methods."""
    bullets = re.split(r"\n\* ", section("ruby-api.md", "Regexp and MatchData"))
    out = []
    for start, cls in (("`Regexp.new", "Regexp"), ("`MatchData`", "MatchData"), ("`String#=~`", "String")):
        found = [b for b in bullets if b.startswith(start)]
        assert len(found) == 1, "no list of %s methods" % cls
        text = re.sub(r"\([^()]*\)", "", found[0])
        for alias, token in re.findall(r"(/ ?)?`([^`]+)`", text):
            m = re.fullmatch(r"(?:(?:Regexp|String)?(\.|#))?([a-z_]\w*[?]?|==|=~|===|\[\])", token)
            if m:
                kind = "object" if m.group(1) == "." or (alias and out[-1][0] == "object") else "instance"
                out.append((kind, cls, m.group(2)))
    return out


def documented_constants():
    """("constant", module, name, value or None) for the constants of
    ruby-api.md: the list of Apache's, the tables of the providers', the
    Finfo file types; the value where the page gives it, as `OK` (0)."""
    out = []
    listed = section("ruby-api.md", "Constants").split("\n\n`Apache::Scoreboard")[0]
    for name, value in re.findall(r"`([A-Z][A-Z0-9_]+)`(?: \((-?\d+)\))?", listed):
        out.append(("Apache", name, value or None))
    for heading in ("Apache::AuthnProvider", "Apache::AuthzProvider"):
        text = section("ruby-api.md", heading)
        out += [(heading, name, None) for name in re.findall(r"^\| `([A-Z_]+)` \|", text, re.M)]
        out += [(heading, name, value) for name, value in re.findall(r"`([A-Z_]+)` is (-?\d+)", text)]
    out += [("Apache::Finfo", name, None)
            for name in re.findall(r"`(?:Apache::Finfo::)?(APR_[A-Z]+)`", section("ruby-api.md", "Apache::Finfo"))]
    return [("constant", recv, name, value) for recv, name, value in out]


def test_every_documented_method_exists(make_httpd, mpm):
    """Asks the VM of a handler whether each method the tables list is
    there, and each constant, with the value the page gives."""
    methods = [m + (None,) for m in documented_methods()]
    constants = documented_constants()
    assert len(methods) > 200 and len(constants) > 30
    checks = "\n".join('  [%r, %s, :"%s", %s],' % (kind, recv, name, "nil" if value is None else value)
                        for kind, recv, name, value in methods + constants)
    script = ("missing = [\n%s\n].reject do |kind, recv, name, value|\n"
              "  if kind == 'instance' then recv.method_defined?(name)\n"
              "  elsif kind == 'constant' then recv.const_defined?(name) && [nil, recv.const_get(name)].include?(value)\n"
              "  else recv.respond_to?(name, true) end\n"
              "end\n"
              "Apache.rputs missing.map { |k, r, n| \"#{r.inspect} #{n}\" }.join(\"\\n\")\n" % checks)
    srv = handler_server(make_httpd, mpm, "doc-methods", script, conf="mrubyCache shmcb\n",
                         modules=("socache_shmcb",))
    assert srv.ok("/x").text == ""


# Lists, one "owner kind name" a line, what the VM it runs in defines: for
# each class and module reachable from Object through constants, its own
# instance methods ("#"), singleton methods (".") and constants ("::", or
# "module" with the full name for a class or module), and the top-level
# object's singleton methods (owner "main"). It defines nothing itself.
WALK = r"""
constants = Module.instance_method(:constants)
out = []
seen = {}
todo = [Object]
until todo.empty?
  mod = todo.shift
  next if seen[mod.object_id]
  seen[mod.object_id] = true
  path = mod.name
  mod.instance_methods(false).each { |n| out << "#{path} # #{n}" }
  mod.singleton_methods(false).each { |n| out << "#{path} . #{n}" }
  # Module#constants: Module and Class have a class method of that name
  # (Ruby's list of every constant, unimplemented in mruby).
  constants.bind(mod).call(false).sort.each do |c|
    v = mod.const_get(c)
    if v.is_a?(Module)
      out << "#{path} module #{v.name}"
      todo << v
    else
      out << "#{path} :: #{c}"
    end
  end
end
singleton_methods(false).each { |n| out << "main . #{n}" }
out << "version - #{MRUBY_VERSION}"
text = out.uniq.sort.join("\n")
Object.const_defined?(:Apache) ? Apache.rputs(text) : puts(text)
"""

MRUBY = shutil.which("mruby")


def walked(text):
    return {tuple(line.split(" ", 2)) for line in text.splitlines()}


def module_names(make_httpd):
    """(owner, kind, name) for what the module's VM defines beyond what
    mruby's own VM does: the walk's lines in a handler less its lines in
    the `mruby` binary (the same mruby 3.1 with the same standard gems).
    Core classes the module reopens (String, Kernel) count with the
    methods the module adds to them only; a core method it redefines
    under the same name (String#sub) is not told apart by name, and is
    listed by the Regexp section."""
    base = subprocess.run([MRUBY, "-e", WALK], capture_output=True, text=True, timeout=60)
    assert base.returncode == 0, base.stderr
    srv = handler_server(make_httpd, "prefork", "doc-names", WALK, conf="mrubyCache shmcb\n",
                         modules=("socache_shmcb",))
    vm, core = walked(srv.ok("/x").text), walked(base.stdout)
    version = ("version", "-")
    assert {n for o, k, n in vm if (o, k) == version} == {n for o, k, n in core if (o, k) == version}
    return vm - core


def reserved_modules():
    """The modules the Reserved names section calls internal helpers."""
    text = section("ruby-api.md", "Reserved names")
    listed = re.search(r"The modules (.*?) are internal", text, re.S)
    assert listed, "no list of internal modules under Reserved names"
    return set(re.findall(r"`(Apache::\w+(?:::\w+)*)`", listed.group(1)))


def documented_names():
    """(owner, kind, name) for what ruby-api.md documents, as the walk
    writes it, and the constant families it names ("`HTTP_OK`, ..." and
    "`Apache::Finfo::APR_*`") as (owner, prefix)."""
    names = set()
    for kind, recv, name in documented_methods():
        if recv == "self":
            names.add(("Kernel", "#", name))
        elif recv == "Apache::Cache.default":
            names.add(("Apache::Cache", "#", name))
        else:
            names.add((recv, "#" if kind == "instance" else ".", name))
    names |= {(recv, "::", name) for _, recv, name, _ in documented_constants()}
    text = page("ruby-api.md")
    # Methods named with their class in the text: `Apache::HTTPError#status`.
    method = r"[a-z_]\w*[?!=]?|\[\]=?|<<|==|=~"
    for owner, sep, name in re.findall(r"`([A-Z]\w*(?:::[A-Z]\w*)*)([#.])(%s)" % method, text):
        names.add((owner, sep, name))
    # Lists in sentences: Server's setters, FormFile's readers, rack.errors.
    lists = [
        ("Apache::Server", r"setters\s+\(([^)]*)\)", section("ruby-api.md", "Apache::Server")),
        ("Apache::FormFile", r"`Apache::FormFile`:\s+(.*?)\.\s", section("ruby-api.md", "Query and form fields")),
        ("Apache::Rack::Errors", r"`rack\.errors`\s+\(([^)]*)\)", section("ruby-api.md", "Rack")),
    ]
    for owner, pattern, where in lists:
        found = re.search(pattern, where, re.S)
        assert found, "%s: no list %r" % (owner, pattern)
        names |= {(owner, "#", n) for n in re.findall(r"`(%s)`" % method, found.group(1))}
    regexp = section("ruby-api.md", "Regexp and MatchData")
    names |= {("Regexp", "::", n) for n in re.findall(r"`(?:Regexp::)?([A-Z]+)`", regexp)}
    # Top-level constants that are objects: `Object::ENV`.
    names |= {("Object", "::", n) for n in re.findall(r"`Object::([A-Z]\w*)`", text)}
    # Classes and modules: named in backquotes, or by a heading (the
    # tables' names them all).
    path = r"[A-Z]\w*(?:::[A-Z]\w*)*"
    names |= {("module", p) for p in re.findall(r"`(%s)" % path, text)}
    titles = [t for _, _, t in headings(text.splitlines())]
    names |= {("module", t) for t in titles if re.fullmatch(path, t)}
    tables = [t for t in titles if t.startswith("Apache::Headers_in, ")]
    assert len(tables) == 1
    names |= {("module", "Apache::" + n.strip()) for n in tables[0].split(",")}
    constants = section("ruby-api.md", "Constants")
    names |= {("family", "Apache", p) for p in re.findall(r"`([A-Z]+_)[A-Z0-9_]*`,? \.\.\.", constants)}
    names |= {("family", o, p) for o, p in re.findall(r"`(Apache::\w+)::([A-Z]+_)\*`", constants)}
    return names


def undocumented(defined, documented, reserved):
    """What of `defined` ruby-api.md neither lists nor reserves. A name
    that starts with `__` is reserved, and so is all of a module the page
    calls internal; `new`, `initialize` and `initialize_copy` are Ruby's
    constructor and copy hooks, documented with their class. A method a
    class or module defines both for itself and for its instances is one
    API, documented by either (Apache::Cache's class methods use the
    default cache; Apache::Async.sleep is a module function)."""
    out = []
    for owner, kind, name in sorted(defined):
        if name.startswith("__") or owner in reserved or (owner, kind) == ("version", "-"):
            continue
        if kind in "#." and name in ("new", "initialize", "initialize_copy"):
            continue
        if kind == "module":
            ok = name in reserved or ("module", name) in documented
        elif kind == "::":
            ok = (owner, kind, name) in documented or any(
                d[0] == "family" and d[1] == owner and name.startswith(d[2]) for d in documented)
        else:
            other = "." if kind == "#" else "#"
            ok = (owner, kind, name) in documented or (
                (owner, other, name) in defined and (owner, other, name) in documented)
        if not ok:
            out.append("%s %s %s" % (owner, kind, name))
    return out


@pytest.mark.skipif(MRUBY is None, reason="needs the mruby binary (Debian package mruby) for core's names")
def test_every_public_name_is_documented(make_httpd):
    """The reverse of the test above: every method, constant, class and
    module the module adds to the VM (core's own left out) is listed by
    ruby-api.md or reserved (Reserved names): a new public method needs
    its entry."""
    defined = module_names(make_httpd)
    assert ("Apache::Request", "#", "uri") in defined and ("String", "#", "scan") in defined
    assert not any(o == "String" and n == "upcase" for o, _, n in defined)  # core's
    assert undocumented(defined, documented_names(), reserved_modules()) == []


# Arguments that make each directive valid, for the context test: a
# script file, inline code, or, for these, what the Syntax row asks for.
VALUES = {
    "mrubyCache": "shmcb", "mrubyHandlerEnable": "On", "mrubyTimeout": "off",
    "mrubyMemoryLimit": "off", "mrubyMaxRequestsPerVM": "0", "mrubyServerToken": "Off",
    "mrubyRequestBodyLimit": "1M", "mrubyFormFieldsLimit": "10", "mrubyCompileLimit": "1M 2000",
    "mrubyDefaultReturn": "OK",
    "mrubyDirectoryWalk": "Off",
}
NAMED = ("mrubyOutputFilterNamed", "mrubyInputFilterNamed", "mrubyAuthzProvider")


def directive_line(directive, n):
    """directive with valid arguments; n makes a name it defines unique."""
    if directive in VALUES:
        return "%s %s" % (directive, VALUES[directive])
    script = '"1"' if directive.endswith("Code") else "{root}/mruby/x.rb"
    if directive.startswith(NAMED):
        return "%s name%d %s" % (directive, n, script)
    return "%s %s" % (directive, script)


SECTIONS = {
    "virtual host": "<VirtualHost *:{port}>\n%s\n</VirtualHost>\n",
    "<Directory>": '<Directory "{docroot}">\n%s\n</Directory>\n',
    "<Location>": "<Location />\n%s\n</Location>\n",
}


def allowed_in(context, where):
    """Whether a Context row of directives.md allows the section."""
    if where == "virtual host":
        return "virtual host" in context
    return "directory" in context or (where == "<Location>" and "`<Location>`" in context)


def test_every_directive_is_allowed_where_its_entry_says(make_httpd):
    """Each directive is accepted in the main server and in the sections
    its Context row names (all in one configuration), and refused in the
    others (one configuration each, which must fail naming it)."""
    documented = documented_directives()
    srv = make_httpd("doc-contexts", "prefork", modules=("socache_shmcb",),
                     files={"mruby/x.rb": "1"})
    accepted, refused = [], []
    for n, (directive, context) in enumerate(sorted(documented.items())):
        accepted.append(directive_line(directive, n))
        for where, wrap in SECTIONS.items():
            line = directive_line(directive, 1000 + 10 * n + len(accepted))
            if not allowed_in(context, where):
                refused.append((directive, where, wrap % line))
            else:
                accepted.append(wrap % line)
    rc, out = srv.configtest("\n".join(accepted))
    assert rc == 0, out
    wrong = []
    for directive, where, conf in refused:
        rc, out = srv.configtest(conf)
        if rc == 0 or directive.lower() not in out.lower():
            wrong.append((directive, where, out.strip()[-200:]))
    assert wrong == []
