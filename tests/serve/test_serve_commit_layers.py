"""serve's commits are built from the facts the uploads proved (issue 60): no module of serve
reaches push's digest or chunk caches (a side channel), and none calls the public ``push`` (a
commit re-entering the API through the file system). Read from the modules' text, as
test_import_layers.py reads every import (lazy ones and module names given as strings too)."""

from __future__ import annotations

import ast

import pytest

from tests.code.test_import_layers import MODULES, graph

SIDE_CHANNELS = ("ocibridge.model.digestcache", "ocibridge.chunks.chunkcache")
#: where the public push lives: the façade's ``push`` is this module's
PUSH_HOMES = ("ocibridge.api.model_ops",)


def serve_modules() -> list[str]:
    return sorted(m for m in MODULES if m == "ocibridge.hubserver" or m.startswith("ocibridge.hubserver.")
                  or m == "ocibridge.api.serve")


def test_serve_is_found():
    found = serve_modules()
    assert "ocibridge.api.serve" in found and len(found) > 30  # the checks below cover every module of serve


@pytest.mark.parametrize("module", serve_modules())
def test_serve_uses_no_digest_or_chunk_cache(module):
    used = [f"{target} (line {line})" for target, line in graph()[module].items() if target in SIDE_CHANNELS]
    assert not used, f"{module} reaches push's caches: {', '.join(used)}"


def _push_calls(tree: ast.AST) -> list[int]:
    """Lines that call something named ``push`` (``push(...)``, ``ocibridge.push(...)``)."""
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Call) and (
        isinstance(node.func, ast.Name) and node.func.id == "push"
        or isinstance(node.func, ast.Attribute) and node.func.attr == "push")]


@pytest.mark.parametrize("module", serve_modules())
def test_serve_does_not_call_push(module):
    tree = ast.parse(MODULES[module].read_text(), str(MODULES[module]))
    imported = [f"{target} (line {line})" for target, line in graph()[module].items() if target in PUSH_HOMES]
    assert not imported and not _push_calls(tree), \
        f"{module} calls the public push: {imported} {_push_calls(tree)}"


def test_the_push_check_sees_a_call():
    assert _push_calls(ast.parse("import ocibridge\nocibridge.push('d', 'r')\n")) == [2]
    assert _push_calls(ast.parse("from ocibridge.api.model_ops import push\n\n\npush('d')\n")) == [4]
    assert _push_calls(ast.parse("copy(a, b)\n")) == []
