"""Scripts that crashed mruby 3.1 itself, and the child with it (or hung
it in a C loop no timeout reaches): objects made but never initialized
(Proc.allocate, Method.allocate, a String without its buffer, a Proc copied
with #initialize_copy redefined), helpers of mruby-io and mruby-socket
that trust their arguments, Array#* of an empty Array, Float#<< by 2**62. Found by calling the
core classes' methods with odd receivers and arguments; closed in every VM
by src/core/guard.c. Each runs in the one worker of the server, twice: the
answer is an exception or a sane result, and the same process and VM go on
serving (the error log is checked for crashes when the server stops)."""

import pytest

from httpd import SINGLE_WORKER, module_httpd

# name -> (script, expected status, the body or the log entry's text)
CASES = {
    "proc_call": ("Proc.allocate.call", 500, "TypeError at .*: allocator undefined for Proc"),
    "proc_when": ("case 1; when Proc.allocate; end", 500, "allocator undefined for Proc"),
    "proc_subclass": ("class GuardP < Proc; end; GuardP.allocate[]", 500, "allocator undefined for GuardP"),
    "proc_new_bound": ("Class.instance_method(:new).bind(Proc).call.call", 500, "allocator undefined for Proc"),
    "proc_allocate_bound": ("Class.instance_method(:allocate).bind(Proc).call.yield", 500,
                            "allocator undefined for Proc"),
    "method": ("Method.allocate.super_method", 500, "allocator undefined for Method"),
    "unbound_method": ("UnboundMethod.allocate.bind(nil)", 500, "allocator undefined for UnboundMethod"),
    "string_allocate": ("s = String.allocate; s.insert(0, 'a'); s.prepend('o'); s[''] = 'k'; Apache.rputs s",
                        200, "koa"),
    "string_no_initialize": ("class GuardS < String; def initialize(*a); end; end; "
                             "Apache.rputs GuardS.new('x').insert(0, 'ok')", 200, "ok"),
    "string_no_initialize_copy": ("class GuardT < String; def initialize_copy(o); end; end; "
                                  "Apache.rputs GuardT.new('x').dup.insert(0, 'ok') + GuardT.new('y').clone.prepend('!')",
                                  200, "ok!"),
    "proc_no_initialize_copy": ("class GuardQ < Proc; def initialize_copy(o); end; end; "
                                "q = GuardQ.new { 'ok' }; Apache.rputs q.dup.call + q.clone.call", 200, "okok"),
    "array_times": ("Apache.rputs(([] * 2**62).size.to_s + ([1] * 2).inspect)", 200, "0[1, 1]"),
    "float_shift": ("Apache.rputs [1.5 << 2**62, 1.5 >> -(2**62), 0.0 << 2**62, -1.5 << 5000, 1.5 << 3].inspect",
                    200, "[Infinity, Infinity, 0, -Infinity, 12]"),
    "io_readchar": ("IO.allocate._readchar('')", 500, "ArgumentError at .*: IO#_readchar needs a buffer"),
    "io_bufread": ("IO._bufread('', 5)", 500, "ArgumentError at .*: IO._bufread: length outside the buffer"),
    "addrinfo": ("a = Addrinfo.tcp('127.0.0.1', 80); a.instance_variable_set(:@sockaddr, 1); a.unix_path",
                 500, "TypeError at .*: Addrinfo without a sockaddr String"),
}

BODY = r"""
AddHandler mruby-script .mrb
<Location /count>
    SetHandler mruby-native-script
    mrubyHandlerCode "$n = ($n || 0) + 1; Apache.rputs $n.to_s"
</Location>
"""

FILES = {"htdocs/%s.mrb" % name: script + "\n" for name, (script, _, _) in CASES.items()}

# One worker: every case meets the same process and VM as /count.
server = module_httpd("guard", BODY, files=FILES, mpm_conf=SINGLE_WORKER)


@pytest.mark.parametrize("name", sorted(CASES))
def test_script_gets_an_answer_and_the_child_lives(server, name):
    script, status, expected = CASES[name]
    before = int(server.ok("/count").body)
    for attempt in (1, 2):
        r = server.get("/%s.mrb" % name, timeout=10)
        assert r.status == status, (r, server.error_log()[-2000:])
        if status == 200:
            assert r.text == expected
        else:
            server.wait_log(r"MRB00030: .*/%s\.mrb raised .*%s" % (name, expected), count=attempt)
    assert int(server.ok("/count").body) == before + 1  # the same VM: no crash, no replacement
