"""What the command line prints without running a command: ``--help`` of the program and of
every command (aliases too), and the one-line usage errors. tests/cli/test_cli_texts.py compares
the parser ``main`` uses (commands listed from the table, built when parsed) with the one that
imports and builds every command; run as a script, it prints them all as JSON, to compare two
trees byte for byte (``PYTHONPATH=TREE python tests/support/cli_texts.py > texts.json``)."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from collections.abc import Callable


def command_lines() -> list[list[str]]:
    """Every command line whose output is compared: each command's ``--help``, an unknown flag,
    a missing or bad argument, and the program's own help, version and errors."""
    from ocibridge.cli.help import subcommands
    from ocibridge.cli.parser import build_parser

    names = [name.split() for name in subcommands(build_parser())]
    lines: list[list[str]] = [[], ["--help"], ["-h"], ["--version"], ["bogus"], ["--bogus"], ["-x", "copy", "a", "b"],
                              ["cp", "--help"], ["ls", "--help"], ["cp"], ["ls", "a", "b"], ["copy", "a"],
                              ["copy", "a", "b", "--concurrency", "x"], ["cache", "bogus"], ["k8s", "bogus"],
                              ["push", "--help", "--bogus"]]
    for words in names:
        lines += [[*words, "--help"], [*words, "--no-such-flag"]]
    return lines


def capture(argv: list[str], main: Callable[[list[str]], int]) -> tuple[object, str, str]:
    """(exit code, stdout, stderr) of a command line that runs no command."""
    out, err = io.StringIO(), io.StringIO()
    code: object = None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as e:
            code = e.code
    return code, out.getvalue(), err.getvalue()


if __name__ == "__main__":
    import os

    os.environ.setdefault("COLUMNS", "80")  # argparse wraps help to the terminal's width
    from ocibridge.cli.entry import main as entry_main

    json.dump({" ".join(line): capture(line, entry_main) for line in command_lines()}, sys.stdout, indent=1)
