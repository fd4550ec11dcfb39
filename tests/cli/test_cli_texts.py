"""The command table (cli/commandtable.py) lets each command start without importing the others: what
the command line prints must not change for it. Every ``--help`` and usage error through the
parser ``main`` uses (listed from the table, one command built when named) is compared with the
parser that imports every group module and builds every command."""

from __future__ import annotations

import pytest
from support.cli_texts import capture, command_lines
from support.entry_probe import run_entry

from ocibridge.cli import commandtable as table
from ocibridge.cli import entry, parser

LINES = command_lines()


@pytest.fixture(scope="module")
def every_built() -> dict[str, tuple[object, str, str]]:
    """What each line prints when every command is built up front."""
    lazy_build = parser.build_parser
    entry.build_parser = lambda lazy=False: lazy_build()  # type: ignore[assignment]
    try:
        return {" ".join(line): capture(line, entry.main) for line in LINES}
    finally:
        entry.build_parser = lazy_build


@pytest.mark.parametrize("line", LINES, ids=" ".join)
def test_help_and_usage_errors_are_those_of_the_full_parser(line, every_built):
    assert capture(line, entry.main) == every_built[" ".join(line)]


def test_the_table_lists_what_each_module_registers():
    """Each group module adds exactly its table entries, in the table's order."""
    added: list[tuple[str, str]] = []
    for module in table.GROUPS:
        def command(name, func, *, group=False, module=module):
            added.append((name, module))
            return parser._Unbuilt()
        parser._register_group(module, command)
    assert added == [(c.name, c.module) for c in table.COMMANDS]


GROUP_MODULES = tuple(f"ocibridge.cli.{m}" for m in table.GROUPS)
#: the group modules whose flag helpers another group uses (push's overrides, --verify-key)
SHARED = {"copy": ("convert", "signing"), "path": ("signing",), "k8s": ("signing",)}


@pytest.mark.parametrize("line", [["--help"], ["--version"], ["copy", "--help"], ["cp", "a"], ["path", "--help"],
                                  ["k8s", "check", "--help"], ["ls", "--help"], ["login", "--help"]])
def test_a_command_line_imports_only_the_group_module_it_names(line):
    code, out, err, loaded = run_entry(line, GROUP_MODULES)
    assert code in (0, 2) and (out or err)
    named = table.BY_NAME.get(line[0])
    expected = set() if named is None else {named.module, *SHARED.get(named.name, ())}
    assert {m.rsplit(".", 1)[1] for m in loaded} == expected, err
