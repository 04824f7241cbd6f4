"""Many clients at once: every answer belongs to its own request, with no
cross-talk between threads or VMs: the arguments, headers and notes of
inline handler code and of script files; and, in two rounds, request
bodies, forms, cookies, Rack and Regexp captures."""

import concurrent.futures
import os
import uuid

from httpd import module_httpd

BODY = r"""
AddHandler mruby-script .mrb
<Location /echo>
    SetHandler mruby-native-script
    mrubyHandlerCode "r = Apache::Request.new; t = r.headers_in['X-Token']; r.headers_out['X-Echo'] = t; r.notes['t'] = t; s = ''; 50.times { s << r.args }; Apache.rputs s + '|' + r.notes['t']"
</Location>
<Location /rack>
    mrubyHandlerCode 'run Proc.new { |env| t = env["HTTP_X_TOKEN"]; [200, {"X-Echo" => t}, [env["rack.input"].read, "|", t]] }'
</Location>
"""

ECHO_MRB = """r = Apache::Request.new
token = r.headers_in["X-Token"]
r.headers_out["X-Echo"] = token
Apache.rputs "file:" + r.args + "|" + token
"""

MIXED_MRB = r'''
r = Apache::Request.new
token = r.headers_in["X-Token"]
m = /^t=(\w+)/.match(r.args.to_s)
form = r.form_params
body = r.body.to_s
r.set_cookie "t", token
Apache.rputs [m && m[1], form["token"], r.cookies["c"], body.size, token].join(",")
'''

# Worker and event: 16 threads per child, 4 children.
server = module_httpd("concurrency", BODY,
                      files={"htdocs/echo.mrb": ECHO_MRB, "htdocs/mixed.mrb": MIXED_MRB},
                      mpm_conf=dict(StartServers=4, MinSpareServers=4, MaxSpareServers=64))


def errors_of_clients(clients, client):
    """Runs client(n) for n in range(clients), all at once; the errors
    they return."""
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        return [e for errors in pool.map(client, range(clients)) for e in errors]


def echo_client(server, n, requests=60):
    errors = []
    for i in range(requests):
        token = uuid.uuid4().hex
        path = "/echo?%d-%d-%s" % (n, i, token) if i % 2 else "/echo.mrb?%d-%d-%s" % (n, i, token)
        r = server.get(path, headers={"X-Token": token})
        arg = path.split("?", 1)[1]
        expected = ("file:%s|%s" % (arg, token)) if path.startswith("/echo.mrb") else (arg * 50 + "|" + token)
        if r.status != 200 or r.text != expected or r.headers["X-Echo"] != token:
            errors.append((path, r.status, r.text[:100], r.headers["X-Echo"]))
    return errors


def body_client(server, n, requests=20):
    errors = []
    for i in range(requests):
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


def test_no_cross_talk_under_concurrency(server):
    assert errors_of_clients(48, lambda n: echo_client(server, n)) == []
    assert "[mruby:error]" not in server.error_log()


def test_bodies_forms_cookies_and_rack_under_concurrency_twice(server):
    for _ in range(2):
        assert errors_of_clients(24, lambda n: body_client(server, n)) == []
    assert "[mruby:error]" not in server.error_log()
