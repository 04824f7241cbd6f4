"""mruby bytecode files (mrbc output) are checked before they run: a damaged
one is refused with what is wrong in it, mrbc's own output always passes."""

import glob
import os
import re
import struct
import subprocess

import pytest

from httpd import ROOT, module_httpd

OPS_H = "/usr/include/mruby/ops.h"

SCRIPT = 's = "hello"\nif s.size > 3\n  Apache.rputs "#{s}!"\nend\ndef shout(x) x.upcase end\n'

server = module_httpd("bytecode", "AddHandler mruby-script .mrb\n")


def opcodes():
    """{name: (number, operand layout)} from mruby's ops.h."""
    if not os.path.exists(OPS_H):
        pytest.skip("no %s (libmruby-dev)" % OPS_H)
    with open(OPS_H) as f:
        table = re.findall(r"^OPCODE\((\w+),\s*(\w+)\)", f.read(), re.M)
    return {name: (i, layout) for i, (name, layout) in enumerate(table)}


def compile_rb(tmp_path, source, name="script", debug=False):
    src = tmp_path / (name + ".rb")
    src.write_text(source)
    out = tmp_path / (name + ".mrb")
    subprocess.run(["mrbc"] + (["-g"] if debug else []) + ["-o", str(out), str(src)], check=True)
    return bytearray(out.read_bytes())


# A RITE image: a 20-byte header, the IREP section's 12-byte header, then
# the top irep's record: size, nlocals, nregs, rlen, clen, ilen, the code.
ISEQ = 48


def code(image):
    nregs = struct.unpack(">H", image[38:40])[0]
    ilen = struct.unpack(">I", image[44:48])[0]
    return nregs, bytes(image[ISEQ:ISEQ + ilen])


def find(image, op_name, ops, nth=1):
    """Offset in the image of the nth instruction op_name of the top irep
    (the script above has no OP_EXTn, so every instruction is short)."""
    sizes = {"Z": 0, "B": 1, "BB": 2, "BBB": 3, "BS": 3, "BSS": 5, "S": 2, "W": 3}
    layouts = [layout for _, layout in sorted(ops.values())]
    _, iseq = code(image)
    pos = 0
    while pos < len(iseq):
        if iseq[pos] == ops[op_name][0]:
            nth -= 1
            if nth == 0:
                return ISEQ + pos
        pos += 1 + sizes[layouts[iseq[pos]]]
    raise AssertionError("no OP_%s in the script's code" % op_name)


def damaged(tmp_path):
    """(name, image, what the error log says) for one damaged byte each."""
    ops = opcodes()
    good = compile_rb(tmp_path, SCRIPT)
    nregs, _ = code(good)
    cases = []

    def case(name, at, value, why):
        image = bytearray(good)
        image[at] = value
        cases.append((name, bytes(image), why))

    case("opcode", ISEQ, 240, r"unknown instruction 240 at byte 0")
    string = find(good, "STRING", ops)
    case("register", string + 1, 200,
         r"OP_STRING at byte 0: register 200 is outside its frame of %d registers" % nregs)
    case("literal", string + 2, 77, r"OP_STRING at byte 0: literal 77 of 3")
    send = find(good, "SEND", ops)
    case("symbol", send + 2, 99, r"OP_SEND at byte %d: symbol 99 of \d+" % (send - ISEQ))
    jump = find(good, "JMPNOT", ops)
    case("jump", jump + 2, 127, r"OP_JMPNOT at byte %d: jumps to byte \d+, outside the code" % (jump - ISEQ))
    case("into an instruction", jump + 3, good[jump + 3] + 1,
         r"the jump at byte %d goes to byte \d+, not to the start of an instruction" % (jump - ISEQ))
    # "#{s}!" starts as an empty String that OP_STRCAT appends to: made an
    # Integer, OP_STRCAT would append to that.
    empty = find(good, "STRING", ops, nth=2)
    strcat = find(good, "STRCAT", ops)
    case("kind", empty, ops["LOADI"][0],
         r"OP_STRCAT at byte %d: register %d may not hold a String" % (strcat - ISEQ, good[strcat + 1]))
    method = find(good, "METHOD", ops)
    case("method", method + 1, good[method + 1] + 1,
         r"OP_DEF at byte \d+: its registers do not hold the class and method just made")
    return good, cases


