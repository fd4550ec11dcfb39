"""Every ``OCIBRIDGE_*`` variable is named in core/environment.py only, each is documented, and
every cache of ocibridge lives under the one cache root it resolves."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from support.pysource import docstring_ids

from ocibridge.core import environment

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "ocibridge"
HOME = PACKAGE / "core" / "environment.py"


def test_variables_are_named_in_one_module_only():
    outside = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == HOME:
            continue
        tree = ast.parse(path.read_text())
        docs = docstring_ids(tree)
        outside += [f"{path.relative_to(ROOT)}:{node.lineno}" for node in ast.walk(tree)
                    if isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and "OCIBRIDGE_" in node.value and id(node) not in docs]
    assert not outside, f"OCIBRIDGE_ strings outside {HOME.relative_to(ROOT)}: {outside}"


def test_every_variable_is_listed_and_documented():
    named = {v for k, v in vars(environment).items() if k.isupper() and isinstance(v, str)}
    listed = {v.name for v in environment.VARIABLES}
    assert named == listed
    docs = "\n".join(p.read_text() for p in (ROOT / "docs").rglob("*.md"))
    assert [name for name in sorted(listed) if name not in docs] == []


@pytest.mark.parametrize("env, expected", [
    ({"OCIBRIDGE_CACHE": "/c"}, "/c"),
    ({"OCIBRIDGE_CACHE_DIR": "/old"}, "/old"),  # the deprecated spelling still works
    ({"OCIBRIDGE_CACHE": "/c", "OCIBRIDGE_CACHE_DIR": "/old"}, "/c"),
    ({"XDG_CACHE_HOME": "/x"}, "/x/ocibridge"),
    ({"HOME": "/h"}, "/h/.cache/ocibridge"),
])
def test_one_cache_root_for_every_cache(monkeypatch, env, expected):
    for name in ("OCIBRIDGE_CACHE", "OCIBRIDGE_CACHE_DIR", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    from ocibridge.cache.records import model_cache_root
    from ocibridge.kinds.carton.links import default_cache_dir
    from ocibridge.model.digestcache import cache_dir
    from ocibridge.stores.registry.uploadstate import uploads_dir
    from ocibridge.transfer.pullcache import cache_root

    root = Path(expected)
    assert environment.cache_root() == root == cache_root() == cache_dir()
    assert (model_cache_root(), uploads_dir(), default_cache_dir()) == (
        root / "models", root / "uploads", root / "carton-links")
