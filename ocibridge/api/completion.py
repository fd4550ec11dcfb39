"""Shell completion scripts (``ocibridge completion bash|zsh|fish``), written by shtab, the
maintained library that reads an argparse parser: every command, subcommand, flag and choice, and
for a model argument (``REF``, ``SRC``…) the names of the local store's models, asked of
``ocibridge ls`` when the user presses Tab (so they are today's, not the ones at install time).

The parser is given, not built here: the command line builds every command's (the API sits below
the CLI and does not import it)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from ocibridge.core.asdict import FieldsAsDict
from ocibridge.errors import OcibridgeError, UsageError

__all__ = ["SHELLS", "CompletionScript", "completion_script"]

#: the shells a script is written for
SHELLS = ("bash", "zsh", "fish")
#: the positional arguments that name a model: completed with the local store's NAME:TAG
MODEL_ARGUMENTS = frozenset({"ref", "refs", "src", "old", "new"})

_LIST = "ocibridge ls 2>/dev/null | awk 'NR > 1 { print $1 \":\" $2 }'"
_MODELS: dict[str, Any] = {
    "bash": "_ocibridge_models",
    "zsh": "_ocibridge_models",
    # fish keeps this in double quotes, then runs it at each Tab: its $ and " escaped once
    "fish": "({})".format(_LIST.replace("$", "\\$").replace('"', '\\"')),
    "preamble": {
        # not compgen -W: it expands each word it is given ($(...), `...`, $VAR), and a name in the
        # store's index.json is anyone's text; each name is compared as it is, printed as it is
        "bash": ('_ocibridge_models() {\n  local name\n  while IFS= read -r name; do\n'
                 '    [[ "$name" == "$1"* ]] && printf \'%s\\n\' "$name"\n'
                 f'  done < <({_LIST})\n}}\n'),
        "zsh": f'_ocibridge_models() {{\n  local -a models\n  models=(${{(f)"$({_LIST})"}})\n'
               "  compadd -a models\n}\n",
    },
}


@dataclass(frozen=True)
class CompletionScript(FieldsAsDict):
    """The completion script for ``shell``: source it (bash, zsh) or put it in fish's completions."""

    shell: str
    script: str


def completion_script(parser: argparse.ArgumentParser, shell: str) -> CompletionScript:
    """The ``shell`` completion script of ``parser`` (every command built: ``build_parser()``),
    with the local store's model names for model arguments."""
    if shell not in SHELLS:
        raise UsageError(f"no completion for {shell!r} (choose from {', '.join(SHELLS)})")
    try:
        import shtab
    except ImportError:  # a dependency: only a broken install lacks it
        raise OcibridgeError("shell completion needs shtab (pip install shtab)") from None
    for action in _actions(parser):
        if not action.option_strings and action.dest in MODEL_ARGUMENTS:
            action.complete = _MODELS  # type: ignore[attr-defined]  # shtab's own attribute
    return CompletionScript(shell, shtab.complete(parser, shell=shell))


def _actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """Every action of the parser and of its subcommands' parsers."""
    found: list[argparse.Action] = []
    seen: set[int] = set()
    stack = [parser]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        for action in current._actions:
            found.append(action)
            if isinstance(action, argparse._SubParsersAction):
                stack.extend(action.choices.values())
    return found
