"""``ocibridge path`` and ``ocibridge cache``: the shared model cache on the command line.

``path`` prints the snapshot directory alone on stdout (for ``vllm serve "$(ocibridge path
REF)"``); ``cache prune`` keeps the cache in bounds."""

from __future__ import annotations

import argparse
import re
from typing import TYPE_CHECKING

from ocibridge.cli.common import CommandAdder, add_transfer_flags, emit, plural, transfer_options
from ocibridge.cli.signing import add_verify_flags, policy_from_args
from ocibridge.cli.transfer_flags import parse_bytes
from ocibridge.core.environment import OFFLINE
from ocibridge.core.terminal import human_size
from ocibridge.errors import UsageError
from ocibridge.transfer.progress_modes import MODES, choose_progress

if TYPE_CHECKING:
    from ocibridge.kinds.locators import Locator

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_age(text: str) -> float:
    """``30d``, ``12h``, ``90m``, ``2w`` or plain seconds."""
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", text.lower())
    if found is None:
        raise UsageError(f"--older-than {text!r}: use e.g. 30d, 12h, 90m")
    return float(found.group(1)) * _UNITS[found.group(2) or "s"]


def cmd_path(args: argparse.Namespace) -> int:
    from ocibridge.kinds.locate import Role, locate

    located = locate(args.ref, Role.MODEL)
    where = None
    if _only_warm_flags(args) and not _policy_asks(located):  # the cache may answer before the client loads
        from ocibridge.cache.records import offline_from_env
        from ocibridge.cache.warm import warm_path

        where = warm_path(located, offline=args.offline or offline_from_env(), include=args.include,
                          exclude=args.exclude)
    deltas: list[dict[str, object]] = []
    if where is None:
        from ocibridge.api.cache_ops import path

        bar = choose_progress(args.progress, "path", quiet=args.quiet, machine_output=args.json)
        try:
            where = path(located, transfer=transfer_options(args), verify=policy_from_args(args),
                         include=args.include, exclude=args.exclude, offline=True if args.offline else None,
                         hf=args.hf, progress=bar, on_delta=lambda done: deltas.append(done.as_dict()))
        finally:
            if bar:
                bar.close()
    data: dict[str, object] = {"reference": args.ref, "path": str(where)}
    if deltas:
        data["delta"] = deltas  # (the reused line of each went to stderr as the cache built it)
    emit(args, data, str(where))
    return 0


def _policy_asks(located: Locator) -> bool:
    """Whether the containers policy file asks for a check of REF: then the full way makes it."""
    from ocibridge.signing.use import needs_checking

    return needs_checking(located, None)


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
    from ocibridge.cache.models import ModelCache
    from ocibridge.cache.prune import prune

    if args.action == "dir":
        emit(args, {"path": str(ModelCache().root)}, str(ModelCache().root))
        return 0
    try:
        max_size = parse_bytes(args.max_size) if args.max_size is not None else None
    except ValueError as e:
        raise UsageError(f"--max-size: {e}") from None
    older = parse_age(args.older_than) if args.older_than is not None else None
    if older is None and max_size is None:
        raise UsageError("cache prune needs --older-than AGE and/or --max-size SIZE")
    done = prune(ModelCache(), older_than=older, max_size=max_size)
    emit(args, done.as_dict(), f"removed {plural(len(done.snapshots), 'snapshot')} and {plural(done.blobs, 'blob')}, "
                               f"freed {human_size(done.freed)}; the cache holds {human_size(done.size)}")
    return 0


def register(command: CommandAdder) -> None:
    _path_arguments(command("path", cmd_path))

    p = command("cache", cmd_cache)
    p.add_argument("action", choices=["prune", "dir"])
    p.add_argument("--older-than", metavar="AGE", help="remove snapshots unused for AGE (30d, 12h, ...)")
    p.add_argument("--max-size", metavar="SIZE", help="then the least recently used until the cache fits SIZE")


def _path_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("ref", metavar="REF")
    p.add_argument("--include", action="append", default=[], metavar="GLOB",
                   help="only files matching GLOB (repeatable; a snapshot of its own)")
    p.add_argument("--exclude", action="append", default=[], metavar="GLOB",
                   help="leave out files matching GLOB (repeatable)")
    p.add_argument("--offline", action="store_true",
                   help=f"contact nothing: REF as last resolved (also {OFFLINE}=1)")
    p.add_argument("--hf", metavar="ORG/NAME",
                   help="also lay the model out in the Hugging Face cache as this repo id (hard links)")
    p.add_argument("-q", "--quiet", "--no-tty", action="store_true", help="no progress bar")
    p.add_argument("--progress", choices=MODES, default="auto",
                   help="auto (a bar on a terminal), bar, plain (a line per blob), none")
    add_verify_flags(p)
    add_transfer_flags(p)
