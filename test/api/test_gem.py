"""The Ruby half of the API (mrbgems/mruby-apache) under its own tests,
run with the system mruby: the gem's mrblib, then each test file."""

import glob
import os
import re
import shutil
import subprocess

import pytest

from httpd import ROOT

GEM = os.path.join(ROOT, "mrbgems", "mruby-apache")
MRUBY = shutil.which("mruby")


@pytest.mark.skipif(MRUBY is None, reason="needs the mruby binary (Debian package mruby)")
@pytest.mark.parametrize("test_file", sorted(glob.glob(os.path.join(GEM, "test", "*.rb"))),
                         ids=os.path.basename)
def test_gem(test_file, tmp_path):
    parts = [os.path.join(ROOT, "test", "mrbtest_shim.rb")]
    parts += sorted(glob.glob(os.path.join(GEM, "mrblib", "*.rb")))
    parts.append(test_file)
    script = tmp_path / "run.rb"
    script.write_text("".join(open(p).read() + "\n" for p in parts) + "mm_report\n")
    p = subprocess.run([MRUBY, str(script)], capture_output=True, text=True, timeout=60)
    summary = re.search(r"^(\d+) ok, (\d+) failed$", p.stdout, re.M)
    assert summary, p.stdout + p.stderr
    assert summary.group(2) == "0", p.stdout
    assert int(summary.group(1)) > 0
