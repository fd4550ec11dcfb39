"""The ``ocibridge`` command: one module per command group, each parsing flags and calling the API.

:func:`run` is the console script; :func:`main` takes an argument list and returns the exit code.
Only the module of the command being run is imported (:mod:`.commandtable`, :mod:`.parser`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from ocibridge.cli.entry import main

__all__ = ["main", "run"]


def run() -> NoReturn:
    """The console entry point."""
    from ocibridge.cli.entry import run as run_command

    run_command()


def __getattr__(name: str) -> Any:
    if name == "main":
        from ocibridge.cli import entry

        return entry.main
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
