"""Request#query_params, #form_params (urlencoded through httpd's parser,
multipart through ours), the fields limit and the truncated? flag,
Request#cookies and #set_cookie."""

from httpd import ANY_MPM, module_httpd

BODY = r"""
AddHandler mruby-script .mrb
<Location /few>
    mrubyFormFieldsLimit 2
</Location>
"""

DUMP = (
    'def dump(p)\n'
    '  p.keys.sort.map do |k|\n'
    '    v = p[k]\n'
    '    v = "file(#{v.filename},#{v.content_type},#{v.size},#{v.body.inspect})" if v.is_a?(Apache::FormFile)\n'
    '    "#{k}=#{v.inspect}"\n'
    '  end.join(" ") + " truncated=#{p.truncated?}"\n'
    'end\n'
)

FILES = {
    "htdocs/query.mrb": DUMP + 'Apache.rputs dump(Apache::Request.new.query_params)\n',
    "htdocs/form.mrb": DUMP + (
        'r = Apache::Request.new\n'
        'Apache.echo dump(r.form_params)\n'
        'Apache.echo r.form_params.values_of("a").inspect\n'
        'Apache.echo r.body.size\n'
    ),
    "htdocs/few/query.mrb": DUMP + 'Apache.rputs dump(Apache::Request.new.query_params)\n',
    "htdocs/few/form.mrb": DUMP + 'Apache.rputs dump(Apache::Request.new.form_params)\n',
    "htdocs/form_then_body.mrb": (
        'r = Apache::Request.new\n'
        'r.form_params\n'
        'r.internal_redirect "/body.mrb"\n'
    ),
    "htdocs/body.mrb": 'Apache.rputs Apache::Request.new.body.to_s\n',
    "htdocs/cookies.mrb": (
        'r = Apache::Request.new\n'
        'Apache.echo r.cookies.keys.sort.map { |k| "#{k}=#{r.cookies[k]}" }.join(",")\n'
        'Apache.echo r.cookies["missing"].inspect\n'
    ),
    "htdocs/set_cookie.mrb": (
        'r = Apache::Request.new\n'
        'r.set_cookie "sid", "abc123", path: "/", httponly: true, secure: true, samesite: "lax", max_age: 60\n'
        'r.set_cookie "plain", "v"\n'
        'r.set_cookie "old", "x", expires: Time.at(0)\n'
        'r.set_cookie "none", "y", nil\n'
        'out = []\n'
        '[["bad name", "v", {}], ["n", "a;b", {}], ["n", "v", {path: "/a\\r\\nX: y"}], ["n", "v", {bogus: 1}],'
        ' ["n", "v", {samesite: "sometimes"}], ["n", "v", "path=/"], ["n", "v", [[:path, "/"]]]].each do |n, v, a|\n'
        '  begin; r.set_cookie(n, v, a); out << "accepted"; rescue ArgumentError; out << "refused"; end\n'
        'end\n'
        'Apache.rputs out.uniq.join(",")\n'
    ),
    "htdocs/cookie_redirect.mrb": (
        'Apache::Request.new.set_cookie "after", "login"\n'
        'Apache.redirect "/next"\n'
    ),
}

server = module_httpd("params", BODY, files=FILES, mpms=ANY_MPM)

URLENC = {"Content-Type": "application/x-www-form-urlencoded"}


def test_query_params(server):
    r = server.get("/query.mrb?a=1&b=two+words&c=%2Fslash%26amp&a=last&flag&empty=")
    assert r.status == 200, server.error_log()[-2000:]
    assert r.text == ('a="last" b="two words" c="/slash&amp" empty="" flag="1" truncated=false')


def test_query_params_without_query(server):
    assert server.get("/query.mrb").text == " truncated=false"


def test_query_params_limit(server):
    assert server.get("/few/query.mrb?a=1&b=2&c=3").text == 'a="1" b="2" truncated=true'


def test_urlencoded_form(server):
    r = server.request("POST", "/form.mrb", body=b"a=1&b=x+y%21&a=2&bin=%00%FF&empty=", headers=URLENC)
    assert r.status == 200, server.error_log()[-2000:]
    out = r.text.splitlines()
    assert out[0] == 'a="2" b="x y!" bin="\\x00\\xff" empty="" truncated=false'
    assert out[1] == '["1", "2"]'
    assert out[2] == "34"  # the body is still there


def test_urlencoded_form_keeps_a_percent_sign_that_is_no_escape(server):
    # a '%' without two hex digits after it stays as it is (as in the query
    # string) instead of taking the next bytes: "50%&b=1" kept the field b
    r = server.request("POST", "/form.mrb", body=b"a=50%&b=1&c=%zz&d=%4&e%=2&f=%2B%", headers=URLENC)
    assert r.status == 200, server.error_log()[-2000:]
    assert r.text.splitlines()[0] == (
        'a="50%" b="1" c="%zz" d="%4" e%="2" f="+%" truncated=false')


def test_urlencoded_form_names_are_binary_safe(server):
    r = server.request("POST", "/form.mrb", body=b"k%00x=v&flag&=e", headers=URLENC)
    assert r.text.splitlines()[0] == '="e" k\x00x="v" truncated=false'


