"""The package's import structure: layers that only look down, peers that never meet, no cycle.

    core <- oci <- stores <- transfer <- layers, chunks <- lazyread, model, cache <- places <- kinds <- signing
        <- scanning, k8s | mirror | serve <- api <- cli

Every package has one layer, and no module of it another (no exception: the test below says so).

Every import of every module counts, wherever it is written: at the top, inside a function
(a lazy import hides a cycle from Python, not from this test), under ``TYPE_CHECKING``, and by
name through :mod:`ocibridge.core.lazyimport` or ``importlib.import_module`` (a string naming a module).
The modules are read as text (their AST), never imported.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "ocibridge"

#: Layer of each module, by the longest matching prefix. An import may go to its own layer or
#: below, never above.
LAYERS: dict[str, int] = {
    # 0: the private core and what the package says of itself
    "ocibridge.core": 0, "ocibridge.errors": 0, "ocibridge.version": 0,
    # 1: OCI models: media types, digests, descriptors, manifests, references
    "ocibridge.oci": 1,
    # 2: places of content
    "ocibridge.stores": 2,
    # 3: moving content between places: the one copy, progress, the pull cache
    "ocibridge.transfer": 3,
    # 4: layer bytes: reading, packing, applying
    "ocibridge.layers": 4,
    # 4: chunk tables: their format, made, checked, trusted, bound, kept, and delta downloads by them
    "ocibridge.chunks": 4,
    # 5: lazy, verified reads of a registry model's files, over the chunk tables (docs/lazy.md)
    "ocibridge.lazyread": 5,
    # 5: the neutral model package and the ModelPack artifact it builds
    "ocibridge.model": 5,
    # 5: the shared model cache (ocibridge path): blobs once, snapshots of links, from model's writer
    "ocibridge.cache": 5,
    # 6: places: where a text points (the typed locators) and how the place it names is opened; the kinds
    # tell it their schemes, grammars and openers at import (places/kinds.py), so it imports no kind
    "ocibridge.places": 6,
    # 7: every kind of model, one package each, behind one door
    "ocibridge.kinds": 7,
    # 8: signatures: made, verified before use, carried by copies (a hook the copy is given)
    "ocibridge.signing": 8,
    # 9: scanning a model's files by content, its reports as signed evidence, and the judge of the
    # clean-scan policy requirement, which the callers of the signing layer's policy evaluation hand it
    # (docs/scanning.md): above signing, beside the peers that hand it on
    "ocibridge.scanning": 9,
    # 9: peers on top of the kinds and signatures, which never import each other
    "ocibridge.k8s": 9, "ocibridge.mirror": 9, "ocibridge.hubserver": 9, "ocibridge.lazymount": 9,
    # 9: warm starts' compile caches: keyed, packed, kept beside the model, unpacked as untrusted input
    "ocibridge.warm": 9,
    # 10: the Python API
    "ocibridge.api": 10,
    # 11: the command line, its entry points, and the package's lazy façade (which names everything)
    "ocibridge.cli": 11, "ocibridge.__main__": 11, "ocibridge": 11,
    # 11: engines fed from a registry (vLLM's model-loader plugin), over the API; reached by entry point only
    "ocibridge.engines": 11,
}

#: Packages of layer 9 are peers: none imports another.
PEERS = ("ocibridge.k8s", "ocibridge.mirror", "ocibridge.hubserver", "ocibridge.lazymount")

#: Import cycles allowed: none (issue 15 removed the last, the CLI's flag helpers, now in
#: cli_common). Kept as an empty list so a future entry has to be argued for in review.
KNOWN_CYCLES: list[frozenset[str]] = []


def module_files() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = module_files()


def _owner(name: str) -> str | None:
    """The module ``name`` is, or is an attribute of."""
    while name not in MODULES:
        if "." not in name:
            return None
        name = name.rsplit(".", 1)[0]
    return name


def _imports(module: str, path: Path) -> Iterator[tuple[str, int]]:
    """(imported module, line) for every import the module's text makes."""
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    docstrings = {id(node.value) for node in ast.walk(tree)
                  if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            for alias in node.names:
                name = f"{prefix}.{alias.name}"
                yield (name if name in MODULES else prefix), node.lineno
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and id(node) not in docstrings:
            named = node.value.partition(":")[0]  # "module" or "module:Class", as entry points write it
            if named in MODULES and named != "ocibridge":
                yield named, node.lineno  # a module named to be imported later (lazy, a table)


def import_graph() -> dict[str, dict[str, int]]:
    graph: dict[str, dict[str, int]] = {}
    for module, path in MODULES.items():
        edges: dict[str, int] = {}
        for name, line in _imports(module, path):
            if not name.startswith("ocibridge"):
                continue
            owner = _owner(name)
            if owner is not None and owner != module:
                edges.setdefault(owner, line)
        graph[module] = edges
    return graph


def layer_of(module: str) -> int:
    best = max((prefix for prefix in LAYERS if module == prefix or module.startswith(prefix + ".")),
               key=len, default=None)
    if best is None:
        raise AssertionError(f"{module} has no layer: add it to LAYERS in {__file__}")
    return LAYERS[best]


def cycles(graph: dict[str, dict[str, int]]) -> list[frozenset[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


@functools.cache
def graph() -> dict[str, dict[str, int]]:
    """:func:`import_graph`, read once a process when a test first asks: made at collection (every
    module's text parsed), each worker made it, the ones that run none of these tests too."""
    return import_graph()


def test_the_graph_sees_lazy_imports():
    """The reader finds imports written inside functions and module names given as strings,
    so the checks below cover them."""
    assert "ocibridge.api.model_ops" in graph()["ocibridge.cli.transfer"]  # cli imports the API lazily
    assert "ocibridge.api.store_ops" in graph()["ocibridge.cli.store"]  # LazyModule("ocibridge.api.store_ops")
    assert "ocibridge.kinds.kitops.family" in graph()["ocibridge.kinds.table"]  # a line of the table of kinds


def test_no_module_sits_outside_its_package_layer():
    """No allowlist: a module takes its package's layer, so an arrow up cannot hide behind an entry
    (``ocibridge.mirror.__main__`` once had layer 9 of its own, to import the CLI: issue 60)."""
    inner = [p for p in LAYERS if any(p.startswith(q + ".") for q in LAYERS if q != "ocibridge")]
    assert inner == [], f"modules given a layer apart from their package: {inner}"


def test_every_module_has_a_layer():
    for module in MODULES:
        layer_of(module)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_only_look_down(module):
    mine = layer_of(module)
    upward = [f"{target} (layer {layer_of(target)}, line {line})"
              for target, line in graph()[module].items() if layer_of(target) > mine]
    assert not upward, f"{module} (layer {mine}) imports from above: {', '.join(upward)}"


def test_no_import_cycle():
    found = cycles(graph())
    new = [sorted(c) for c in found if c not in KNOWN_CYCLES]
    assert not new, f"import cycles: {new}"


def test_known_cycles_are_still_there():
    """An entry of KNOWN_CYCLES whose cycle is gone must leave the list (it only shrinks)."""
    found = cycles(graph())
    stale = [sorted(c) for c in KNOWN_CYCLES if c not in found]
    assert not stale, f"no longer cycles, remove from KNOWN_CYCLES: {stale}"


def test_the_cycle_finder_finds_a_cycle():
    graph = {"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}
    assert cycles(graph) == [frozenset({"a", "b", "c"})]


def _peer_of(module: str) -> str | None:
    return next((p for p in PEERS if module == p or module.startswith(p + ".")), None)


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _peer_of(m) and layer_of(m) == 9))
def test_peers_do_not_import_each_other(module):
    mine = _peer_of(module)
    across = [f"{target} (line {line})" for target, line in graph()[module].items()
              if _peer_of(target) not in (None, mine) and layer_of(target) == 9]
    assert not across, f"{module} imports a peer package: {', '.join(across)}"


#: What the command line may import (issue 51, one door): the public API (the façade and
#: ``ocibridge.api``), the errors, the version and the terminal helpers; everything else is
#: reached through the API, so a command is one API call plus parsing and printing.
CLI_MAY_IMPORT = (
    "ocibridge", "ocibridge.api", "ocibridge.cli", "ocibridge.errors", "ocibridge.version",
    "ocibridge.core.terminal", "ocibridge.core.termwidth", "ocibridge.core.lazyimport", "ocibridge.core.interrupt",
    "ocibridge.core.notices", "ocibridge.core.httpx_defer", "ocibridge.transfer.progress_modes",
)


def _cli_may_import(target: str) -> bool:
    return any(target == allowed or (allowed != "ocibridge" and target.startswith(allowed + "."))
               for allowed in CLI_MAY_IMPORT)


def _cli_modules() -> list[str]:
    return sorted(m for m in MODULES if m == "ocibridge.cli" or m.startswith("ocibridge.cli."))


@pytest.mark.parametrize("module", _cli_modules())
def test_the_cli_imports_only_the_public_api(module):
    outside = [f"{target} (line {line})" for target, line in graph()[module].items() if not _cli_may_import(target)]
    assert not outside, f"{module} imports below the public API: {', '.join(outside)}"


def test_the_cli_rule_refuses_the_layers_below_the_api():
    """The rule itself: signing, kinds, k8s, mirror, serve and stores are out; the API is in."""
    for below in ("ocibridge.signing.sign", "ocibridge.places.locate", "ocibridge.kinds.dispatch",
                  "ocibridge.k8s.volume", "ocibridge.mirror.job",
                  "ocibridge.hubserver.app", "ocibridge.stores.base", "ocibridge.core.environment"):
        assert not _cli_may_import(below), below
    for public in ("ocibridge", "ocibridge.api.model_ops", "ocibridge.errors", "ocibridge.core.terminal"):
        assert _cli_may_import(public), public
