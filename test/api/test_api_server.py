"""Apache::Server: the serving virtual host, read-only."""

from httpd import module_httpd

BODY = r"""
AddHandler mruby-script .mrb
ServerAdmin admin@example.test
KeepAliveTimeout 3
MaxKeepAliveRequests 77
LimitRequestFields 60
Listen 127.0.0.1:{vport}
<VirtualHost 127.0.0.1:{vport}>
    ServerName vhost.example.test
    ServerPath /legacy
    DocumentRoot "{docroot}"
</VirtualHost>
"""

FILES = {
    "htdocs/server.mrb": (
        's = Apache::Server.new\n'
        '%w[hostname admin port document_root docroot error_fname is_virtual keep_alive keep_alive_max'
        ' keep_alive_timeout timeout limit_req_line limit_req_fieldsize limit_req_fields loglevel'
        ' redirect_server_port defn_name defn_line_number path pathlen scheme redirect_server_scheme].each { |f| Apache.echo "#{f}=#{s.send(f).inspect}" }\n'
        'Apache.echo "virtual?=#{s.virtual?}"\n'
        'Apache.echo "same=#{Apache::Request.new.server.hostname == s.hostname}"\n'
    ),
    "htdocs/readonly.mrb": (
        's = Apache::Server.new\n'
        'out = []\n'
        '[[:timeout=, 3], [:loglevel=, 7], [:error_fname=, "/tmp/x"]].each do |m, v|\n'
        '  begin; s.send(m, v); out << "changed"; rescue NotImplementedError; out << "refused"; end\n'
        'end\n'
        'out << s.timeout\n'
        'Apache.rputs out.join(",")\n'
    ),
}


def vhost_port():
    from httpd import free_port
    return free_port()


VPORT = vhost_port()
server = module_httpd("server", BODY.replace("{vport}", str(VPORT)), files=FILES)


def fields(server, port=None):
    if port:
        import http.client
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.request("GET", "/server.mrb")
        resp = c.getresponse()
        lines = resp.read().decode().splitlines()
        assert resp.status == 200
    else:
        lines = server.lines("/server.mrb")
    return dict(l.split("=", 1) for l in lines)


def test_main_server(server):
    f = fields(server)
    assert f["hostname"] == '"127.0.0.1"'
    assert f["admin"] == '"admin@example.test"'
    assert f["port"] == str(server.port)
    assert f["document_root"] == f["docroot"] == '"%s"' % server.docroot
    assert f["error_fname"].endswith('logs/error.log"')
    assert f["is_virtual"] == "0" and f["virtual?"] == "false"
    assert f["keep_alive"] == "1"
    assert f["keep_alive_max"] == "77"
    assert f["keep_alive_timeout"] == "3000000"  # microseconds, as mod_mruby gave them
    assert f["timeout"] == "30000000"
    assert f["limit_req_fields"] == "60"
    assert int(f["limit_req_line"]) == 8190
    assert int(f["loglevel"]) == 4  # LogLevel warn
    assert f["same"] == "true"
    assert f["path"] == "nil" and f["pathlen"] == "0"
    # the main server has no <VirtualHost> of its own
    assert f["defn_name"] == "nil" and f["defn_line_number"] == "0"


def test_virtual_host(server):
    f = fields(server, VPORT)
    assert f["hostname"] == '"vhost.example.test"'
    assert f["scheme"] == f["redirect_server_scheme"]
    assert f["is_virtual"] == "1" and f["virtual?"] == "true"
    assert f["defn_name"].endswith('httpd.conf"')
    assert int(f["defn_line_number"]) > 0
    # ServerPath, not where the server was defined
    assert f["path"] == '"/legacy"' and f["pathlen"] == "7"


def test_server_is_read_only(server):
    r = server.get("/readonly.mrb")
    assert (r.status, r.body) == (200, b"refused,refused,refused,30000000")
