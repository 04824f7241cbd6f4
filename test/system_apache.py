"""The machine's own Apache, run the Debian way, for script/test-deb: the
stock /etc/apache2 layout with the package installed, sites and modules
switched with a2enmod/a2enconf, the server started and stopped with
apache2ctl. It has the client side of Httpd, so a test runs against it
what it runs against its own httpd. Everything it adds to /etc/apache2 is
taken away when it stops.

script/test-deb sets MM_SYSTEM_APACHE to the loopback port it made the
server listen on (ports.conf); without it, nothing here runs."""

import os
import subprocess
import time

from httpd import Httpd

CONF_DIR = "/etc/apache2"
RUN_DIR = "/var/run/apache2"
PID_FILE = os.path.join(RUN_DIR, "apache2.pid")
ERROR_LOG = "/var/log/apache2/error.log"
# The test's own site: its DocumentRoot and configuration (a site, read
# after the conf-enabled/ snippets).
SITE = "mruby-test-site"
KINDS = {"mod": ("mods-enabled", ".load"), "conf": ("conf-enabled", ".conf"), "site": ("sites-enabled", ".conf")}


def enabled():
    return bool(os.environ.get("MM_SYSTEM_APACHE"))


def run(*argv, check=True):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if check and p.returncode != 0:
        raise RuntimeError("%s failed (%d):\n%s%s" % (" ".join(argv), p.returncode, p.stdout, p.stderr))
    return p


def apache2ctl(*args, check=True):
    return run("apache2ctl", *args, check=check)


def _enabled_names(kind):
    folder, suffix = KINDS[kind]
    return {f[:-len(suffix)] for f in os.listdir(os.path.join(CONF_DIR, folder)) if f.endswith(suffix)}


class SystemApache(Httpd):
    """`body` is configuration of the test's site (server level, in
    sites-available/mruby-test-site.conf, with its DocumentRoot); `modules`
    are enabled with a2enmod, which also enables what they depend on."""

    server_root = CONF_DIR
    runtime_dir = RUN_DIR

    def __init__(self, name, body="", modules=(), files=None):
        super().__init__(name, "event", body, files=files)
        self.mpm = "system"
        self.port = int(os.environ["MM_SYSTEM_APACHE"])
        self.system_modules = tuple(modules)
        self.installed = []  # files written under /etc/apache2, to remove
        self.made_dirs = []
        self.before = {kind: _enabled_names(kind) for kind in KINDS}
        self.log_offset = 0
        self.pid_seen = None

    # ------------------------------------------------------ /etc/apache2
    def install(self, rel, content):
        """Writes /etc/apache2/REL (removed again by stop)."""
        full = os.path.join(CONF_DIR, rel)
        folder = os.path.dirname(full)
        if not os.path.isdir(folder):
            os.makedirs(folder)
            self.made_dirs.append(folder)
        with open(full, "w") as f:
            f.write(content)
        os.chmod(full, 0o644)
        if full not in self.installed:
            self.installed.append(full)
        return full

    def enable(self, kind, name):
        run("a2en" + kind, "-q", name)

    def restore(self):
        """Disables what was enabled since this object was made (a2enmod
        enables dependencies too), removes the files it installed. -p
        purges what a2enmod remembers of them in /var/lib/apache2 too."""
        for kind in ("site", "conf", "mod"):
            for name in sorted(_enabled_names(kind) - self.before[kind]):
                run("a2dis" + kind, "-q", "-f", "-p", name)
        for full in reversed(self.installed):
            if os.path.exists(full):
                os.unlink(full)
        for folder in reversed(self.made_dirs):
            if os.path.isdir(folder) and not os.listdir(folder):
                os.rmdir(folder)
        self.installed, self.made_dirs = [], []

    # ------------------------------------------------------------ config
    @property
    def error_log_path(self):
        return ERROR_LOG

    def error_log(self):
        """What the server logged since this object started it."""
        try:
            with open(ERROR_LOG, errors="replace") as f:
                f.seek(self.log_offset)
                return f.read()
        except FileNotFoundError:
            return ""

    def config(self, body=None):
        return "\n".join([
            "ServerName 127.0.0.1",
            'DocumentRoot "%s"' % self.docroot,
            '<Directory "%s">' % self.root,
            "    Require all granted",
            "</Directory>",
            self.fill(self.body if body is None else body),
        ]) + "\n"

    def write_config(self, body=None):
        self.install("sites-available/%s.conf" % SITE, self.config(body))
        self.enable("site", SITE)
        for m in self.system_modules:
            self.enable("mod", m)

    def configtest(self, body=None):
        self.write_config(body)
        p = apache2ctl("-t", check=False)
        return p.returncode, p.stdout + p.stderr

    # ----------------------------------------------------------- control
    def _pid(self):
        try:
            with open(PID_FILE) as f:
                return int(f.read().strip())
        except (FileNotFoundError, ValueError):
            return None

    def start(self, timeout=30):
        self.write_config()
        try:
            self.log_offset = os.path.getsize(ERROR_LOG)
        except FileNotFoundError:
            self.log_offset = 0
        apache2ctl("start")
        deadline = time.time() + timeout
        while time.time() < deadline:
            if "resuming normal operations" in self.error_log():
                self.pid_seen = self._pid()
                return self
            time.sleep(0.05)
        self.stop(check=False)
        raise RuntimeError("the system apache2 did not start:\n" + self.error_log())

    def graceful(self, wait=True, timeout=20):
        before = self.error_log().count("resuming normal operations")
        apache2ctl("graceful")
        deadline = time.time() + timeout
        while wait and time.time() < deadline:
            if self.error_log().count("resuming normal operations") > before:
                return
            time.sleep(0.05)
        if wait:
            raise RuntimeError("graceful restart did not complete:\n" + self.error_log())

    def stop(self, check=True):
        """apache2ctl graceful-stop (see Httpd.stop for why graceful), then
        waits for the parent to exit; the configuration is restored."""
        pid = self._pid() or self.pid_seen
        if pid:
            apache2ctl("graceful-stop", check=False)
            deadline = time.time() + 30
            while time.time() < deadline and os.path.exists("/proc/%d" % pid):
                time.sleep(0.05)
            if os.path.exists("/proc/%d" % pid):
                apache2ctl("stop", check=False)
                time.sleep(2)
        self.restore()
        if check:
            self.check_log()
