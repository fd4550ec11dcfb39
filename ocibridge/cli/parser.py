"""The command line's parser: one argparse parser per command, which each command group module
adds through its ``register(command)`` (:class:`~ocibridge.cli.common.CommandAdder`); only the
command being run has its arguments built."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from ocibridge.cli import (
    auth,
    bundle,
    convert,
    inspect,
    k8s,
    lazy,
    mirror,
    modelcache,
    registry_check,
    serve,
    signing,
    store,
    transfer,
)
from ocibridge.cli.common import EXIT_USAGE, Command, CommandAdder
from ocibridge.cli.help import add_examples

#: every command group in the order ``--help`` lists its commands
GROUPS: tuple[Callable[[CommandAdder], None], ...] = (
    transfer.register, convert.register, inspect.register, auth.register, mirror.register, modelcache.register,
    k8s.register, signing.register, registry_check.register, store.register, bundle.register, lazy.register,
    serve.register,
)


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line (what is wrong, where to look: the help of
    the command it was made in), not the whole usage block, and flags may stand between
    positionals (``push SRC --format carton DEST``, as oras and skopeo accept): plain argparse
    hands DEST to nobody once an optional positional has been passed over."""

    _intermixing = False

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"ocibridge: error: {message} (see '{self.prog} --help')\n")

    def parse_known_args(  # type: ignore[override]  # typeshed overloads it; one signature is enough here
            self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None,
    ) -> tuple[argparse.Namespace, list[str]]:
        has_subcommands = any(a.nargs == argparse.PARSER for a in self._get_positional_actions())
        if has_subcommands or self._intermixing:
            return super().parse_known_args(args, namespace)
        # Python < 3.12 parses intermixed args by calling parse_known_args again: this flag
        # sends those inner calls to argparse's own parsing.
        self._intermixing = True
        try:
            parsed, extras = self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False
        # A command's parser: what it does not know is a mistake in this command. Plain argparse
        # hands the words up to the top-level parser, whose error points at 'ocibridge --help'.
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


class _Unbuilt(_Parser):
    """A command that is not the one being run. Its subparsers action lists it (``--help``,
    "invalid choice") by the name and help given to ``add_parser``; it is never parsed, so its
    arguments are not built: building every command's parser took ~20-40 ms of each start.
    Whatever its builder calls on it is dropped."""

    def __init__(self, **kwargs: Any) -> None:  # no parser state: nothing is parsed with it
        self.prog = kwargs.get("prog") or ""
        self._actions = []

    def add_argument(self, *args: Any, **kwargs: Any) -> Any:
        return None

    def add_argument_group(self, *args: Any, **kwargs: Any) -> Any:
        return self

    def add_mutually_exclusive_group(self, *args: Any, **kwargs: Any) -> Any:
        return self

    def add_subparsers(self, *args: Any, **kwargs: Any) -> Any:
        return self

    def add_parser(self, *args: Any, **kwargs: Any) -> Any:
        return self

    def set_defaults(self, *args: Any, **kwargs: Any) -> None:
        pass

    def parse_known_args(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"{self.prog}: the parser of a command not being run was asked to parse")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; with ``only`` (a command or alias as typed first), that
    command's parser alone is built and the others are listed by name and help
    (:class:`_Unbuilt`): what ``--help`` and the usage errors show is the same."""
    parser = _Parser(
        prog="ocibridge",
        description="Publish ML models to OCI registries as ModelPack artifacts, and bring them back.",
    )
    parser.add_argument("--version", action="version", version=f"ocibridge {_version()}")
    parser.add_argument("--debug", action="store_true",
                        help="log every HTTP request (secrets redacted) and, on an error, the traceback "
                             "(accepted anywhere on the line)")
    unbuilt = [False]  # whether the add_parser call in progress is for a command not being run

    def parser_class(**kwargs: Any) -> _Parser:
        return _Unbuilt(**kwargs) if unbuilt[0] else _Parser(**kwargs)

    # parser_class may be any callable making a parser; typeshed asks for a class
    sub: argparse._SubParsersAction[_Parser] = parser.add_subparsers(  # type: ignore[call-overload]
        dest="command", required=True, metavar="COMMAND", parser_class=parser_class)

    def command(name: str, func: Command | None, help: str, aliases: tuple[str, ...] = (),
                *, group: bool = False) -> argparse.ArgumentParser:
        unbuilt[0] = only is not None and only not in (name, *aliases)
        try:
            if group:  # it only holds subcommands, which take --json and run
                return sub.add_parser(name, help=help, aliases=list(aliases))
            p = sub.add_parser(name, help=help, description=help, aliases=list(aliases))
        finally:
            unbuilt[0] = False
        p.set_defaults(func=func)
        p.add_argument("--json", action="store_true", help="print a machine-readable summary")
        return p

    for register in GROUPS:
        register(command)
    add_examples(parser)
    return parser


def _version() -> str:
    from ocibridge.version import __version__

    return __version__