def test_urlencoded_form_limit(server):
    r = server.request("POST", "/few/form.mrb", body=b"a=1&b=2&c=3&d=4", headers=URLENC)
    assert r.text == 'a="1" b="2" truncated=true'


def test_form_of_other_type_is_empty(server):
    r = server.request("POST", "/form.mrb", body=b"a=1", headers={"Content-Type": "text/plain"})
    assert r.text.splitlines() == [" truncated=false", "[]", "3"]


def test_form_params_keep_the_body(server):
    r = server.request("POST", "/form_then_body.mrb", body=b"k=v&w=z", headers=URLENC)
    assert r.body == b"k=v&w=z"


def multipart(parts, boundary="XyZ-boundary"):
    out = b""
    for headers, data in parts:
        out += b"--" + boundary.encode() + b"\r\n" + headers + b"\r\n\r\n" + data + b"\r\n"
    return out + b"--" + boundary.encode() + b"--\r\n", {
        "Content-Type": 'multipart/form-data; boundary="%s"' % boundary}


def test_multipart_form(server):
    blob = bytes(range(256)) + b"\r\n--XyZ-not-quite\r\n"
    body, headers = multipart([
        (b'Content-Disposition: form-data; name="a"', b"first"),
        (b'Content-Disposition: form-data; name="a"', b"second"),
        (b'Content-Disposition: form-data; name="up"; filename="f.bin"\r\nContent-Type: application/octet-stream', blob),
        (b'Content-Disposition: form-data; name="empty"', b""),
        (b'Content-Type: text/plain', b"no name: ignored"),
    ])
    r = server.request("POST", "/form.mrb", body=body, headers=headers)
    assert r.status == 200, server.error_log()[-2000:]
    out = r.text.splitlines()
    assert out[0].startswith('a="second" empty="" up="file(f.bin,application/octet-stream,%d,' % len(blob))
    assert out[0].endswith('truncated=false')
    assert out[1] == '["first", "second"]'
    assert out[2] == str(len(body))


def test_multipart_keeps_backslashes_of_names_and_file_names(server):
    # browsers send them unescaped (a Windows path as the file name); only
    # \" and \\ are escapes in a quoted string
    body, headers = multipart([
        (b'Content-Disposition: form-data; name="up"; filename="C:\\dir\\f.txt"', b"data"),
        (b'Content-Disposition: form-data; name="a\\b"', b"v"),
        (b'Content-Disposition: form-data; name="q\\"x"', b"w"),
    ])
    r = server.request("POST", "/form.mrb", body=body, headers=headers)
    assert r.status == 200, server.error_log()[-2000:]
    # (the file's summary is inspected: its backslashes are doubled)
    assert r.text.splitlines()[0] == ('a\\b="v" q"x="w" up="file(C:\\\\dir\\\\f.txt,,4,\\"data\\")" '
                                      'truncated=false')


def test_multipart_limits_and_truncation(server):
    body, headers = multipart([(b'Content-Disposition: form-data; name="f%d"' % i, b"v") for i in range(5)])
    r = server.request("POST", "/few/form.mrb", body=body, headers=headers)
    assert r.text == 'f0="v" f1="v" truncated=true'
    # a body cut before its closing delimiter
    r = server.request("POST", "/form.mrb", body=body[:60], headers=headers)
    assert r.status == 200 and "truncated=true" in r.text.splitlines()[0]


def test_multipart_without_boundary_is_400(server):
    r = server.request("POST", "/form.mrb", body=b"x", headers={"Content-Type": "multipart/form-data"})
    assert r.status == 400


def test_multipart_garbage_does_not_crash(server):
    import random
    rnd = random.Random(4)
    base, headers = multipart([(b'Content-Disposition: form-data; name="a"; filename="x"', b"data" * 20)])
    for _ in range(40):
        data = bytearray(base)
        for _ in range(rnd.randint(1, 8)):
            data[rnd.randrange(len(data))] = rnd.randrange(256)
        data = bytes(data[:rnd.randrange(len(data) + 1)])
        r = server.request("POST", "/form.mrb", body=data, headers=headers)
        assert r.status == 200


def test_cookies(server):
    r = server.raw(b"GET /cookies.mrb HTTP/1.1\r\nHost: x\r\nCookie: a=1; b=\"quoted\"; a=2\r\n"
                   b"Cookie: c=3\r\nConnection: close\r\n\r\n")
    assert r.text.splitlines() == ["a=1,b=quoted,c=3", "nil"]
    assert server.lines("/cookies.mrb") == ["", "nil"]


def test_set_cookie(server):
    r = server.get("/set_cookie.mrb")
    assert (r.status, r.body) == (200, b"refused")
    assert r.headers.get_all("Set-Cookie") == [
        "sid=abc123; Path=/; HttpOnly; Secure; SameSite=Lax; Max-Age=60",
        "plain=v",
        "old=x; Expires=Thu, 01 Jan 1970 00:00:00 GMT",
        "none=y",
    ]


def test_set_cookie_survives_a_redirect(server):
    r = server.get("/cookie_redirect.mrb")
    assert r.status == 302
    assert r.headers["Set-Cookie"] == "after=login"
