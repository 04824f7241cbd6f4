"""The recipes' kit files (docs/recipes/NAME.t) run by tools/mod_mruby-test
as a user runs them, on the three MPMs: every block passes, the TAP and
JUnit output count them, and a recipe broken on purpose makes its kit
file fail. The recipes' pytest files (test_recipe_*.py) test more."""

import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

import pytest

from httpd import GC_STRESS, MODULE, MPMS, ROOT, TOOL_TIMEOUT, sanitizer_reports, tool_env

KIT = os.path.join(ROOT, "tools", "mod_mruby-test")
RECIPES = os.path.join(ROOT, "docs", "recipes")
FILES = sorted(os.path.basename(p) for p in glob.glob(os.path.join(RECIPES, "*.t")))


# (under a GC-stressed libmruby the recipes' own tests run on prefork)
pytestmark = pytest.mark.skipif(GC_STRESS, reason="three MPMs a file; the recipes' pytest files run instead")


def run_kit(path, *args):
    """The kit on path; the sanitizers' findings in its servers, if the
    suite runs under them, fail the test."""
    reports = tempfile.mkdtemp(prefix="mm-kit-sanitizer-")
    try:
        p = subprocess.run([sys.executable, KIT, "--module", MODULE, "--timeout", TOOL_TIMEOUT, path] + list(args),
                           capture_output=True, text=True, timeout=600, env=tool_env(reports))
        found = sanitizer_reports(reports)
        assert not found, "\n".join(found)[:4000]
    finally:
        shutil.rmtree(reports, ignore_errors=True)
    return p.returncode, p.stdout, p.stderr


def blocks(path):
    with open(path) as f:
        return re.findall(r"^=== (.+)$", f.read(), re.M)


def points(out):
    return re.findall(r"^(ok|not ok) \d+ - (\S+): (.*) \[(\w+)\]$", out, re.M)


def test_the_recipes_with_kit_files():
    assert len(FILES) >= 4
    for name in ("access-control.t", "rack-app.t"):
        assert name in FILES
    for f in FILES:
        assert os.path.isdir(os.path.join(RECIPES, f[:-2])), "%s: no recipe of that name" % f


@pytest.mark.parametrize("name", FILES)
def test_recipe_kit_file_passes(name, tmp_path):
    path = os.path.join(RECIPES, name)
    junit = tmp_path / "results.xml"
    status, out, err = run_kit(path, "--junit", str(junit))
    assert status == 0, out + err
    names = blocks(path)
    assert len(names) >= 3
    found = points(out)
    expected = [(b, m) for m in MPMS for b in names + ["server starts, stops, no crash"]]
    assert sorted((t, m) for _, _, t, m in found) == sorted(expected), out
    assert all(ok == "ok" for ok, _, _, _ in found), out
    assert re.search(r"^1\.\.%d$" % len(expected), out, re.M)
    assert "# %d passed, 0 failed" % len(expected) in out
    suites = ET.parse(junit).getroot()
    assert sum(int(s.get("tests")) for s in suites) == len(expected)
    assert all(s.get("failures") == "0" for s in suites)


def test_a_broken_recipe_fails_its_kit_file(tmp_path):
    """access_control.rb with /intranet/ left unprotected: the kit file
    says which block fails and why, the others still pass."""
    shutil.copy(os.path.join(RECIPES, "access-control.t"), tmp_path)
    shutil.copytree(os.path.join(RECIPES, "access-control"), tmp_path / "access-control")
    script = tmp_path / "access-control" / "access_control.rb"
    text = script.read_text()
    assert '"/intranet/" =>' in text
    script.write_text(text.replace('"/intranet/" =>', '"/elsewhere/" =>'))
    status, out, err = run_kit(str(tmp_path / "access-control.t"), "--mpm", "event")
    assert status == 1, out + err
    results = {t: ok for ok, _, t, _ in points(out)}
    assert results["the intranet from elsewhere is refused, and logged"] == "not ok"
    assert results["open paths are open to everyone"] == "ok"
    assert results["scanners are refused everywhere, by User-Agent"] == "ok"
    assert "status: expected 403, got 200" in out
    assert re.search(r"error log: no line matches /MRB00400: .*172", out)
    assert "# 5 passed, 1 failed" in out


def test_the_tutorial(tmp_path):
    """docs/testing-your-scripts.md's first test, as its reader makes it:
    auth.rb and auth.t from the page pass; the script broken as the page
    says fails the second block, with the status and the body's diff."""
    from recipes import fenced_blocks
    with open(os.path.join(ROOT, "docs", "testing-your-scripts.md")) as f:
        code = fenced_blocks(f.read())
    script = [text for lang, text in code if lang == "ruby"][0]
    test = [text for lang, text in code if lang == "" and "=== " in text][0]
    assert script.startswith("# auth.rb") and '"Bearer s3cret"' in script
    (tmp_path / "auth.rb").write_text(script)
    (tmp_path / "auth.t").write_text(test)
    status, out, err = run_kit(str(tmp_path / "auth.t"))
    assert status == 0, out + err
    assert "# 9 passed, 0 failed" in out
    (tmp_path / "auth.rb").write_text(script.replace('"Bearer s3cret"', '"Bearer s3cre"'))
    status, out, err = run_kit(str(tmp_path / "auth.t"), "--mpm", "prefork")
    assert status == 1, out + err
    assert re.search(r"^not ok 2 - \S+auth\.t: with the token, the page \[prefork\]$", out, re.M), out
    assert re.search(r"request 1 \(\S+auth\.t:25\): status: expected 200, got 403", out), out
    assert "-the page\n" in out.replace("#   ", "")
    assert "# 2 passed, 1 failed" in out
