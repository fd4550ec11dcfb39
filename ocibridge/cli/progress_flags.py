"""``-q`` and ``--progress``: the display of every command that moves blobs (push, pull, copy,
convert, save, load, path), added and read one way."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ocibridge.transfer.progress_modes import MODES, choose_progress

if TYPE_CHECKING:
    from ocibridge.transfer.progress_modes import Display


def add_progress_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("-q", "--quiet", "--no-tty", action="store_true", help="no progress bar")
    p.add_argument("--progress", choices=MODES, default="auto",
                   help="auto (a bar on a terminal), bar, plain (a line per blob), none")


def progress_display(args: argparse.Namespace, label: str, *, machine_output: bool = False) -> Display | None:
    """The display those flags ask for; ``auto`` stays silent with ``--json`` and with
    ``machine_output`` (an archive export, which has no byte events)."""
    return choose_progress(args.progress, label, quiet=args.quiet, machine_output=args.json or machine_output)
