"""No capability is looked up by an attribute's name: what only some objects can do is a
``runtime_checkable`` Protocol tested with ``isinstance`` (docs/architecture-stores.md). This scans
every module for ``getattr(x, "name", default)`` and ``hasattr(x, "name")``."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "ocibridge"

#: (module, attribute) pairs that read an attribute by name without asking what an object can do.
ALLOWED = {
    # OSError.strerror is None for some errors (raised without errno): a message, not a capability
    ("kinds/buildfile.py", "strerror"),
    ("stores/registry/pull_secret.py", "strerror"),
    # a threading.local's attribute is absent in a thread that never set it: per-thread state
    ("core/interrupt.py", "socket"),
}


def probes(path: Path) -> list[tuple[int, str, str]]:
    """(line, function, attribute) of each getattr-with-default / hasattr by a literal name."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            continue
        name, args = node.func.id, node.args
        literal = len(args) >= 2 and isinstance(args[1], ast.Constant) and isinstance(args[1].value, str)
        if literal and ((name == "getattr" and len(args) == 3) or name == "hasattr"):
            found.append((node.lineno, name, args[1].value))  # type: ignore[union-attr]
    return found


def test_no_capability_probes_by_attribute_name() -> None:
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        bad += [f"{module}:{line}: {fn}(..., {attr!r})" for line, fn, attr in probes(path)
                if (module, attr) not in ALLOWED]
    assert not bad, "capability probes by attribute name (use a runtime_checkable Protocol):\n" + "\n".join(bad)


def test_the_scan_sees_a_probe(tmp_path: Path) -> None:
    sample = tmp_path / "m.py"
    sample.write_text('a = getattr(s, "close", None)\nb = hasattr(s, "stats")\nc = getattr(s, "x")\n'
                      'd = getattr(s, f"set_{n}", None)\n')
    assert probes(sample) == [(1, "getattr", "close"), (2, "hasattr", "stats")]


def test_every_allowed_use_still_exists() -> None:
    """An allow-list entry whose use is gone is removed, so the list cannot hide a new probe."""
    seen = {(path.relative_to(PACKAGE).as_posix(), attr)
            for path in PACKAGE.rglob("*.py") for _, _, attr in probes(path)}
    assert seen >= ALLOWED, ALLOWED - seen


def test_the_capabilities_that_replaced_probes_hold_for_the_stores(tmp_path: Path) -> None:
    """A registry repository counts its uploads, names where it lives, reads a manifest in one
    request and closes; a layout does none of the first three (so push reports no wire counts
    and a warm ``path`` has no origin for it)."""
    from ocibridge.api.copy import wire_counts
    from ocibridge.stores.base import Closable, CountsUploads, ReadsByReference, RegistryRepository
    from ocibridge.stores.layout import LayoutStore
    from ocibridge.stores.registry import open_repository

    with open_repository(host="127.0.0.1:9", repository="a/b") as registry:
        for capability in (CountsUploads, RegistryRepository, ReadsByReference, Closable):
            assert isinstance(registry, capability), capability
        assert wire_counts(registry) == {"bytesSent": 0, "bytesResumed": 0}
    with LayoutStore(tmp_path / "layout", create=True) as layout:
        assert not isinstance(layout, (CountsUploads, RegistryRepository, ReadsByReference))
        assert wire_counts(layout) == {}


def module_table_writes(path: Path) -> list[int]:
    """Lines that put a module into ``sys.modules`` or take one out (a placeholder)."""
    def is_table(node: ast.AST) -> bool:
        return ast.unparse(node) == "sys.modules"

    lines = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, (ast.Store, ast.Del)) and is_table(node.value):
            lines.append(node.lineno)
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and is_table(node.func.value)
                and node.func.attr in {"__setitem__", "__delitem__", "setdefault", "update", "pop", "popitem"}):
            lines.append(node.lineno)
    return lines


def test_nothing_is_written_into_sys_modules(tmp_path: Path) -> None:
    bad = [f"{path.relative_to(PACKAGE)}:{line}" for path in sorted(PACKAGE.rglob("*.py"))
           for line in module_table_writes(path)]
    assert not bad, f"assignments into sys.modules: {bad}"
    sample = tmp_path / "m.py"
    sample.write_text("import sys\nsys.modules['a'] = 1\ndel sys.modules['a']\nsys.modules.setdefault('b', 2)\n"
                      "x = sys.modules['c']\n")
    assert module_table_writes(sample) == [2, 3, 4]
