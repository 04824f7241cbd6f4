"""Apache::Finfo: what httpd knows of the request's file."""

import os

from httpd import module_httpd

BODY = r"""
AddHandler mruby-script .mrb
<Location /nofile>
    SetHandler mruby-native-script
    mrubyHandlerCode "f = Apache::Request.new.finfo; Apache.rputs [f.filetype == Apache::Finfo::APR_NOFILE, f.size.is_a?(Integer), f.mtime.is_a?(Integer)].join(',')"
</Location>
"""

FILES = {
    "htdocs/finfo.mrb": (
        'f = Apache::Request.new.finfo\n'
        '%w[permission mode filetype user group device inode nlink size csize atime mtime ctime]'
        '.each { |n| Apache.echo "#{n}=#{f.send(n)}" }\n'
        'Apache.echo "reg=#{f.filetype == Apache::Finfo::APR_REG}"\n'
        'Apache.echo "types=#{[Apache::Finfo::APR_NOFILE, Apache::Finfo::APR_DIR, Apache::Finfo::APR_LNK].join(",")}"\n'
    ),
}

server = module_httpd("finfo", BODY, files=FILES)


def test_finfo_of_the_script(server):
    f = dict(l.split("=", 1) for l in server.lines("/finfo.mrb"))
    st = os.stat(os.path.join(server.docroot, "finfo.mrb"))
    assert int(f["mode"]) == st.st_mode & 0o7777 == 0o644
    assert f["reg"] == "true"
    assert int(f["size"]) == st.st_size
    assert int(f["inode"]) == st.st_ino
    assert int(f["user"]) == st.st_uid and int(f["group"]) == st.st_gid
    assert int(f["nlink"]) == 1
    assert int(f["mtime"]) // 1000000 == int(st.st_mtime)  # microseconds
    assert f["types"] == "0,2,6"
    assert int(f["device"]) == st.st_dev
    # (reading the script may move its atime after httpd's stat)
    assert 0 < int(f["atime"]) // 1000000 <= int(st.st_atime)
    assert int(f["ctime"]) // 1000000 == int(st.st_ctime)
    assert int(f["csize"]) >= 0
    assert int(f["permission"]) == 0x0644  # APR's bits: UREAD|UWRITE, GREAD, WREAD


def test_finfo_without_a_file(server):
    r = server.get("/nofile")
    assert (r.status, r.body) == (200, b"true,true,true")
