"""The command line's parser: one argparse parser per command, which each command group module
adds through its ``register(command)`` (:class:`~ocibridge.cli.common.CommandAdder`).

:func:`build_parser` lists every command from the table (:mod:`.commandtable`); ``main`` asks for
the lazy form, where a command's group module is imported and its parser built only when the
line names it: ``--help`` and each command load no other command's module."""

from __future__ import annotations

import argparse
import importlib
import re
from collections.abc import Sequence
from typing import Any, NoReturn

from ocibridge.cli.commandtable import BY_NAME, COMMANDS, GROUPS, summary
from ocibridge.cli.common import EXIT_USAGE, Command, CommandAdder
from ocibridge.cli.help import add_examples


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line (what is wrong, where to look: the help of
    the command it was made in), not the whole usage block, and flags may stand between
    positionals (``push SRC --format carton DEST``, as oras and skopeo accept): plain argparse
    hands DEST to nobody once an optional positional has been passed over."""

    _intermixing = False

    def error(self, message: str) -> NoReturn:
        message = nearest(message, list(self._option_string_actions))
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
        # The flags are parsed first, so argparse told a required flag missing before a missing
        # positional ('sign' alone: '--key', not the REF it signs), and either before a flag the
        # command does not know ('sign a --bogus': '--key', when --bogus may be --key misspelled):
        # what is required is checked here, after the unknown flags, the positionals first.
        # (the usage, which --help and errors print, is written first: with them still required)
        required = [a for a in self._actions if a.required]
        usage = self.usage
        if required and usage is None:
            self.usage = self.format_usage().removeprefix("usage: ").rstrip("\n")
        for action in required:
            action.required = False
        try:
            parsed, extras = self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False
            self.usage = usage
            for action in required:
                action.required = True
        # A command's parser: what it does not know is a mistake in this command. Plain argparse
        # hands the words up to the top-level parser, whose error points at 'ocibridge --help'.
        if any(word.startswith("-") and word != "-" for word in extras):
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        given = vars(parsed)
        for positional in (True, False):  # the positionals first: 'sign' alone is REF, not --key
            missing = [_name(a) for a in required if (not a.option_strings) is positional
                       and given.get(a.dest, a.default) is a.default]
            if missing:
                self.error(f"the following arguments are required: {', '.join(missing)}")
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


def _name(action: argparse.Action) -> str:
    """An argument as argparse names it in an error: its flags, else its metavar, else its dest."""
    if action.option_strings:
        return "/".join(action.option_strings)
    if isinstance(action.metavar, tuple):
        return "/".join(action.metavar)
    return action.metavar if action.metavar not in (None, argparse.SUPPRESS) else action.dest


_INVALID_CHOICE = re.compile(r"^(argument \S+: invalid choice: '([^']*)') \(choose from (.*)\)$", re.S)
_UNRECOGNIZED = "unrecognized arguments: "


def nearest(message: str, flags: list[str]) -> str:
    """argparse's usage error with the nearest spelling suggested (difflib, as git and Python
    3.14's argparse do): an unknown command or choice, an unknown flag of the command."""
    import difflib  # (here: only a mistyped line needs it)

    choice = _INVALID_CHOICE.match(message)
    if choice is not None:
        said, word, listed = choice.groups()
        close = difflib.get_close_matches(word, re.findall(r"'([^']*)'", listed), n=1)
        return f"{said}; did you mean '{close[0]}'?" if close else message
    if message.startswith(_UNRECOGNIZED):
        words = message[len(_UNRECOGNIZED):].split()
        hints = [(close[0], word) for word in words if word.startswith("-")
                 for close in [difflib.get_close_matches(word.split("=", 1)[0], flags, n=1)] if close]
        if len(hints) == 1:
            return f"{message}; did you mean '{hints[0][0]}'?"
        if hints:
            return f"{message}; did you mean {', '.join(f'{flag!r} for {word!r}' for flag, word in hints)}?"
    return message


class _Unbuilt(_Parser):
    """A command not built (yet). The subparsers action lists it (``--help``, "invalid choice")
    by the name and help given to ``add_parser``; it is never parsed: :class:`_Commands` builds
    the command first. Its group's ``register`` also adds the group's other commands, which
    get one of these: whatever the builder calls on it is dropped."""

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
        raise AssertionError(f"{self.prog}: a command's parser was asked to parse before it was built")


