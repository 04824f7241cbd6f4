"""Changed scripts are served fresh by every thread; `cache` scripts are
never re-read."""

import concurrent.futures
import re

from httpd import SINGLE_WORKER, module_httpd

BODY = r"""
AddHandler mruby-script .mrb
<Location /reloading>
    SetHandler mruby-native-script
    mrubyHandler {root}/scripts/reloading.rb
</Location>
<Location /cached>
    SetHandler mruby-native-script
    mrubyHandler {root}/scripts/cached.rb cache
</Location>
<Location /bom>
    SetHandler mruby-native-script
    mrubyHandler {root}/scripts/bom.rb
</Location>
<Location /bom_cached>
    SetHandler mruby-native-script
    mrubyHandler {root}/scripts/bom_cached.rb cache
</Location>
<Location /rite_file>
    SetHandler mruby-native-script
    mrubyHandler {root}/scripts/rite.rb cache
</Location>
<Location /rite_inline>
    SetHandler mruby-native-script
    mrubyHandlerCode "RITE_NAME ||= 'inline'; Apache.rputs RITE_NAME"
</Location>
"""

BOM = b"\xef\xbb\xbf"
# Ruby that starts like mruby bytecode ("RITE"), but is not
RITE_RB = 'RITES ||= %w[a b]\nApache.rputs RITES.join(",")\n'

FILES = {
    "htdocs/page.mrb": 'Apache.rputs "v1"\n',
    "scripts/reloading.rb": 'Apache.rputs "r1"\n',
    "scripts/cached.rb": 'Apache.rputs "c1"\n',
    "scripts/bom.rb": BOM + b'Apache.rputs "bom 1"\r\n',
    "scripts/bom_cached.rb": BOM + b'Apache.rputs "bom cached"\n',
    "scripts/rite.rb": RITE_RB,
}

# One child per MPM (several threads on worker/event), so every request
# meets one of a known set of VMs.
server = module_httpd("reload", BODY, files=FILES,
                      mpm_conf=dict(StartServers=1, ServerLimit=1, ThreadsPerChild=8,
                                    MinSpareThreads=8, MaxSpareThreads=8, MaxRequestWorkers=8,
                                    MinSpareServers=4, MaxSpareServers=4))


def bodies(server, path, n=64):
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        results = list(pool.map(lambda _: server.get(path), range(n)))
    assert all(r.status == 200 for r in results), results
    return {r.body for r in results}


def test_edited_mrb_is_served_fresh_by_every_thread(server):
    assert bodies(server, "/page.mrb") == {b"v1"}
    server.write("htdocs/page.mrb", 'Apache.rputs "version two"\n')
    assert bodies(server, "/page.mrb") == {b"version two"}
    server.write("htdocs/page.mrb", 'Apache.rputs "v3"\n')  # same size as v1's file
    assert bodies(server, "/page.mrb") == {b"v3"}


def test_mruby_handler_without_cache_reloads(server):
    assert bodies(server, "/reloading") == {b"r1"}
    server.write("scripts/reloading.rb", 'Apache.rputs "r2"\n')
    assert bodies(server, "/reloading") == {b"r2"}


def test_mruby_handler_with_cache_is_never_reread(server):
    assert bodies(server, "/cached") == {b"c1"}
    server.write("scripts/cached.rb", 'Apache.rputs "c2"\n')
    assert bodies(server, "/cached") == {b"c1"}


def test_precompiled_bytecode_is_loaded(server, tmp_path):
    import subprocess
    src = tmp_path / "pre.rb"
    src.write_text('Apache.rputs "precompiled"\n')
    out = tmp_path / "pre.mrb"
    subprocess.run(["mrbc", "-o", str(out), str(src)], check=True)
    server.write("htdocs/pre.mrb", out.read_bytes())
    r = server.get("/pre.mrb")
    assert (r.status, r.body) == (200, b"precompiled")


def test_invalid_bytecode_is_500(server):
    server.write("htdocs/junk.mrb", b"RITE0300garbage-garbage-garbage")
    server.expect("/junk.mrb", 500,
                  r"MRB00020: .*junk\.mrb: invalid mruby bytecode: the file is 31 bytes, its header says \d+")


def test_scripts_starting_with_a_byte_order_mark(server):
    # compiled while the configuration is read, with and without `cache`
    assert bodies(server, "/bom", n=16) == {b"bom 1"}
    assert bodies(server, "/bom_cached", n=16) == {b"bom cached"}
    # compiled on a request: a changed file, a .mrb file
    server.write("scripts/bom.rb", BOM + b'Apache.rputs "bom 2"\n')
    assert bodies(server, "/bom", n=16) == {b"bom 2"}
    server.write("htdocs/bom.mrb", BOM + b'Apache.rputs "bom mrb"\n')
    assert bodies(server, "/bom.mrb", n=16) == {b"bom mrb"}


def test_ruby_starting_with_rite_is_compiled_not_taken_for_bytecode(server):
    assert bodies(server, "/rite_file", n=8) == {b"a,b"}
    assert bodies(server, "/rite_inline", n=8) == {b"inline"}
    server.write("htdocs/rite.mrb", RITE_RB)
    assert bodies(server, "/rite.mrb", n=8) == {b"a,b"}


# One VM meets many files: its table of file scripts (code.c) starts with 8
# buckets and doubles past one file a bucket; each file keeps its own
# script through the growths, and an edited one is compiled again.
MANY = 40
many = module_httpd("reload_many", """
LoadModule status_module /usr/lib/apache2/modules/mod_status.so
AddHandler mruby-script .mrb
<Location /server-status>
    SetHandler server-status
</Location>
""", files={"htdocs/many/f%02d.mrb" % i: 'Apache.rputs "file %d"\n' % i for i in range(MANY)},
    mpm_conf=SINGLE_WORKER)


def code_counts(srv):
    text = srv.ok("/server-status?auto").text
    return {k: int(re.search(r"^Mruby%s: (\d+)$" % k, text, re.M).group(1)) for k in ("CodeHits", "CodeCompiles")}


def test_one_vm_keeps_many_files_apart(many):
    before = code_counts(many)
    for round_ in range(2):
        for i in range(MANY):
            assert many.ok("/many/f%02d.mrb" % i).text == "file %d" % i
    after = code_counts(many)
    # compiled once each, then found in the VM's table
    assert (after["CodeCompiles"] - before["CodeCompiles"], after["CodeHits"] - before["CodeHits"]) == (MANY, MANY)
    for i in (0, 17, MANY - 1):
        many.write("htdocs/many/f%02d.mrb" % i, 'Apache.rputs "edited %d"\n' % i)
    for i in range(MANY):
        assert many.ok("/many/f%02d.mrb" % i).text == ("edited %d" if i in (0, 17, MANY - 1) else "file %d") % i
    assert code_counts(many)["CodeCompiles"] - after["CodeCompiles"] == 3