def sections(image):
    """{ident: offset} of a RITE image's sections."""
    found, at = {}, 20
    while at < len(image):
        found[bytes(image[at:at + 4])] = at
        at += struct.unpack(">I", image[at + 4:at + 8])[0]
    return found


def nested(depth):
    """A RITE image whose ireps are nested depth deep (mrbc's parser stops
    far sooner), each an empty record: header, no code, no literal, no
    symbol."""
    record = lambda rlen: struct.pack(">IHHHHIHH", 20, 1, 1, rlen, 0, 0, 0, 0)
    irep = b"".join(record(1) for _ in range(depth)) + record(0)
    irep = b"IREP" + struct.pack(">I", 12 + len(irep)) + b"0300" + irep
    size = 20 + len(irep) + 8
    return b"RITE0300" + struct.pack(">I", size) + b"MATZ0000" + irep + b"END\0" + struct.pack(">I", 8)


def damaged_framing(tmp_path):
    """(name, image, what the error log says) for files whose lengths or
    tables mruby's loader would have trusted: compiled with debug
    information, so that they have all four sections."""
    good = compile_rb(tmp_path, SCRIPT, "framing", debug=True)
    at = sections(good)
    assert set(at) == {b"IREP", b"DBG\0", b"LVAR", b"END\0"}, at
    cases = []

    def case(name, image, why):
        cases.append((name, bytes(image), why))

    def patched(offset, data):
        image = bytearray(good)
        image[offset:offset + len(data)] = data
        return image

    case("version", patched(4, b"0400"),
         r"format 0400, not this mruby's 0300: compile it with this mruby's mrbc")
    case("truncated", good[:-9], r"the file is %d bytes, its header says %d" % (len(good) - 9, len(good)))
    # The top irep's record: its header, code and handlers, literals, then
    # its symbols, the first one's length made to run past the section.
    nregs, iseq = code(good)
    clen = struct.unpack(">H", good[42:44])[0]
    pos = ISEQ + len(iseq) + 13 * clen
    plen = struct.unpack(">H", good[pos:pos + 2])[0]
    pos += 2
    for _ in range(plen):
        tt = good[pos]
        pos += 1 + {0: 3 + struct.unpack(">H", good[pos + 1:pos + 3])[0], 1: 4, 3: 8, 5: 8}[tt]
    case("symbol", patched(pos + 2, struct.pack(">H", 0x7000)),
         r"IREP section, irep 0: symbol 0 runs past the end of the section \(at byte %d of the file\)"
         % (pos + 4))
    # DBG: the names of the files, then the top irep's line record: its
    # size, its count of files, the first one's start and file name index.
    dbg = at[b"DBG\0"] + 8
    names = struct.unpack(">H", good[dbg:dbg + 2])[0]
    rec = dbg + 2
    for _ in range(names):
        rec += 2 + struct.unpack(">H", good[rec:rec + 2])[0]
    case("file name", patched(rec + 10, struct.pack(">H", 7)),
         r"DBG section, irep 0: file name 7 of %d" % names)
    case("line table start", patched(rec + 6, b"\0\0\0\x09"),
         r"DBG section, irep 0: a file's line table starts at byte 9 of the code")
    # LVAR: the count of names, then each name's length and bytes: mruby's
    # loader read as many bytes as the length said.
    lvar = at[b"LVAR"] + 8
    case("local variable name", patched(lvar + 4, b"\xff\xff"),
         r"LVAR section: name 0 runs past the end of the section")
    case("section size", patched(at[b"LVAR"] + 4, b"\0\0\x10\0"),
         r"section LVAR of 4096 bytes does not fit in the file")
    case("nesting", nested(300), r"IREP section, irep 257: ireps nested more than 256 deep")
    return good, cases


def record(code, nregs, nlocals=1, strings=(), syms=(), reps=()):
    """An irep's record (then its children's): code is a list of
    (opcode name, operand bytes); a symbol None is the null symbol."""
    ops = opcodes()
    iseq = b"".join(bytes([ops[name][0]]) + bytes(operands) for name, operands in code)
    pool = b"".join(b"\0" + struct.pack(">H", len(t)) + t + b"\0" for t in strings)
    table = b"".join(b"\xff\xff" if t is None else struct.pack(">H", len(t)) + t + b"\0" for t in syms)
    body = (struct.pack(">HHHHI", nlocals, nregs, len(reps), 0, len(iseq)) + iseq +
            struct.pack(">H", len(strings)) + pool + struct.pack(">H", len(syms)) + table)
    return struct.pack(">I", 4 + len(body)) + body + b"".join(reps)


