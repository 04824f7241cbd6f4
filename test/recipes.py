"""The recipes of docs/recipes/ as the tests see them: each recipe's page
and files, a server that runs exactly those files (on each MPM, or the
system Apache of script/test-deb), and application backends for the
recipes that proxy.

A recipe is installed as its page tells an administrator to: its
configuration in conf-enabled/, its scripts in mruby/ under the
ServerRoot (the configuration names them relative to it), the modules of
its a2enmod line loaded with what they depend on."""

import http.server
import json
import os
import socketserver
import threading

import pytest

import system_apache
from httpd import MPMS, ROOT, Httpd

RECIPES_DIR = os.path.join(ROOT, "docs", "recipes")
MODS_AVAILABLE = "/etc/apache2/mods-available"


def names():
    return sorted(d for d in os.listdir(RECIPES_DIR) if os.path.isdir(os.path.join(RECIPES_DIR, d)))


def read(path):
    with open(path) as f:
        return f.read()


def with_dependencies(modules):
    """The modules and what their Debian .load files say they depend on,
    dependencies first (the order LoadModule needs), as a2enmod does."""
    out = []

    def add(m):
        if m in out:
            return
        try:
            text = read(os.path.join(MODS_AVAILABLE, m + ".load"))
        except FileNotFoundError:
            text = ""
        for line in text.splitlines():
            if line.startswith("# Depends:"):
                for dep in line.split(":", 1)[1].split():
                    add(dep)
        out.append(m)

    for m in modules:
        add(m)
    return out


def fenced_blocks(markdown):
    """(language, text) of each fenced code block of a Markdown text."""
    out, lang, lines = [], None, []
    for line in markdown.splitlines():
        if line.startswith("```"):
            if lang is None:
                lang, lines = line[3:].strip(), []
            else:
                out.append((lang, "".join(l + "\n" for l in lines)))
                lang = None
        elif lang is not None:
            lines.append(line)
    return out


class Recipe:
    def __init__(self, name):
        self.name = name
        self.dir = os.path.join(RECIPES_DIR, name)
        self.page = read(os.path.join(RECIPES_DIR, name + ".md"))
        self.files = {f: read(os.path.join(self.dir, f)) for f in sorted(os.listdir(self.dir))}
        confs = [f for f in self.files if f.endswith(".conf")]
        assert len(confs) == 1, "%s: one .conf file expected, found %s" % (name, confs)
        self.conf = confs[0]
        self.scripts = [f for f in self.files if f != self.conf]

    def modules(self):
        """The modules the page's a2enmod command enables, mruby aside."""
        found = []
        for line in self.page.splitlines():
            if line.startswith("a2enmod "):
                found += [m for m in line.split()[1:] if m != "mruby"]
        return found

    def code_blocks(self):
        return [text for _, text in fenced_blocks(self.page)]

    def install(self, srv):
        if isinstance(srv, system_apache.SystemApache):
            for f in self.scripts:
                srv.install("mruby/" + f, self.files[f])
            srv.install("conf-available/" + self.conf, self.files[self.conf])
            srv.enable("conf", self.conf[:-len(".conf")])
        else:
            for f in self.scripts:
                srv.write("mruby/" + f, self.files[f])
            srv.write("conf-enabled/" + self.conf, self.files[self.conf])


def server_root(srv):
    """Where the recipe's mruby/ directory is: the ServerRoot."""
    return getattr(srv, "server_root", srv.root)


def replace_file(path, text):
    """As the recipes' pages advise for a file their scripts re-read while
    serving: a new file, readable by httpd's children, renamed over the
    old one (a reader never sees half of it)."""
    with open(path + ".new", "w") as f:
        f.write(text)
    os.chmod(path + ".new", 0o644)
    os.rename(path + ".new", path)


def set_setting(srv, script, name, value):
    """As an administrator edits a recipe's settings: the line `NAME = ...`
    of the installed script (there must be one) made `NAME = VALUE`, the
    value written as JSON writes it (a number, a str in double quotes),
    which Ruby reads the same."""
    path = os.path.join(server_root(srv), "mruby", script)
    lines = read(path).split("\n")
    found = [i for i, line in enumerate(lines) if line.strip().startswith(name + " = ")]
    assert len(found) == 1, "%s: one line setting %s expected, found %d" % (script, name, len(found))
    line = lines[found[0]]
    lines[found[0]] = line[:len(line) - len(line.lstrip())] + "%s = %s" % (name, json.dumps(value))
    replace_file(path, "\n".join(lines))


def runtime_dir(srv):
    """httpd's DefaultRuntimeDir, where unix: socket paths are relative to."""
    return getattr(srv, "runtime_dir", srv.path("run"))


def recipe_httpd(name, site="", files=None, backends=(), **kw):
    """A module-scoped fixture: the recipe NAME (or each of a list of
    names) installed in a server of its own on each MPM, or, under
    script/test-deb, in the system Apache. `site` is the configuration of
    the site around the recipe (extra modules it needs go in `modules`),
    `files` its files (DocumentRoot content), `backends` the names of
    Unix-socket application servers to start in the runtime directory
    (srv.backends[name]), `settings` a function of the server that changes
    the installed files before it starts (set_setting)."""
    recipes = [Recipe(n) for n in ([name] if isinstance(name, str) else name)]
    label = name if isinstance(name, str) else "together"
    extra = tuple(kw.pop("modules", ()))
    settings = kw.pop("settings", None)

    @pytest.fixture(scope="module", params=["system"] if system_apache.enabled() else MPMS)
    def fixture(request):
        modules = with_dependencies([m for r in recipes for m in r.modules()] + list(extra))
        if request.param == "system":
            srv = system_apache.SystemApache("recipe-" + label, site, modules=modules, files=files)
        else:
            # The site after the recipes' snippets, as Debian's apache2.conf
            # reads sites-enabled/ after conf-enabled/.
            srv = Httpd("recipe-" + label, request.param, "IncludeOptional conf-enabled/*.conf\n" + site,
                        modules=modules, files=files, **kw)
        for recipe in recipes:
            recipe.install(srv)
        if settings:
            settings(srv)
        srv.backends = {b: Backend(os.path.join(runtime_dir(srv), b + ".sock"), b) for b in backends}
        try:
            srv.start()
            yield srv
        finally:
            for b in srv.backends.values():
                b.stop()
            srv.stop()
            srv.cleanup()

    return fixture


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.server.requests += 1
        out = json.dumps({
            "backend": self.server.name,
            "method": self.command,
            "path": self.path,
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "body": body.decode("latin-1"),
        }).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = do_PUT = do_DELETE = _answer

    def address_string(self):
        return "unix"

    def log_message(self, *args):
        pass


class _UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class Backend:
    """An application server listening on a Unix socket, as one behind
    mod_proxy would: it answers every request with JSON naming itself, the
    path and headers it got, and the body."""

    def __init__(self, path, name):
        if os.path.exists(path):
            os.unlink(path)
        self.path = path
        self.server = _UnixServer(path, _Handler)
        self.server.name = name
        self.server.requests = 0
        # httpd's children (www-data) connect to it.
        os.chmod(path, 0o666)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def requests(self):
        return self.server.requests

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
        if os.path.exists(self.path):
            os.unlink(self.path)
