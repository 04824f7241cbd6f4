"""Configuration inheritance, per phase: a section that configures nothing
for a phase inherits its parent's scripts; one that configures the phase
replaces them. Virtual hosts inherit the main server's scripts unless they
set their own."""

from httpd import module_httpd

NOTE = "r = Apache::Request.new; r.notes['trail'] = r.notes['trail'].to_s + '%s,'"
SHOW = "SetHandler mruby-native-script\n    mrubyHandlerCode \"Apache.rputs Apache::Request.new.notes['trail'].to_s\""

BODY = r"""
ServerName main.test
mrubyFixupsCode "{main}"
<Location />
    {show}
</Location>

<Location /parent>
    mrubyFixupsCode "{parent}"
</Location>
<Location /parent/other>
    mrubyFixupsCode "{other}"
</Location>
<Location /parent/handler>
    mrubyHandlerCode "Apache.rputs 'own handler after ' + Apache::Request.new.notes['trail'].to_s"
</Location>

<Directory {docroot}/dir>
    mrubyFixupsCode "{dir}"
</Directory>
<Files "*.special">
    mrubyFixupsCode "{files}"
</Files>
<If "%{HTTP:X-Variant} == 'b'">
    mrubyFixupsCode "{if_b}"
</If>

<VirtualHost 127.0.0.1:{port}>
    ServerName inherits.test
</VirtualHost>
<VirtualHost 127.0.0.1:{port}>
    ServerName own.test
    mrubyFixupsCode "{vhost}"
</VirtualHost>
""".replace("{main}", NOTE % "main").replace("{parent}", NOTE % "parent") \
   .replace("{other}", NOTE % "other").replace("{dir}", NOTE % "dir") \
   .replace("{files}", NOTE % "files").replace("{if_b}", NOTE % "if-b") \
   .replace("{vhost}", NOTE % "vhost").replace("{show}", SHOW)

FILES = {
    "htdocs/dir/page": "x",
    "htdocs/dir/page.special": "x",
}

server = module_httpd("inherit", BODY, files=FILES)


def trail(server, path, host="main.test", **headers):
    headers["Host"] = host
    r = server.get(path, headers=headers)
    assert r.status == 200, r
    return r.body.decode()


def test_server_level_script_applies_everywhere(server):
    # The first virtual host answers for the main server's name too: it
    # inherits the main server's scripts.
    assert trail(server, "/anything") == "main,"


def test_nested_location_replaces_the_phase(server):
    assert trail(server, "/parent") == "parent,"
    assert trail(server, "/parent/other") == "other,"


def test_nested_location_without_the_phase_inherits(server):
    assert trail(server, "/parent/child") == "parent,"


def test_other_phases_are_inherited_separately(server):
    # its own handler, and still the parent's Fixups
    r = server.get("/parent/handler", headers={"Host": "main.test"})
    assert (r.status, r.body) == (200, b"own handler after parent,")


def test_directory_and_files_sections(server):
    assert trail(server, "/dir/page") == "dir,"
    assert trail(server, "/dir/page.special") == "files,"


def test_if_section(server):
    assert trail(server, "/anything", **{"X-Variant": "a"}) == "main,"
    assert trail(server, "/anything", **{"X-Variant": "b"}) == "if-b,"


def test_virtual_host_inherits_main_server_scripts(server):
    assert trail(server, "/anything", host="inherits.test") == "main,"
    assert trail(server, "/parent", host="inherits.test") == "parent,"


def test_virtual_host_with_its_own_scripts(server):
    assert trail(server, "/anything", host="own.test") == "vhost,"
    # sections of the main server still apply inside it, on top
    assert trail(server, "/parent", host="own.test") == "parent,"
