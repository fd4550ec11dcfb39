"""``--no-chunks``, ``--chunk-threshold SIZE`` and ``--chunk-hash``: push's own, and the same
three on ``copy`` and ``convert``, where they shape the artifact an ``hf:`` source is built into
(a store's artifact is copied or converted as it is: there they are refused). Checked once, in
:func:`ocibridge.chunks.choice.choose`, for every command that takes them."""

from __future__ import annotations

import argparse
from typing import Any

from ocibridge.api import choices
from ocibridge.api.chunk_options import ChunkChoice, choose


def add_chunk_flags(p: argparse.ArgumentParser, command: str) -> None:
    """The three flags of ``copy``/``convert``, meaning what push's mean."""
    g: Any = p.add_argument_group(f"chunk tables (an hf: source, which {command} builds as push does; "
                                  "docs/lazy.md)")
    g.add_argument("--no-chunks", action="store_true",
                   help="bind no chunk table: a lazy read of a file moves all of it (as push --no-chunks)")
    add_table_shape_flags(g)


def add_table_shape_flags(p: Any) -> None:
    """``--chunk-threshold`` and ``--chunk-hash``, as push, copy and convert take them."""
    p.add_argument("--chunk-threshold", metavar="SIZE", default=None,
                   help="files from this size get a chunk table (default 64M; e.g. 16M, 1G)")
    p.add_argument("--chunk-hash", choices=choices.chunk_hashes(), default=None,
                   help="the hash of the chunk table's digests (default blake3; sha256: the tables older "
                        "ocibridge releases read lazily, docs/lazy.md)")


def chunk_choice(args: argparse.Namespace) -> ChunkChoice:
    """The flags' values, checked (push's error lines)."""
    return choose(args.no_chunks, args.chunk_threshold, args.chunk_hash)


def chunk_choice_given(args: argparse.Namespace) -> ChunkChoice | None:
    """As :func:`chunk_choice`; None when none of the three was given (the command's default)."""
    if not args.no_chunks and args.chunk_threshold is None and args.chunk_hash is None:
        return None
    return chunk_choice(args)
