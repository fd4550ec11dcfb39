"""One door (issue 51): every command of the parser is one call of ocibridge's public API.

The handler of every command (each leaf of the parser, ``k8s`` subcommands included) is read
as text (its AST, never run) and must call, itself or through a helper of the CLI it calls,
a function that ``ocibridge.__all__`` lists (an options class does not count), reached through a name bound to
``ocibridge``'s façade or a module of ``ocibridge.api`` (an import, ``LazyModule`` or
``lazy_function``). A handler that does the work itself, with the layers below the API,
fails here; the import rule (tests/code/test_import_layers.py) keeps those layers out of ``cli/``.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import re
import sys
import textwrap
from collections.abc import Iterator
from types import ModuleType

import pytest

import ocibridge
from ocibridge.cli.parser import build_parser

PUBLIC = frozenset(ocibridge.__all__)
#: the public functions: constructing an options value (TransferOptions) is not the call
PUBLIC_FUNCTIONS = frozenset(name for name in PUBLIC if inspect.isfunction(getattr(ocibridge, name)))


def _leaf_commands(parser: argparse.ArgumentParser, prefix: str = "") -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """(command words, parser) for every parser that runs a command."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs and parser.get_default("func") is not None:
        yield prefix.strip(), parser
    seen: set[int] = set()
    for action in subs:
        for name, child in action.choices.items():
            if id(child) in seen:  # an alias names the same parser
                continue
            seen.add(id(child))
            yield from _leaf_commands(child, f"{prefix} {name}")


COMMANDS = dict(_leaf_commands(build_parser()))


class _ApiNames(ast.NodeVisitor):
    """The names of a module bound to the public API: functions (``from ocibridge.api.x import
    f``, ``lazy_function("ocibridge.api.x", "f")``) and modules (``from ocibridge.api import x``,
    ``import ocibridge``, ``LazyModule("ocibridge.api.x")``)."""

    def __init__(self) -> None:
        self.functions: set[str] = set()
        self.modules: set[str] = set()

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        for alias in node.names:
            bound = alias.asname or alias.name
            if module == "ocibridge.api" or (module == "ocibridge" and alias.name == "api"):
                self.modules.add(bound)
            elif module.startswith("ocibridge.api.") or module == "ocibridge":
                self.functions.add(bound)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name == "ocibridge" or alias.name.startswith("ocibridge.api"):
                if alias.asname:
                    self.modules.add(alias.asname)
                elif alias.name == "ocibridge":
                    self.modules.add("ocibridge")

    def visit_Assign(self, node: ast.Assign) -> None:
        value = node.value
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.args:
            first = value.args[0]
            api_text = isinstance(first, ast.Constant) and isinstance(first.value, str) \
                and (first.value == "ocibridge" or first.value.startswith("ocibridge.api"))
            for target in node.targets:
                if isinstance(target, ast.Name) and api_text:
                    if value.func.id == "LazyModule":
                        self.modules.add(target.id)
                    elif value.func.id == "lazy_function":
                        self.functions.add(target.id)
        self.generic_visit(node)


def _module_tree(module: ModuleType) -> tuple[ast.Module, _ApiNames]:
    tree = ast.parse(inspect.getsource(module))
    names = _ApiNames()
    names.visit(tree)
    return tree, names


