"""The README's demo command (script/server) serves its examples."""

import os
import pathlib
import shutil
import signal
import socket
import subprocess
import tempfile
import time

from httpd import CRASH_PATTERNS, ROOT, Httpd, free_port, sanitizer_env, sanitizer_reports



def test_demo_server():
    port = free_port()
    base = tempfile.mkdtemp(prefix="mm-demo-")
    os.chmod(base, 0o755)  # httpd's children (www-data) must reach it
    demo = pathlib.Path(base) / "demo"
    reports = pathlib.Path(base) / "sanitizer"
    reports.mkdir(mode=0o777)
    reports.chmod(0o777)
    env = sanitizer_env(dict(os.environ, PORT=str(port), MM_DEMO_DIR=str(demo), MPM="event"), reports)
    proc = subprocess.Popen([os.path.join(ROOT, "script", "server")], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            assert proc.poll() is None, proc.stdout.read().decode()
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        client = Httpd.__new__(Httpd)
        client.port = port
        r = client.get("/")
        assert r.status == 200 and b"mod_mruby demo" in r.body
        assert client.get("/hello").body == b"hello mod_mruby world"
        assert client.get("/hello.mrb").body == b"hello mruby world!!"
        r = client.get("/request?name=tester")
        assert r.status == 200 and r.body.startswith(b"Hello, tester!\n")
        assert r.headers["X-Powered-By"] == "mod_mruby"
        assert b"request(s) of this page" in client.get("/counter.mrb").body
        assert client.get("/shared_counter.mrb").body == b"this page was served 1 time(s) in all\n"
        assert client.get("/shared_counter.mrb").body == b"this page was served 2 time(s) in all\n"
        r = client.get("/error")
        assert r.status == 500 and b"an example exception" not in r.body
    finally:
        proc.send_signal(signal.SIGWINCH)
        proc.wait(timeout=30)
    log = (demo / "logs" / "error.log").read_text()
    assert "MRB00030: Handler script" in log and "an example exception" in log
    assert not [line for line in log.splitlines() if any(p in line for p in CRASH_PATTERNS)]
    assert not sanitizer_reports(reports)
    shutil.rmtree(base, ignore_errors=True)
