"""``inspect``, ``validate`` and ``tags``: read an artifact or a repository through
:mod:`ocibridge.api.inspect_ops` and print what it holds (``validate``: the reasons it fails)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from ocibridge.cli.common import EXIT_FAILURE, CommandAdder, add_transfer_flags, emit, ref_command, transfer_options
from ocibridge.core.lazyimport import LazyModule
from ocibridge.core.terminal import one_line
from ocibridge.errors import ValidationError

if TYPE_CHECKING:
    from ocibridge.api import inspect_ops as api
    from ocibridge.api import texts
else:  # loaded on first use: --help and --version need neither pydantic nor httpx
    api = LazyModule("ocibridge.api.inspect_ops")
    texts = LazyModule("ocibridge.api.texts")


def cmd_inspect(args: argparse.Namespace) -> int:
    result = api.inspect(args.ref, transfer=transfer_options(args))
    emit(args, result.as_dict(), texts.inspect_text(result))
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    warnings: list[str] = []
    try:
        desc = api.validate(args.ref, transfer=transfer_options(args), strict=args.strict,
                            warnings=warnings, runtime=args.runtime)
    except ValidationError as e:
        if args.json:
            print(json.dumps({"valid": False, "reasons": e.reasons, "warnings": warnings}, indent=2))
        else:
            print(one_line(f"{args.ref}: invalid{' ' + e.family if e.family else ''}"), file=sys.stderr)
            for reason in e.reasons:
                print(one_line(f"  - {reason}"), file=sys.stderr)
            for warning in [] if args.strict else warnings:
                print(one_line(f"  warning: {warning}"), file=sys.stderr)
        return EXIT_FAILURE
    note = [] if not desc.title else [  # another family: what was checked, and the way to ModelPack
        f"  note: not a ModelPack artifact; its ModelPack form (`ocibridge convert {args.ref} DEST --to modelpack`) "
        "conforms to the model-spec"]
    title = f" {desc.title}" if desc.title else ""
    text = "\n".join([f"{args.ref}: valid{title} ({desc.digest})", *map(one_line, note),
                      *(one_line(f"  warning: {w}") for w in desc.warnings)])
    emit(args, desc.as_dict(), text)
    return 0


def cmd_tags(args: argparse.Namespace) -> int:
    names = api.tags(args.ref, transfer=transfer_options(args), bookkeeping=args.all)
    if args.json:
        print(json.dumps(names))
    elif names:
        print("\n".join(one_line(name) for name in names))  # per tag: a newline in one forges no line
    return 0  # none: an emptied repository or layout (a repository the registry does not know is an error)


def register(command: CommandAdder) -> None:
    p = ref_command(command, "inspect", cmd_inspect)
    add_transfer_flags(p)

    p = ref_command(command, "validate", cmd_validate)
    p.add_argument("--strict", action="store_true",
                   help="warnings (what the spec recommends; with --runtime, that runtime's needs) count as errors")
    p.add_argument("--runtime", metavar="cri-o|containerd[@VERSION]",
                   help="also check what this runtime needs beyond the spec (CRI-O file names, containerd images)")
    add_transfer_flags(p)

    p = ref_command(command, "tags", cmd_tags)
    p.add_argument("-a", "--all", action="store_true",
                   help="also the tags ocibridge keeps for itself (ocibridge-ref-<hex>, one a signature or other "
                        "referrer, and serve's ocibridge-commit-<id> and ocibridge-refs: what keeps them from "
                        "garbage collection), cosign's beside a signed model (sha256-<hex>, .sig, .att) and the tags "
                        "serve deleted (they name its tombstone)")
    add_transfer_flags(p)