def _calls_public_api(func: object, depth: int = 0, seen: set[str] | None = None) -> list[str]:
    """The public API names ``func`` calls, directly or through functions of the CLI it calls."""
    seen = set() if seen is None else seen
    module = sys.modules[func.__module__]  # type: ignore[attr-defined]
    key = f"{module.__name__}.{func.__qualname__}"  # type: ignore[attr-defined]
    if key in seen or depth > 4:
        return []
    seen.add(key)
    _, names = _module_tree(module)
    body = ast.parse(textwrap.dedent(inspect.getsource(func)))  # type: ignore[arg-type]
    found: list[str] = []
    for node in ast.walk(body):
        if not isinstance(node, ast.Call):
            continue
        callee = node.func
        if isinstance(callee, ast.Attribute) and isinstance(callee.value, ast.Name) \
                and callee.value.id in names.modules and callee.attr in PUBLIC_FUNCTIONS:
            found.append(callee.attr)
        elif isinstance(callee, ast.Name) and callee.id in names.functions and callee.id in PUBLIC_FUNCTIONS:
            found.append(callee.id)
        elif isinstance(callee, ast.Name):  # a helper: of this module, or imported from the CLI
            helper = getattr(module, callee.id, None)
            if inspect.isfunction(helper) and helper.__module__.startswith("ocibridge.cli"):
                found += _calls_public_api(helper, depth + 1, seen)
    return found


def test_the_parser_has_every_command():
    """The walk sees the commands and the subcommands (a test over nothing would pass)."""
    assert {"push", "pull", "copy", "sign", "verify", "serve", "mirror", "k8s volume", "k8s check"} <= set(COMMANDS)
    assert len(COMMANDS) >= 35


@pytest.mark.parametrize("words", sorted(COMMANDS))
def test_every_command_calls_the_public_api(words):
    handler = COMMANDS[words].get_default("func")
    called = _calls_public_api(handler)
    assert called, (f"'ocibridge {words}' ({handler.__module__}.{handler.__qualname__}) calls no function "
                    "of ocibridge's public API (ocibridge.__all__): the command must be one API call")


def test_the_checker_tells_a_handler_that_does_the_work_itself():
    """A handler that opens a store itself is refused; one that calls the API is accepted."""
    from ocibridge.cli import store

    def does_it_itself(args: argparse.Namespace) -> int:
        print(len(args))
        return 0

    does_it_itself.__module__ = store.__name__
    assert _calls_public_api(does_it_itself) == []
    assert _calls_public_api(COMMANDS["list"].get_default("func"))


def test_help_of_the_package_lists_a_function_for_every_command():
    """``help(ocibridge)`` names what the commands call: every public name resolves."""
    text = __import__("pydoc").render_doc(ocibridge, renderer=__import__("pydoc").plaintext)
    for name in ("push", "pull", "copy_reference", "sign", "verify", "verify_dir", "convert", "check_registry",
                 "save", "load", "create_app", "serve"):
        assert name in PUBLIC, f"{name} is not public"
        assert callable(getattr(ocibridge, name))
        assert re.search(rf"^\s+{name}\(", text, re.M), f"help(ocibridge) has no entry for {name}()"


def test_every_public_name_is_in_the_api_docs():
    """docs/api.md names every name ``ocibridge`` exports: a function added to the door is documented."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text()
    missing = [name for name in sorted(PUBLIC) if f"`{name}" not in text and f"{name}(" not in text
               and f".{name}" not in text]
    assert not missing, f"docs/api.md does not name: {', '.join(missing)}"


def test_every_ocibridge_name_the_docs_use_exists():
    """The other way round: every ``ocibridge.NAME`` the docs write resolves (a documented call
    that raises AttributeError is worse than an undocumented one)."""
    from pathlib import Path

    docs = Path(__file__).resolve().parents[2] / "docs"
    name = re.compile(r"(?<![\w./-])ocibridge\.([A-Za-z_][A-Za-z0-9_]*)\b(?![.-])")  # not io.ocibridge.x
    used = {m for doc in docs.rglob("*.md") for m in name.findall(doc.read_text())}
    subpackages = {p.name for p in (docs.parent / "ocibridge").iterdir() if p.is_dir() or p.suffix == ".py"}
    missing = sorted(n for n in used if n not in PUBLIC and n not in subpackages and f"{n}.py" not in subpackages)
    assert not missing, f"the docs use ocibridge.{', ocibridge.'.join(missing)}, which ocibridge does not export"
