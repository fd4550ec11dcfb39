"""``cat`` (one file of a registry model, read lazily and verified) and ``chunks`` (attach the
chunk table of an existing model). docs/lazy.md says what is trusted and why."""

from __future__ import annotations

import argparse
import sys

from ocibridge.cli.common import CommandAdder, add_transfer_flags, emit, ref_command, transfer_options
from ocibridge.cli.signing import add_verify_flags, policy_from_args
from ocibridge.errors import UsageError

#: ``cat`` writes in steps of this many bytes, each verified before it is written
STEP = 8 * 1024 * 1024


def parse_range(text: str | None, size: int) -> tuple[int, int]:
    """``A-B``: bytes A up to B (B excluded, as Python slices); ``A-``: to the end; ``-N``: the
    last N bytes."""
    if text is None:
        return 0, size
    first, sep, last = text.partition("-")
    try:
        if not sep:
            raise ValueError
        if not first:
            return max(0, size - int(last)), size
        start = int(first)
        end = int(last) if last else size
    except ValueError:
        raise UsageError(f"--range {text!r}: expected A-B, A- or -N (byte offsets)") from None
    if start < 0 or end < start or start > size:
        raise UsageError(f"--range {text!r}: outside the file's {size} bytes")
    return start, min(end, size)


def cmd_cat(args: argparse.Namespace) -> int:
    from ocibridge.api.lazy_ops import open_model

    if args.json:  # stdout is the file's bytes: there is no summary to print instead
        raise UsageError("cat prints the file's bytes; --json has no meaning here "
                         "('ocibridge inspect REF --json' lists the files)")

    out = sys.stdout.buffer
    with open_model(args.ref, transfer=transfer_options(args), verify=policy_from_args(args)) as model:
        start, end = parse_range(args.range, model.file(args.path).layer.size)
        blob = model.open(args.path)
        for at in range(start, end, STEP):
            out.write(blob.read(at, min(at + STEP, end)))  # verified before a byte is written
        out.flush()
    return 0


def cmd_chunks(args: argparse.Namespace) -> int:
    from ocibridge.api.lazy_ops import attach_chunks

    result = attach_chunks(args.ref, transfer=transfer_options(args))
    note = "" if result.bound else (
        "\n  the manifest does not bind this table: readers use it only if the referrer is signed "
        f"(ocibridge sign {result.repository}@{result.referrer} --key KEY) "
        "and they pass --verify-key")
    emit(args, result.as_dict(),
         f"attached chunk table {result.table} ({result.layers} layers) as referrer {result.referrer}{note}")
    return 0


def register(command: CommandAdder) -> None:
    """Add ``cat`` and ``chunks``."""
    p = command("cat", cmd_cat)
    p.add_argument("ref", metavar="REF", help="host/repo:tag or host/repo@digest")
    p.add_argument("path", metavar="PATH", help="the file's path in the model")
    p.add_argument("--range", metavar="A-B", help="bytes A up to B (B excluded); A- to the end; -N the last N")
    add_verify_flags(p, "refuse the model unless signed by this key; a chunk table the manifest does not bind "
                     "is used only if its referrer is signed by it too (repeatable)")
    add_transfer_flags(p)

    p = ref_command(command, "chunks", cmd_chunks)
    add_transfer_flags(p)