class _Commands(argparse._SubParsersAction):  # type: ignore[type-arg]  # argparse's own action, made generic by typeshed
    """The ``COMMAND`` argument: a command listed but not built is built (its group module
    imported, its ``register`` run) when the line reaches it, whatever stands before it."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        name = values[0]
        if isinstance(self._name_parser_map.get(name), _Unbuilt):
            self.build(name)
        super().__call__(parser, namespace, values, option_string)

    def add(self, name: str, *, built: bool, group: bool = False) -> argparse.ArgumentParser:
        """A command as the table lists it: its summary, aliases and place in ``--help``."""
        entry = BY_NAME[name]
        kwargs: dict[str, Any] = {"help": summary(entry), "aliases": list(entry.aliases)}
        if built and not group:  # a group only holds subcommands: no description
            kwargs["description"] = summary(entry)
        return self.add_parser(name, **kwargs)  # type: ignore[no-any-return]

    def build(self, word: str) -> None:
        """Build the command ``word`` (a name or an alias) in place of what lists it."""
        entry = BY_NAME[word]
        built: list[argparse.ArgumentParser] = []

        def command(name: str, func: Command | None, *, group: bool = False) -> argparse.ArgumentParser:
            if name != entry.name:  # another command of the group: dropped
                return _Unbuilt()
            kwargs: dict[str, Any] = {"prog": f"{self._prog_prefix} {name}"}
            if not group:
                kwargs["description"] = summary(entry)
            p = _Parser(**kwargs)
            built.append(p)
            return _command_parser(p, func, group=group)

        _register_group(entry.module, command)
        if not built:
            raise AssertionError(f"ocibridge.cli.{entry.module} did not add {entry.name!r}, as the command table says")
        for name in (entry.name, *entry.aliases):  # the same keys: the listing's order is kept
            self._name_parser_map[name] = built[0]
        add_examples(built[0], entry.name)


def _command_parser(p: argparse.ArgumentParser, func: Command | None, *, group: bool) -> argparse.ArgumentParser:
    if not group:
        p.set_defaults(func=func)
        p.add_argument("--json", action="store_true", help="print a machine-readable summary")
    return p


def _register_group(module: str, command: CommandAdder) -> None:
    """Run the ``register`` of the group module ``ocibridge.cli.<module>``."""
    importlib.import_module(f"ocibridge.cli.{module}").register(command)


def build_parser(*, lazy: bool = False) -> argparse.ArgumentParser:
    """The whole command line. ``lazy`` (what ``main`` runs): every command listed from the table
    and built when a line names it (:class:`_Commands`); otherwise every group module is
    imported and every command built. What ``--help`` and the usage errors show is the same."""
    parser = _Parser(
        prog="ocibridge",
        description="Publish ML models to OCI registries as ModelPack artifacts, and bring them back.",
    )
    parser.add_argument("--version", action="version", version=f"ocibridge {_version()}")
    parser.add_argument("--debug", action="store_true",
                        help="log every HTTP request (secrets redacted) and, on an error, the traceback "
                             "(accepted anywhere on the line)")
    unbuilt = [False]  # whether the add_parser call in progress lists a command not built

    def parser_class(**kwargs: Any) -> _Parser:
        return _Unbuilt(**kwargs) if unbuilt[0] else _Parser(**kwargs)

    # parser_class may be any callable making a parser; typeshed asks for a class
    sub: _Commands = parser.add_subparsers(  # type: ignore[call-overload]
        dest="command", required=True, metavar="COMMAND", parser_class=parser_class, action=_Commands)
    if lazy:
        unbuilt[0] = True
        for entry in COMMANDS:
            sub.add(entry.name, built=False)
        unbuilt[0] = False
    else:
        def command(name: str, func: Command | None, *, group: bool = False) -> argparse.ArgumentParser:
            return _command_parser(sub.add(name, built=True, group=group), func, group=group)

        for module in GROUPS:
            _register_group(module, command)
    add_examples(parser)
    return parser


def _version() -> str:
    from ocibridge.version import __version__

    return __version__


def command_parser(command_name: str, prog: str) -> argparse.ArgumentParser:
    """The parser of the command ``command_name`` alone, as its group builds it, its errors naming
    ``prog``: ``k8s serve`` reads the flags it passes to the pods with serve's own parser."""
    entry = BY_NAME[command_name]
    built: list[argparse.ArgumentParser] = []

    def command(name: str, func: Command | None, *, group: bool = False) -> argparse.ArgumentParser:
        if name != entry.name:
            return _Unbuilt()
        built.append(_command_parser(_Parser(prog=prog), func, group=group))
        return built[0]

    _register_group(entry.module, command)
    return built[0]
