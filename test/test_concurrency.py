"""Many clients at once: every answer belongs to its own request (no
cross-talk between threads or VMs)."""

import concurrent.futures
import uuid

from httpd import module_httpd

BODY = r"""
AddHandler mruby-script .mrb
<Location /echo>
    SetHandler mruby-native-script
    mrubyHandlerCode "r = Apache::Request.new; t = r.headers_in['X-Token']; r.headers_out['X-Echo'] = t; r.notes['t'] = t; s = ''; 50.times { s << r.args }; Apache.rputs s + '|' + r.notes['t']"
</Location>
"""

ECHO_MRB = """r = Apache::Request.new
token = r.headers_in["X-Token"]
r.headers_out["X-Echo"] = token
Apache.rputs "file:" + r.args + "|" + token
"""

# Worker and event: 16 threads per child, 4 children.
server = module_httpd("concurrency", BODY, files={"htdocs/echo.mrb": ECHO_MRB},
                      mpm_conf=dict(StartServers=4, MinSpareServers=4, MaxSpareServers=64))

CLIENTS = 48
REQUESTS = 60


def client(server, n):
    errors = []
    for i in range(REQUESTS):
        token = uuid.uuid4().hex
        path = "/echo?%d-%d-%s" % (n, i, token) if i % 2 else "/echo.mrb?%d-%d-%s" % (n, i, token)
        r = server.get(path, headers={"X-Token": token})
        arg = path.split("?", 1)[1]
        expected = ("file:%s|%s" % (arg, token)) if path.startswith("/echo.mrb") else (arg * 50 + "|" + token)
        if r.status != 200 or r.text != expected or r.headers["X-Echo"] != token:
            errors.append((path, r.status, r.text[:100], r.headers["X-Echo"]))
    return errors


def test_no_cross_talk_under_concurrency(server):
    with concurrent.futures.ThreadPoolExecutor(CLIENTS) as pool:
        results = list(pool.map(lambda n: client(server, n), range(CLIENTS)))
    errors = [e for res in results for e in res]
    assert errors == []
    assert "[mruby:error]" not in server.error_log()
