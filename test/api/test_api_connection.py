"""Apache::Connection: the client connection of the request."""

from httpd import module_httpd

BODY = r"""
AddHandler mruby-script .mrb
<Location /lookup>
    HostnameLookups On
</Location>
"""

FILES = {
    "htdocs/conn.mrb": (
        'c = Apache::Connection.new\n'
        'Apache.echo [c.remote_ip, c.client_ip, c.useragent_ip, c.local_ip].join(",")\n'
        'Apache.echo [c.remote_port.is_a?(Integer) && c.remote_port > 0, c.local_port].join(",")\n'
        'Apache.echo [c.remote_host.inspect, c.remote_logname.inspect].join(",")\n'
        'Apache.echo [c.keepalives, c.keepalive?, c.data_in_input_filters.is_a?(Integer), c.id.is_a?(Integer)].join(",")\n'
        'Apache.echo c.local_host.nil? || c.local_host.is_a?(String)\n'
    ),
    # mod_mruby's test: the client address as a note key
    "htdocs/note_ip.mrb": (
        'note = Apache::Notes.new\n'
        'note[Apache::Connection.new.remote_ip] = "allow"\n'
        'Apache.rputs note[Apache::Connection.new.remote_ip]\n'
    ),
    "htdocs/lookup/host.mrb": 'Apache.rputs Apache::Connection.new.remote_host.inspect\n',
    "htdocs/stale.mrb": (
        'if $conn\n'
        '  begin; $conn.remote_ip; rescue RuntimeError; Apache.rputs "stale"; end\n'
        'else\n'
        '  $conn = Apache::Connection.new; Apache.rputs "kept"\n'
        'end\n'
    ),
}

server = module_httpd("conn", BODY, files=FILES)


def test_connection_fields(server):
    out = server.lines("/conn.mrb")
    assert out[0] == "127.0.0.1,127.0.0.1,127.0.0.1,127.0.0.1"
    assert out[1] == "true,%d" % server.port
    assert out[2] == "nil,nil"
    assert out[3] == "0,false,true,true"  # first request; http.client closes after one
    assert out[4] == "true"


def test_remote_host_with_hostname_lookups(server):
    """Under HostnameLookups On the name is looked up when asked for (httpd
    itself looks it up only when something needs it); an address without
    a name is nil."""
    assert server.get("/lookup/host.mrb").text == '"localhost"'
    assert server.get("/lookup/host.mrb", source="127.0.0.2").text == "nil"
    # Off (the default), no lookup is made.
    assert server.lines("/conn.mrb")[2] == "nil,nil"


def test_keepalives_count_requests_on_one_connection(server):
    req = b"GET /conn.mrb HTTP/1.1\r\nHost: x\r\n\r\n"
    import socket
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(req + req[:-2] + b"Connection: close\r\n\r\n")
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    assert data.count(b"HTTP/1.1 200") == 2
    # keepalive? is decided when the response headers go out, after the script
    assert b"\nnil,nil\n0,false,true,true\n" in data and b"\nnil,nil\n1,false,true,true\n" in data


def test_notes_keyed_by_client_address(server):
    r = server.get("/note_ip.mrb")
    assert (r.status, r.body) == (200, b"allow")


def test_connection_object_dies_with_its_request(server):
    seen = {server.get("/stale.mrb").text for _ in range(60)}
    assert "stale" in seen
    assert seen <= {"kept", "stale"}  # no other error on the way
