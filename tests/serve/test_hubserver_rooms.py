"""The rooms of serve (docs/architecture-serve.md, "The rooms of serve"): the Hub repository (``hubserver/repo/``)
is a domain with no HTTP in it, and the protocol folders (``reading/``, ``writeroutes/``, ``lfs/``, ``xet/``,
``uploads/``, ``web/``, ``replicas/``, ``upstream/``) meet in it, never in each other's routes.

Every import counts, wherever it is written: at the top, inside a function, under ``TYPE_CHECKING``.
The modules are read as text (their AST), never imported.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

HUBSERVER = Path(__file__).resolve().parents[2] / "ocibridge" / "hubserver"
REPO = HUBSERVER / "repo"
#: what a module of the Hub repository may never import: the web server and the ASGI toolkit
HTTP = ("starlette", "uvicorn")


def module_of(path: Path) -> str:
    return ".".join(path.relative_to(HUBSERVER.parent.parent).with_suffix("").parts)


def imports(path: Path) -> Iterator[tuple[str, str | None]]:
    """(module, name imported from it or None) for every import of ``path``, lazy ones included."""
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, None
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module_of(path).rsplit(".", 1)[0]
                base = ".".join([*package.split(".")[: len(package.split(".")) - node.level + 1], base]).rstrip(".")
            for alias in node.names:
                yield base, alias.name


def folder_of(module: str) -> str | None:
    """The sub-room of serve a module stands in (``repo``, ``writeroutes``, ...); None for the shell's own
    modules at the top of ``hubserver/`` (app.py, server.py: they wire every room)."""
    parts = module.split(".")
    return parts[2] if len(parts) > 3 and parts[:2] == ["ocibridge", "hubserver"] else None


def route_classes() -> dict[str, set[str]]:
    """module -> its route classes: a class with a method answering a request (its return annotation
    names a Response)."""
    found: dict[str, set[str]] = {}
    for path in HUBSERVER.rglob("*.py"):
        for node in ast.parse(path.read_text(), str(path)).body:
            if isinstance(node, ast.ClassDef) and any(
                    isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.returns is not None
                    and "Response" in ast.unparse(item.returns) for item in node.body):
                found.setdefault(module_of(path), set()).add(node.name)
    return found


def test_the_hub_repository_has_no_http_and_stands_below_every_route():
    files = sorted(REPO.rglob("*.py"))
    assert len(files) > 10
    wrong = []
    for path in files:
        for module, name in imports(path):
            # ``from ocibridge.hubserver.repo import commits`` takes a module of repo/ (its package's name alone is not)
            taken = f"{module}.{name}" if name is not None and module == "ocibridge.hubserver.repo" else module
            if module.split(".")[0] in HTTP:
                wrong.append(f"{path.name} imports {module}")
            elif module.startswith("ocibridge.hubserver") and folder_of(taken) != "repo":
                wrong.append(f"{path.name} imports {module} (outside hubserver/repo/)")
    assert not wrong, wrong


def test_the_scan_sees_route_classes_and_lazy_imports(tmp_path):
    routes = route_classes()
    assert "CommitRoutes" in routes["ocibridge.hubserver.writeroutes.commit"]
    assert "ReadRoutes" in routes["ocibridge.hubserver.reading.routes"]
    lazy = tmp_path / "lazy.py"
    lazy.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from starlette.requests import Request\n"
                    "def f():\n    from ocibridge.hubserver.writeroutes.commit import CommitRoutes\n")
    found = set(imports(lazy))
    assert found >= {("starlette.requests", "Request"), ("ocibridge.hubserver.writeroutes.commit", "CommitRoutes")}


def test_no_room_of_serve_imports_another_rooms_route_classes():
    routes = route_classes()
    wrong = []
    for path in sorted(HUBSERVER.rglob("*.py")):
        here = folder_of(module_of(path))
        if here is None:
            continue  # the shell (app.py, server.py, failures.py, ...) wires the routes of every room
        for module, name in imports(path):
            there = folder_of(module)
            if there is None or there == here:
                continue
            taken = routes.get(module, set()) if name is None else routes.get(module, set()) & {name}
            if name is not None and f"{module}.{name}" in routes:  # a module of route classes taken whole
                taken = routes[f"{module}.{name}"]
            if taken:
                wrong.append(f"{module_of(path)} imports {module}'s {sorted(taken)}")
    assert not wrong, wrong


#: what does a write's work, which a route of ``writeroutes/`` leaves to ``repo/``: the registry written
#: (a manifest, a tag, a blob), a commit landed, the refs record written or locked
WORK = ("ocibridge.transfer", "ocibridge.hubserver.repo.landing", "ocibridge.hubserver.repo.publishing.publish")
RECORD_WRITES = {"write_record", "record_store", "RECORD_LOCK"}


def test_the_write_routes_leave_the_work_to_the_hub_repository():
    """A route of ``writeroutes/`` reads the request, calls ``repo/`` and answers: it neither writes the
    registry nor the refs record, nor takes a branch's lock (``repo/repos.py``'s ``branches``)."""
    files = sorted((HUBSERVER / "writeroutes").rglob("*.py"))
    assert len(files) > 5
    wrong = []
    for path in files:
        for module, name in imports(path):
            full = f"{module}.{name}" if name is not None else module
            if any(full == w or full.startswith(f"{w}.") for w in WORK):
                wrong.append(f"{path.name} imports {full}")
            elif module == "ocibridge.hubserver.repo.refsrecord" and name in RECORD_WRITES:
                wrong.append(f"{path.name} imports {name} of refsrecord")
        tree = ast.parse(path.read_text(), str(path))
        wrong += [f"{path.name}:{node.lineno} takes a branch lock" for node in ast.walk(tree)
                  if isinstance(node, ast.Attribute) and node.attr == "branches"]
    assert not wrong, wrong
