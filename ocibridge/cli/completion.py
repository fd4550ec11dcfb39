"""``ocibridge completion bash|zsh|fish``: the shell completion script, on stdout.

Registered on the main parser by :func:`register`, as every command group is (cli/parser.py)."""

from __future__ import annotations

import argparse
import json

from ocibridge.api.completion import SHELLS, completion_script
from ocibridge.cli.common import CommandAdder


def register(command: CommandAdder) -> None:
    p = command("completion", cmd_completion)
    p.add_argument("shell", choices=SHELLS, help="the shell to complete in")


def cmd_completion(args: argparse.Namespace) -> int:
    from ocibridge.cli.parser import build_parser  # every command built: the script lists them all

    script = completion_script(build_parser(), args.shell)
    print(json.dumps(script.as_dict(), indent=2) if args.json else script.script, end="" if not args.json else "\n")
    return 0
