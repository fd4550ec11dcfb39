"""The httpx/httpcore private parts ocibridge relies on are still there, used in one module only,
and importing ocibridge plants nothing in ``sys.modules``."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import httpcore
import httpx

from ocibridge.core import httpx_wall

PACKAGE = Path(__file__).resolve().parents[2] / "ocibridge"
WALL = PACKAGE / "core" / "httpx_wall.py"


def test_the_private_names_relied_on_exist():
    transport = httpx.HTTPTransport()
    try:
        for owner, names in httpx_wall.relied_on().items():
            instance = {httpx.HTTPTransport: transport, httpcore.ConnectionPool: transport._pool,
                        httpx.Response: httpx.Response(200, content=b"x")}[owner]
            for name in names:
                assert hasattr(instance, name), f"{owner.__name__}.{name} is gone: see {WALL.name}"
    finally:
        transport.close()


def test_the_wall_works_on_this_httpx():
    backend = httpcore.SyncBackend()
    transport = httpx.HTTPTransport()
    httpx_wall.use_backend(transport, backend)
    assert transport._pool._network_backend is backend
    pool = httpcore.ConnectionPool()
    assert httpx_wall.transport_over(pool)._pool is pool
    response = httpx.Response(200, stream=httpx.ByteStream(b"unread"))
    httpx_wall.keep_body(response, b'{"a": 1}')
    assert response.json() == {"a": 1}


def _private_attributes(path: Path) -> list[str]:
    """``x._name`` reads and writes in ``path`` whose owner is an httpx or httpcore object by name."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and node.attr in {"_pool", "_network_backend", "_content"}:
            found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} .{node.attr}")
        if isinstance(node, ast.Attribute) and node.attr == "__new__" and "httpx" in ast.unparse(node.value):
            found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} __new__")
    return found


def test_private_parts_are_touched_behind_the_wall_only():
    outside = [hit for path in PACKAGE.rglob("*.py") if path != WALL for hit in _private_attributes(path)]
    assert not outside, f"httpx/httpcore private parts used outside {WALL.name}: {outside}"
    assert _private_attributes(WALL), "the scan finds nothing: it no longer sees the wall's own uses"


def test_importing_ocibridge_plants_nothing_in_sys_modules():
    code = ("import sys; before = set(sys.modules); import ocibridge.api.model_ops, ocibridge.stores.registry; "
            "import httpx; assert type(sys.modules['httpx._main']).__name__ != '_Placeholder' "
            "if 'httpx._main' in sys.modules else True; print('ok')")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr

