"""The examples of docs/directives.md and docs/ruby-api.md work as their
text says. Each test reads its example from the page when it runs (an
edited example is tested as it now is), found by the heading of its
section, and fails when the section or the block is gone.

What an administrator would change to use an example is changed here too,
and only that, by `adapt`: each substitution names the text it replaces
and fails when that text is no longer in the example. The paths of the
examples (/etc/apache2/mruby/, /srv/..., /run/apache2/) become paths under
the test server's root, ports become the test server's (or its backend's),
and a `LoadModule mruby_module` line is dropped: the test server loads the
module that was built. Scripts an example names without showing them are
written by the test, which says what they do.

Examples that are not tested, and why:
* directives.md, mrubyCache: its cache servers (10.0.0.5, 10.0.0.6) are
  placeholders; the same shmcb line is run by the Apache::Cache examples.
* directives.md, the phase table's `mruby<Phase>` forms: syntax, not
  configuration.
* ruby-api.md, Errors: a sample of the log line; test_errors.py checks
  the format.

The last tests hold the pages to the module: every directive of
directives.md is one httpd knows from mod_mruby (and the reverse), and
every method listed in ruby-api.md exists in the VM."""

import base64
import gzip
import os
import re
import time

import pytest

from httpd import HTTPD, MODULE, Httpd
from recipes import ROOT, fenced_blocks
from test_auth_providers import basic, digest_get

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


# What every adapted example needs.
ETC = ("/etc/apache2/mruby/", "{root}/mruby/")
RUN = ("/run/apache2/", "{root}/run/")
OWN_MODULE = ("LoadModule mruby_module modules/mod_mruby.so\n", "")


def directives_example(heading, lang="apache", **kw):
    return example("directives.md", heading, lang, **kw)


def api_example(heading, lang="apache", **kw):
    return example("ruby-api.md", heading, lang, **kw)


def ok(srv, path, **kw):
    r = srv.request(kw.pop("method", "GET"), path, **kw)
    assert r.status == 200, (r, srv.error_log()[-2000:])
    return r


# ------------------------------------------------------- directives.md

def test_handlers(make_httpd, mpm):
    """The two handlers: mruby-script makes .mrb files scripts,
    mruby-native-script answers with the section's script."""
    conf = adapt(directives_example("mod_mruby directives"), OWN_MODULE)
    srv = make_httpd("doc-handlers", mpm, conf)
    srv.write("htdocs/hi.mrb", "Apache.rputs 'from a file'")
    srv.start()
    assert ok(srv, "/mruby").body == b"hello mod_mruby world"
    assert ok(srv, "/hi.mrb").body == b"from a file"


def test_inheritance(make_httpd, mpm):
    """Fixups are inherited per phase: /app and /app/static get the
    server's header, /app/embed replaces it, the virtual host inherits
    it. /srv/app/main.rb is a script that answers "app"."""
    conf = adapt(directives_example("Inheritance"), ("/srv/app/", "{root}/srv/app/"),
                 ("<VirtualHost *:80>", "<VirtualHost *:{port}>"))
    srv = make_httpd("doc-inherit", mpm, conf)
    srv.write("srv/app/main.rb", "Apache.rputs 'app'")
    srv.write("htdocs/app/static/a.txt", "static")
    srv.write("htdocs/app/embed/b.txt", "embed")
    srv.write("htdocs/c.txt", "vhost")
    srv.start()
    r = ok(srv, "/app/x")
    assert r.body == b"app" and r.headers["X-Frame-Options"] == "DENY"
    r = ok(srv, "/app/static/a.txt")
    assert r.body == b"static" and r.headers["X-Frame-Options"] == "DENY"
    r = ok(srv, "/app/embed/b.txt")
    assert r.headers.get_all("X-Frame-Options") == ["SAMEORIGIN"]
    r = ok(srv, "/c.txt", headers={"Host": "api.example.com"})
    assert r.body == b"vhost" and r.headers["X-Frame-Options"] == "DENY"


