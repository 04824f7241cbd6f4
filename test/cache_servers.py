"""Real memcached and redis-server processes for the cache tests, each on a
free loopback port, started and stopped by the test suite (never on their
default ports, which a system service may hold)."""

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest

from httpd import free_port, run_user

MEMCACHED = shutil.which("memcached") or "/usr/bin/memcached"
REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"
REDIS_CLI = shutil.which("redis-cli") or "/usr/bin/redis-cli"


class Backend:
    """One server process on 127.0.0.1:port. `spec` is what mrubyCache
    takes for it, e.g. "memcache:127.0.0.1:40000"."""

    def __init__(self, provider, argv_for_port):
        self.provider = provider
        self.argv_for_port = argv_for_port
        self.port = None
        self.proc = None
        self.dir = tempfile.mkdtemp(prefix="mm-%s-" % provider, dir=os.environ.get("MM_TEST_TMP", "/tmp"))
        os.chmod(self.dir, 0o777)

    @property
    def spec(self):
        return "%s:127.0.0.1:%d" % (self.provider, self.port)

    def start(self, timeout=10):
        self.port = self.port or free_port()
        self.log = open(os.path.join(self.dir, "server.log"), "a")
        self.proc = subprocess.Popen(self.argv_for_port(self.port, self.dir), stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("%s exited with %s" % (self.provider, self.proc.returncode))
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("%s did not start listening on %d" % (self.provider, self.port))

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc:
            self.log.close()
        self.proc = None

    def cleanup(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def cli(self, *args):
        """A command to the redis-server, through redis-cli; its reply as
        redis-cli prints it (without the trailing newline)."""
        p = subprocess.run([REDIS_CLI, "-h", "127.0.0.1", "-p", str(self.port)] + [str(a) for a in args],
                           capture_output=True, text=True, timeout=10, check=True)
        return p.stdout.rstrip("\n")


def memcached_backend():
    user = run_user()

    def argv(port, workdir):
        cmd = [MEMCACHED, "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-m", "64", "-t", "2"]
        if user:
            cmd += ["-u", user[0]]  # memcached refuses to run as root
        return cmd

    return Backend("memcache", argv)


def redis_backend():
    def argv(port, workdir):
        return [REDIS_SERVER, "--bind", "127.0.0.1", "--port", str(port), "--save", "",
                "--appendonly", "no", "--dir", workdir, "--daemonize", "no", "--protected-mode", "no"]

    return Backend("redis", argv)


BACKENDS = {"memcache": memcached_backend, "redis": redis_backend}


def backend_fixture(provider, scope="module", port=None):
    """A fixture with a running server of the provider, stopped afterwards
    (on `port` if given: for a configuration written before it starts)."""

    @pytest.fixture(scope=scope)
    def fixture():
        binary = MEMCACHED if provider == "memcache" else REDIS_SERVER
        if not os.path.exists(binary):
            pytest.fail("%s is not installed (script/bootstrap installs it)" % binary)
        b = BACKENDS[provider]()
        b.port = port
        b.start()
        yield b
        b.stop()
        b.cleanup()

    return fixture
