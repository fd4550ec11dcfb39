"""The CLI flags that shape transfers: upload pieces, ranged pull parts and the overall rate cap."""

from __future__ import annotations

import argparse
from typing import Any

from ocibridge.core.terminal import parse_bytes as parse_bytes  # its home: the inverse of human_size
from ocibridge.errors import UsageError


def add_upload_flags(group: Any) -> None:
    """``--upload-part-size``: a blob's upload in ``PATCH`` pieces of a fixed size. Its former
    name ``--chunk-size`` (which read like push's chunk tables, ``--chunks``) still works,
    hidden from the help, for one release (docs/cli.md)."""
    group.add_argument("--upload-part-size", metavar="SIZE",
                       help="upload blobs in PATCH pieces of SIZE (e.g. 32M), each with Content-Range "
                            "(default: large blobs in streamed pieces sized by time)")
    group.add_argument("--chunk-size", type=int, help=argparse.SUPPRESS)  # deprecated: --upload-part-size


def upload_options(args: argparse.Namespace) -> dict[str, Any]:
    """The upload piece size of ``--upload-part-size`` (or its former name), as TransferOptions takes it."""
    if "upload_part_size" not in vars(args):  # a command that only fetches (pull)
        return {}
    if args.upload_part_size is not None and args.chunk_size is not None:
        raise UsageError("--chunk-size is the former name of --upload-part-size: give one of them")
    if args.chunk_size is not None:
        if args.chunk_size < 1:
            raise UsageError("--chunk-size must be at least 1 byte")
        return {"chunk_size": args.chunk_size}
    if args.upload_part_size is None:
        return {}
    try:
        return {"chunk_size": parse_bytes(args.upload_part_size)}
    except ValueError as e:
        raise UsageError(f"--upload-part-size: {e}") from None


def add_ranged_flags(group: Any) -> None:
    group.add_argument("--part-size", metavar="SIZE",
                       help="pull large blobs in parts of SIZE (e.g. 32M; default 32M)")
    group.add_argument("--parts", type=int, metavar="N", dest="parts_in_flight",
                       help="parts of one blob in flight at once (default: by the rate, up to 16; 1: one stream)")
    group.add_argument("--limit-rate", metavar="RATE",
                       help="cap all transfers together at RATE bytes per second (e.g. 20M)")


def ranged_options(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for flag, name, text in (("--part-size", "part_size", args.part_size),
                             ("--limit-rate", "limit_rate", args.limit_rate)):
        if text is not None:
            try:
                out[name] = parse_bytes(text)
            except ValueError as e:
                raise UsageError(f"{flag}: {e}") from None
    parts = args.parts_in_flight
    if parts is not None:
        if parts < 1:
            raise UsageError("--parts must be at least 1")
        out["parts_in_flight"] = parts
    return out
