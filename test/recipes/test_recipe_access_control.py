"""Recipe docs/recipes/access-control: paths kept to networks (IPv4 and
IPv6), scanners refused by User-Agent. Other client addresses come from
127.0.0.2 (a second loopback address) and, for any address at all, from
mod_remoteip in front of the recipe, as behind a load balancer."""

import pytest

from recipes import recipe_httpd

SITE = """
LogLevel warn mruby:info
# As behind a load balancer: the client address comes from a header.
RemoteIPHeader X-Client-IP
RemoteIPInternalProxy 127.0.0.1
"""

FILES = {
    "htdocs/index.html": "home\n",
    "htdocs/intranet/page.txt": "internal page\n",
}

srv = recipe_httpd("access-control", SITE, FILES, modules=("remoteip",))


def test_open_paths_for_everyone(srv):
    assert srv.get("/").body == b"home\n"
    assert srv.get("/", source="127.0.0.2").body == b"home\n"


def test_intranet_from_an_allowed_network(srv):
    r = srv.get("/intranet/page.txt")
    assert r.status == 200 and r.body == b"internal page\n"


def test_intranet_without_its_slash_from_elsewhere(srv):
    # not the redirect to /intranet/ (or, behind a ProxyPass /intranet, the
    # backend's answer): the path is inside the protected prefix
    assert srv.get("/intranet", source="127.0.0.2").status == 403
    assert srv.get("/intranet").status == 301


def test_intranet_from_elsewhere(srv):
    srv.expect("/intranet/page.txt", 403,
               r"MRB00400: .*access_control\.rb:\d+: 127\.0\.0\.2 is not allowed into /intranet/",
               source="127.0.0.2")


@pytest.mark.parametrize("client, status", [
    ("10.20.30.40", 200),
    ("172.16.0.1", 200),
    ("172.31.255.255", 200),
    ("172.15.255.255", 403),
    ("172.32.0.0", 403),
    ("192.168.200.7", 200),
    ("192.169.0.1", 403),
    ("8.8.8.8", 403),
    ("fd00::1", 200),
    ("fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 200),
    ("fd12:3456:789a:1::42", 200),
    ("fe80::1", 403),
    ("2001:db8::1", 403),
    ("::1", 403),
    ("::ffff:10.1.2.3", 200),
    ("::ffff:8.8.4.4", 403),
])
def test_networks(srv, client, status):
    assert srv.get("/intranet/page.txt", headers={"X-Client-IP": client}).status == status


def test_server_status_is_for_localhost_only(srv):
    assert srv.get("/server-status", headers={"X-Client-IP": "10.0.0.1"}).status == 403
    # Allowed through; what answers depends on whether mod_status is there.
    assert srv.get("/server-status").status in (200, 404)


@pytest.mark.parametrize("agent", ["sqlmap/1.7.2#stable (https://sqlmap.org)", "Mozilla/5.00 (Nikto/2.1.6)",
                                   "masscan/1.3", "Nuclei - Open-source project"])
def test_scanners_are_refused_everywhere(srv, agent):
    assert srv.get("/", headers={"User-Agent": agent}).status == 403
    assert srv.get("/intranet/page.txt", headers={"User-Agent": agent}).status == 403
    srv.wait_log(r"refused User-Agent: " + agent.split("/")[0].split(" ")[0])


def test_browsers_are_not(srv):
    r = srv.get("/", headers={"User-Agent": "Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0"})
    assert r.status == 200
