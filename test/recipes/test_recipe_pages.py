"""The recipe pages show the files the recipe tests run: each file of
docs/recipes/NAME/ appears whole in a code block of docs/recipes/NAME.md,
the page says which modules to enable and which test runs it, and the
index lists every recipe."""

import glob
import os

import pytest

from httpd import TEST_DIR
from recipes import RECIPES_DIR, ROOT, Recipe, names, read


@pytest.mark.parametrize("name", names())
def test_page_shows_every_file(name):
    recipe = Recipe(name)
    blocks = recipe.code_blocks()
    for f, text in recipe.files.items():
        assert text in blocks, "%s.md does not show %s as it is" % (name, f)
        assert "`%s`" % f in recipe.page


@pytest.mark.parametrize("name", names())
def test_page_says_how_to_install(name):
    recipe = Recipe(name)
    lines = recipe.page.splitlines()
    assert any(line.startswith("a2enmod mruby") for line in lines)
    assert "a2enconf " + recipe.conf[:-len(".conf")] in lines
    for f in recipe.scripts:
        assert any(line.startswith("cp ") and f in line.split() for line in lines), f


@pytest.mark.parametrize("name", names())
def test_page_names_its_test(name):
    found = glob.glob(os.path.join(TEST_DIR, "**", "test_recipe_%s.py" % name.replace("-", "_")),
                      recursive=True)
    assert len(found) == 1, found
    test = os.path.relpath(found[0], ROOT)
    assert "(../../%s)" % test in Recipe(name).page


def test_index_lists_every_recipe():
    index = read(os.path.join(RECIPES_DIR, "README.md"))
    for name in names():
        assert "(%s.md)" % name in index
