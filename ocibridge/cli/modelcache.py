"""``ocibridge path`` and ``ocibridge cache``: the shared model cache on the command line.

``path`` prints the snapshot directory alone on stdout (for ``vllm serve "$(ocibridge path
REF)"``); ``cache prune`` keeps the cache in bounds."""

from __future__ import annotations

import argparse
import re
from typing import Any

from ocibridge.api.session import OFFLINE_ENV as OFFLINE
from ocibridge.cli.common import CommandAdder, add_file_glob_flags, add_transfer_flags, emit, plural, transfer_options
from ocibridge.cli.progress_flags import add_progress_flags, progress_display
from ocibridge.cli.signing import add_verify_flags, policy_from_args
from ocibridge.cli.transfer_flags import parse_bytes
from ocibridge.core.terminal import human_size
from ocibridge.errors import UsageError

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_age(text: str) -> float:
    """``30d``, ``12h``, ``90m``, ``2w`` or plain seconds."""
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", text.lower())
    if found is None:
        raise UsageError(f"--older-than {text!r}: use e.g. 30d, 12h, 90m")
    return float(found.group(1)) * _UNITS[found.group(2) or "s"]


def cmd_path(args: argparse.Namespace) -> int:
    from ocibridge.api.cache_ops import path

    # Every registry flag at its default: no options, so the cache may answer before the client loads
    transfer = None if _only_warm_flags(args) else transfer_options(args)
    deltas: list[dict[str, object]] = []
    bar = _BarOnFirstEvent(args)
    try:
        where = path(args.ref, transfer=transfer, verify=policy_from_args(args), include=args.include,
                     exclude=args.exclude, offline=True if args.offline else None, hf=args.hf,
                     progress=None if args.quiet or args.progress == "none" else bar,
                     on_delta=lambda done: deltas.append(done.as_dict()))
    finally:
        bar.close()
    data: dict[str, object] = {"reference": args.ref, "path": str(where)}
    if deltas:
        data["delta"] = deltas  # (the reused line of each went to stderr as the cache built it)
    emit(args, data, str(where))
    return 0


class _BarOnFirstEvent:
    """The display ``--progress`` asks for, made at the first blob event: a snapshot the cache
    answers from its records has none, and then loads no bar."""

    def __init__(self, args: argparse.Namespace) -> None:
        self._args = args
        self._bar: Any = None
        self._made = False

    def __call__(self, kind: str, desc: Any, nbytes: int) -> None:
        if not self._made:
            self._made = True
            self._bar = progress_display(self._args, "path")
        if self._bar:
            self._bar(kind, desc, nbytes)

    def close(self) -> None:
        if self._bar:
            self._bar.close()


#: the flags of ``path`` that the cache's warm answer heeds (cache/warm.py)
_WARM_FLAGS = ("ref", "include", "exclude", "offline", "quiet", "progress")


def _only_warm_flags(args: argparse.Namespace) -> bool:
    """Whether every other flag of ``path`` is at its default (a key to verify with, ``--hf``,
    a registry setting: the full way) and ``--debug`` is off (the full way logs its requests)."""
    if args.debug:
        return False
    plain = argparse.ArgumentParser(add_help=False)
    _path_arguments(plain)
    defaults = vars(plain.parse_args(["REF"]))
    return all(getattr(args, dest) == value for dest, value in defaults.items() if dest not in _WARM_FLAGS)


def cmd_cache(args: argparse.Namespace) -> int:
    from ocibridge.api.cache_ops import cache_dir, prune_cache

    if args.action == "dir":
        where = cache_dir()
        emit(args, {"path": str(where)}, str(where))
        return 0
    try:
        max_size = parse_bytes(args.max_size) if args.max_size is not None else None
    except ValueError as e:
        raise UsageError(f"--max-size: {e}") from None
    older = parse_age(args.older_than) if args.older_than is not None else None
    if older is None and max_size is None:
        raise UsageError("cache prune needs --older-than AGE and/or --max-size SIZE")
    done = prune_cache(older_than=older, max_size=max_size)
    pulls = f"{plural(done.pulls, 'leftover')} of failed pulls ({human_size(done.pulls_freed)})"
    held = f"; {plural(done.pulls_held, 'leftover')} kept: a running pull holds them" if done.pulls_held else ""
    emit(args, done.as_dict(), f"removed {plural(len(done.snapshots), 'snapshot')}, {plural(done.blobs, 'blob')} "
                               f"and {pulls}, freed {human_size(done.freed)}; the cache holds "
                               f"{human_size(done.size)}{held}")
    return 0


def register(command: CommandAdder) -> None:
    _path_arguments(command("path", cmd_path))

    p = command("cache", cmd_cache)
    p.add_argument("action", choices=["prune", "dir"])
    p.add_argument("--older-than", metavar="AGE",
                   help="remove snapshots (and failed pulls' leftovers) unused for AGE (30d, 12h, ...)")
    p.add_argument("--max-size", metavar="SIZE", help="then the least recently used until the cache fits SIZE")


def _path_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("ref", metavar="REF")
    add_file_glob_flags(p, "a snapshot of its own")
    p.add_argument("--offline", action="store_true",
                   help=f"contact nothing: REF as last resolved (also {OFFLINE}=1)")
    p.add_argument("--hf", metavar="ORG/NAME",
                   help="also lay the model out in the Hugging Face cache as this repo id (hard links)")
    add_progress_flags(p)
    add_verify_flags(p)
    add_transfer_flags(p)