def test_if_instead_of_limit(make_httpd, mpm):
    """The <If> gives POST a 50M body limit; other methods keep the 8 MB
    default. The test adds a handler that reads the body."""
    conf = directives_example("`<Limit>` and `<LimitExcept>`")
    conf += ('<Location /upload>\n    SetHandler mruby-native-script\n'
             '    mrubyHandlerCode "Apache.rputs Apache::Request.new.body.size"\n</Location>\n')
    srv = make_httpd("doc-if", mpm, conf).start()
    body = b"x" * (9 * 1024 * 1024)
    assert ok(srv, "/upload", method="POST", body=body).body == str(len(body)).encode()
    assert srv.request("PUT", "/upload", body=body).status == 413
    too_big = srv.raw(b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n"
                      b"Connection: close\r\n\r\n" % (50 * 1024 * 1024 + 1))
    assert too_big.status == 413


def test_post_read_request(make_httpd, mpm):
    """The note set right after the request is read is seen by the later
    phases (the test's handler shows it)."""
    conf = directives_example("mrubyPostReadRequest,", count=1)
    conf += ('<Location /t0>\n    SetHandler mruby-native-script\n'
             '    mrubyHandlerCode "Apache.rputs Apache::Request.new.notes[\'t0\']"\n</Location>\n')
    srv = make_httpd("doc-prr", mpm, conf).start()
    t0 = float(ok(srv, "/t0").text)
    assert abs(t0 - time.time()) < 60


def test_quick_handler(make_httpd, mpm):
    conf = directives_example("mrubyQuickHandler,", count=1)
    srv = make_httpd("doc-quick", mpm, conf)
    srv.write("htdocs/other.txt", "other")
    srv.start()
    assert ok(srv, "/ping").body == b"pong"
    assert ok(srv, "/other.txt").body == b"other"


def test_translate_name(make_httpd, mpm):
    """/docs/... is served from /srv/docs/..."""
    conf = adapt(directives_example("mrubyTranslateName,", count=1), ("'/srv/docs'", "'{root}/srv/docs'"))
    srv = make_httpd("doc-translate", mpm, conf)
    srv.write("srv/docs/guide.txt", "the guide")
    srv.start()
    assert ok(srv, "/docs/guide.txt").body == b"the guide"
    assert srv.get("/docs/missing.txt").status == 404


def test_map_to_storage(make_httpd, mpm):
    """Under /api/ the directory walk is skipped: the test's <Directory>
    that denies everything applies to the other URIs only."""
    conf = directives_example("mrubyMapToStorage,", count=1)
    conf += ('<Directory "{docroot}">\n    Require all denied\n</Directory>\n'
             '<Location /api/>\n    SetHandler mruby-native-script\n'
             '    mrubyHandlerCode "Apache.rputs \'api\'"\n</Location>\n')
    srv = make_httpd("doc-m2s", mpm, conf)
    srv.write("htdocs/page.txt", "page")
    srv.start()
    assert ok(srv, "/api/items").body == b"api"
    assert srv.get("/page.txt").status == 403


def test_access_checker(make_httpd, mpm):
    conf = directives_example("mrubyAccessChecker,", count=1)
    srv = make_httpd("doc-access", mpm, conf)
    srv.write("htdocs/admin/index.txt", "admin")
    srv.start()
    assert srv.get("/admin/index.txt").status == 403
    assert srv.get("/admin/index.txt", headers={"X-Admin-Token": "guess"}).status == 403
    assert ok(srv, "/admin/index.txt", headers={"X-Admin-Token": "s3cret"}).body == b"admin"


def test_fixups(make_httpd, mpm):
    conf = directives_example("mrubyFixups,", count=1)
    srv = make_httpd("doc-fixups", mpm, conf)
    srv.write("htdocs/a.txt", "a")
    srv.start()
    assert ok(srv, "/a.txt").headers["X-Content-Type-Options"] == "nosniff"


def test_handler_file_cached(make_httpd, mpm):
    """With `cache` the script is compiled once: a change of the file is
    not seen. app.rb is the test's."""
    conf = adapt(directives_example("mrubyHandler", count=1), ETC)
    srv = make_httpd("doc-handler", mpm, conf, mpm_conf={"prefork": dict(StartServers=1)})
    srv.write("mruby/app.rb", "Apache.rputs 'first'")
    srv.start()
    assert ok(srv, "/app").body == b"first"
    srv.write("mruby/app.rb", "Apache.rputs 'second'")
    for _ in range(5):
        assert ok(srv, "/app").body == b"first"
