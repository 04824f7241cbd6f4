"""The API under many clients at once, twice over: bodies, forms,
cookies, Rack and Regexp answer for their own request only, and kept
request objects never leak into another request."""

import concurrent.futures
import os
import uuid

from httpd import module_httpd

BODY = r"""
AddHandler mruby-script .mrb
<Location /rack>
    mrubyHandlerCode 'run Proc.new { |env| t = env["HTTP_X_TOKEN"]; [200, {"X-Echo" => t}, [env["rack.input"].read, "|", t]] }'
</Location>
"""

FILES = {
    "htdocs/mixed.mrb": r'''
r = Apache::Request.new
token = r.headers_in["X-Token"]
m = /^t=(\w+)/.match(r.args.to_s)
form = r.form_params
body = r.body.to_s
r.set_cookie "t", token
Apache.rputs [m && m[1], form["token"], r.cookies["c"], body.size, token].join(",")
''',
}

server = module_httpd("api-concurrency", BODY, files=FILES,
                      mpm_conf=dict(StartServers=4, MinSpareServers=4, MaxSpareServers=64))

CLIENTS = 24
REQUESTS = 20


def client(server, n):
    errors = []
    for i in range(REQUESTS):
        token = uuid.uuid4().hex
        if i % 2:
            payload = os.urandom(1000 + n * 10 + i).hex().encode()
            r = server.request("POST", "/rack", body=payload, headers={"X-Token": token})
            expected = payload + b"|" + token.encode()
            ok = r.status == 200 and r.body == expected and r.headers["X-Echo"] == token
        else:
            form = ("token=%s&pad=%s" % (token, "x" * (n * 37 + i))).encode()
            r = server.request("POST", "/mixed.mrb?t=" + token, body=form,
                               headers={"X-Token": token, "Cookie": "c=" + token,
                                        "Content-Type": "application/x-www-form-urlencoded"})
            expected = ("%s,%s,%s,%d,%s" % (token, token, token, len(form), token)).encode()
            ok = r.status == 200 and r.body == expected and r.headers["Set-Cookie"] == "t=" + token
        if not ok:
            errors.append((n, i, r.status, r.body[:120]))
    return errors


def test_api_under_concurrency_twice(server):
    for _ in range(2):
        with concurrent.futures.ThreadPoolExecutor(CLIENTS) as pool:
            results = list(pool.map(lambda n: client(server, n), range(CLIENTS)))
        assert [e for res in results for e in res] == []
    assert "[mruby:error]" not in server.error_log()