def rite(records):
    irep = b"IREP" + struct.pack(">I", 12 + len(records)) + b"0300" + records
    size = 20 + len(irep) + 8
    return b"RITE0300" + struct.pack(">I", size) + b"MATZ0000" + irep + b"END\0" + struct.pack(">I", 8)


def crafted(tmp_path):
    """(name, image, what the error log says) for images made by hand that
    mrbc never makes, each of which mruby 3.1's VM would run into memory it
    does not own."""
    cases = []
    # OP_EXEC clears a frame of nregs - 1 registers: with 0, all memory.
    child = record([("RETURN", [0])], nregs=0, nlocals=0)
    cases.append(("no registers", rite(record(
        [("LOADNIL", [1]), ("MODULE", [1, 0]), ("EXEC", [1, 0]), ("RETURN", [1])], nregs=3,
        syms=[b"M"], reps=[child])),
        r"irep 1: a frame of no registers"))
    # mruby's variable tables take symbol 0 for an empty slot.
    cases.append(("null symbol", rite(record(
        [("LOADI_1", [1]), ("SETGV", [1, 0]), ("RETURN", [1])], nregs=3, syms=[None])),
        r"OP_SETGV at byte 2: symbol 0 is the null symbol"))
    # 31 arguments are counted in 4 bits as 15, "packed in an Array", by
    # an OP_ENTER run again.
    cases.append(("31 arguments", rite(record(
        [("ENTER", [0x7c, 0, 0]), ("JMP", [0xff, 0xf9]), ("RETURN", [0])], nregs=34)),
        r"the jump at byte 4 goes to byte 0, not to the start of an instruction it may start at"))
    # A block called with its frame over the caller's locals would write its
    # own registers through its environment.
    cases.append(("call in a local", rite(record(
        [("LOADSELF", [1]), ("SEND", [1, 0, 0]), ("RETURN", [1])], nregs=4, nlocals=2, syms=[b"itself"])),
        r"OP_SEND at byte 2: calls a method in register 1, a local variable"))
    # At the top level OP_SETUPVAR writes the frame's own locals (once
    # OP_BLOCK gave the frame an environment): R1 is no String any more.
    block = record([("RETURN", [0])], nregs=2)
    cases.append(("upvar", rite(record(
        [("STRING", [1, 0]), ("BLOCK", [2, 0]), ("LOADI", [3, 5]), ("SETUPVAR", [3, 1, 0]),
         ("INTERN", [1]), ("RETURN", [1])], nregs=5, nlocals=2, strings=[b"s"], reps=[block])),
        r"OP_INTERN at byte 13: register 1 may not hold a String"))
    # In a block, the variable OP_SETUPVAR writes may be the block's own
    # R1, when an arithmetic instruction on a local of the block's home
    # called it (as a method made with define_method) with its frame there.
    inner = record([("STRING", [1, 0]), ("LOADI", [2, 5]), ("SETUPVAR", [2, 1, 0]), ("INTERN", [1]),
                    ("RETURN", [1])], nregs=4, strings=[b"s"])
    cases.append(("upvar in a block", rite(record(
        [("BLOCK", [2, 0]), ("RETURN", [2])], nregs=4, nlocals=2, reps=[inner])),
        r"irep 1: OP_INTERN at byte 10: register 1 may not hold a String"))
    return compile_rb(tmp_path, SCRIPT), cases


# The code's damage (verify.c), the framing's (rite.c, refused before
# mruby's loader reads the file) and code made by hand.
KINDS = {"code": damaged, "framing": damaged_framing, "crafted": crafted}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_damaged_bytecode_is_refused_and_the_worker_keeps_serving(server, tmp_path, kind):
    good, cases = KINDS[kind](tmp_path)
    server.write("htdocs/good-%s.mrb" % kind, bytes(good))
    assert server.get("/good-%s.mrb" % kind).body == b"hello!"
    for i, (name, image, why) in enumerate(cases):
        server.write("htdocs/bad-%s%d.mrb" % (kind, i), image)
        for _ in range(3):  # each VM that meets it refuses it
            r = server.get("/bad-%s%d.mrb" % (kind, i))
            assert r.status == 500, name
            assert b"hello" not in r.body, name
        server.wait_log(r"MRB00020: .*bad-%s%d\.mrb: invalid mruby bytecode: %s" % (kind, i, why))
        assert server.get("/good-%s.mrb" % kind).body == b"hello!", name
    server.check_log()  # no child crashed (or sanitizer report) on any of them


