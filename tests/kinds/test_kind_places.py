"""A kind's own place (``ollama:``, ``hf:``) answers through the protocol places define
(``ocibridge.places.locators.KindPlace``): no module outside its kind tests its type (issue 60).
The modules are read as text (their AST), as tests/code/test_no_probes.py reads them."""

from __future__ import annotations

import ast
from pathlib import Path

import ocibridge.kinds  # noqa: F401  (the kinds tell places their schemes and openers)
from ocibridge.kinds.hf.locator import HubReference, parse_hub_reference
from ocibridge.oci.reference import OllamaReference, RegistryReference, parse_ollama_reference
from ocibridge.places.locate import Role, locate
from ocibridge.places.locators import KindPlace, is_store, on_registry, on_this_machine, registry_of

PACKAGE = Path(__file__).resolve().parents[2] / "ocibridge"

#: each kind-specific reference, and the modules of its own kind (where it is defined and read)
OWNERS = {
    "OllamaReference": ("ocibridge/kinds/ollama/", "ocibridge/oci/reference.py"),
    "HubReference": ("ocibridge/kinds/hf/",),
}


def _names(node: ast.expr) -> list[str]:
    """The class names an isinstance's second argument gives (a name, an attribute, a tuple)."""
    if isinstance(node, ast.Tuple):
        return [n for element in node.elts for n in _names(element)]
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        return [node.attr]
    return []


def kind_type_tests(source: str) -> list[tuple[str, int]]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance" \
                and len(node.args) == 2:
            found += [(name, node.lineno) for name in _names(node.args[1]) if name in OWNERS]
    return found


def test_no_module_outside_a_kind_tests_its_reference_type():
    outside = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE.parent).as_posix()
        for name, line in kind_type_tests(path.read_text()):
            if not relative.startswith(OWNERS[name]):
                outside.append(f"{relative}:{line} isinstance(..., {name})")
    assert outside == [], "ask the KindPlace protocol instead: " + ", ".join(outside)


def test_the_scan_finds_a_type_test():
    assert kind_type_tests("isinstance(x, (LayoutReference, refs.OllamaReference))") == [("OllamaReference", 1)]
    assert kind_type_tests("isinstance(x, HubReference)") == [("HubReference", 1)]
    assert kind_type_tests("isinstance(x, KindPlace)") == []


def test_both_kinds_references_are_kind_places():
    local, remote = parse_ollama_reference("ollama:llama3:8b"), parse_ollama_reference("ollama://reg.io/ns/m:1")
    hub, hub_remote = parse_hub_reference("hf:org/name"), parse_hub_reference("hf://org/name@v1")
    for place in (local, remote, hub, hub_remote):
        assert isinstance(place, KindPlace)
    assert (local.kind, hub.kind) == ("ollama", "hf")
    assert is_store(local) and is_store(remote) and not is_store(hub)
    assert on_this_machine(local) and not on_this_machine(remote) and not on_this_machine(hub)
    assert not on_registry(local) and on_registry(remote) and not on_registry(hub_remote)
    assert registry_of(remote) == RegistryReference("reg.io", "ns/m", "1", None)
    assert (local.holds_referrers, remote.holds_referrers, hub.holds_referrers) == (False, True, False)
    assert local.repository_text == "ollama:llama3" and hub_remote.repository_text == "hf://org/name"


def test_locate_reads_a_kind_scheme_by_the_grammar_the_kind_provides():
    assert isinstance(locate("ollama:llama3", Role.MODEL), OllamaReference)
    assert isinstance(locate("hf:org/name", Role.SOURCE), HubReference)
    assert isinstance(locate("hf://org/name", Role.JOB), HubReference)
