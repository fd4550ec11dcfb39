"""The distribution spec's error codes are named once (stores/registry/errcodes.py): no other
module of the package spells one as a string, and an error body is read in one place."""

from __future__ import annotations

import ast
from pathlib import Path

import httpx

from ocibridge.stores.registry import errcodes

PACKAGE = Path(__file__).resolve().parents[2] / "ocibridge"
TABLE = PACKAGE / "stores" / "registry" / "errcodes.py"


def _code_literals(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    return [f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {node.value}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and node.value in errcodes.SPEC_CODES]


def test_no_registry_error_code_is_spelled_outside_the_table():
    found = [hit for path in sorted(PACKAGE.rglob("*.py")) if path != TABLE for hit in _code_literals(path)]
    assert not found, "registry error codes spelled outside stores/registry/errcodes.py:\n" + "\n".join(found)


def test_the_table_names_the_spec_codes_and_reads_a_body_once():
    assert {"BLOB_UNKNOWN", "MANIFEST_UNKNOWN", "NAME_UNKNOWN", "DENIED", "UNAUTHORIZED",
            "TOOMANYREQUESTS", "UNSUPPORTED"} <= errcodes.SPEC_CODES
    body = b'{"errors": [{"code": "NAME_UNKNOWN", "message": "repository name not known"}]}'
    answer = httpx.Response(404, content=body)
    assert errcodes.code_of(answer) == (errcodes.NAME_UNKNOWN, "repository name not known")
    assert errcodes.code_of(httpx.Response(401)) == (errcodes.UNAUTHORIZED, "authentication required")
    assert errcodes.code_of(httpx.Response(502, content=b"<html>bad gateway</html>")) == (
        None, "<html>bad gateway</html>")