def test_a_repaired_file_is_served(server, tmp_path):
    good, cases = damaged(tmp_path)
    server.write("htdocs/repaired.mrb", cases[1][1])
    assert server.get("/repaired.mrb").status == 500
    server.write("htdocs/repaired.mrb", bytes(good))  # a new file: a new stamp
    assert server.get("/repaired.mrb").body == b"hello!"


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_damaged_bytecode_fails_configtest(make_httpd, mpm, tmp_path, kind):
    _, cases = KINDS[kind](tmp_path)
    srv = make_httpd("bytecode-config", mpm)
    name, image, why = cases[2]
    srv.write("scripts/bad.mrb", image)
    code_, out = srv.configtest("""
<Location /bad>
    SetHandler mruby-native-script
    mrubyHandler {root}/scripts/bad.mrb cache
</Location>
""")
    assert code_ != 0, out
    assert re.search(r"mrubyHandler: .*bad\.mrb: invalid mruby bytecode: %s" % why, out), out


def ruby_sources():
    """The project's Ruby, and mruby's own tests when its source is here
    (the source build fetches it)."""
    files = []
    for top, dirs, names in os.walk(ROOT):
        dirs[:] = sorted(d for d in dirs if d not in ("build", ".git", "__pycache__"))
        files += [os.path.join(top, n) for n in sorted(names) if n.endswith((".rb", ".mrb"))]
    files += sorted(glob.glob(os.path.join(ROOT, "build/mruby-src/mruby-*/test/t/*.rb")))
    files += sorted(glob.glob(os.path.join(ROOT, "build/mruby-src/mruby-*/mrbgems/*/test/*.rb")))
    sources = []
    for f in files:
        if os.path.isfile(f):
            with open(f, "rb") as fh:
                if fh.read(4) != b"RITE":
                    sources.append(f)
    return sources


def test_mrbc_output_always_passes(make_httpd, tmp_path):
    sources = ruby_sources()
    srv = make_httpd("bytecode-corpus", "event")
    locations = []
    compiled = 0
    for i, src in enumerate(sources):
        for debug in ([], ["-g"]):
            out = srv.path("scripts/%d%s.mrb" % (i, "g" if debug else ""))
            if subprocess.run(["mrbc"] + debug + ["-o", out, src], capture_output=True).returncode:
                continue  # mruby's tests of features this mrbc lacks
            compiled += 1
            locations.append("<Location /c%d%s>\n    SetHandler mruby-native-script\n"
                             "    mrubyHandler %s cache\n</Location>\n" % (i, "g" if debug else "", out))
    assert compiled >= 60, sources  # the project's own Ruby, with and without debug info
    code_, out = srv.configtest("".join(locations))
    assert code_ == 0 and "Syntax OK" in out, out


def frame64(n):
    return "; ".join("v%d = %d" % (i, i) for i in range(n))


# mrbc's code uses the register after a frame's last (here `def self.twice`
# makes its method there), and mruby makes the stack of a fiber exactly 64
# registers long for a frame of 64: a script that may sleep runs in a fiber
# of its own, and a script may make one (Fiber.new).
FRAMES_OF_64 = {
    "script": ("Apache::Async\n" + frame64(62) + "\ndef self.twice(x) x * 2 end\n", b""),
    "Fiber.new": ("f = Fiber.new do\n" + frame64(61) + "\n  def self.twice(x) x * 2 end\nend\n"
                  "Apache.rputs \"#{f.resume} #{twice(21)}\"\n", b"twice 42"),
}


@pytest.mark.parametrize("kind", sorted(FRAMES_OF_64))
def test_a_frame_of_64_registers_runs_in_a_fiber(server, kind):
    script, body = FRAMES_OF_64[kind]
    name = "htdocs/frame64-%s.mrb" % kind.replace(".", "")
    server.write(name, script)
    for _ in range(20):
        r = server.get(name[len("htdocs"):])
        assert (r.status, r.body) == (200, body)
    # Without room, the method is written one register past the fiber's
    # stack: a heap overflow, which AddressSanitizer (check-asan) reports.
    server.check_log()
