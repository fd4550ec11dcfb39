"""``ocibridge convert SRC DST --to FAMILY``: the command line of :mod:`ocibridge.kinds.conversion`."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from ocibridge.cli.common import CommandAdder, add_transfer_flags, counts, transfer_options
from ocibridge.cli.evidence import (
    add_evidence_flags,
    evidence_lines,
    evidence_options,
    refuse_unattachable,
    source_evidence,
)
from ocibridge.kinds.overrides import OVERRIDES
from ocibridge.kinds.table import family_names
from ocibridge.oci.mediatypes import Family

if TYPE_CHECKING:  # the command line loads the families only when a command runs
    from ocibridge.kinds.conversion import ConvertResult
    from ocibridge.kinds.family import WriteOptions

#: override flags (``--param-size`` ...) and what each sets, for --help
OVERRIDE_HELP = {
    "arch": "config.architecture", "family": "descriptor.family", "format": "config.format",
    "param_size": "config.paramSize", "precision": "config.precision", "quantization": "config.quantization",
    "version": "descriptor.version", "license": "descriptor.licenses (one SPDX id)",
    "description": "descriptor.description", "name": "descriptor.name",
}


def add_override_flags(p: argparse.ArgumentParser, *, skip: tuple[str, ...] = (),
                       renamed: dict[str, str] | None = None) -> None:
    """``--arch``, ``--family``, ... : set a descriptor/config field of the written artifact.
    ``renamed`` spells a flag otherwise where the command already has that name (push's
    ``--format`` is the source format, so the model format is ``--model-format`` there)."""
    g = p.add_argument_group("metadata (set or override a field of the written config)")
    for flag in OVERRIDES:
        if flag in skip:
            continue
        spelled = (renamed or {}).get(flag, flag.replace("_", "-"))
        g.add_argument(f"--{spelled}", dest=f"set_{flag}", metavar="VALUE", help=f"set {OVERRIDE_HELP[flag]}")


def overrides_of(args: argparse.Namespace) -> dict[str, str]:
    return {flag: value for flag in OVERRIDES
            if (value := getattr(args, f"set_{flag}", None)) is not None}


def family_choices() -> list[str]:
    return family_names()


def cmd_convert(args: argparse.Namespace) -> int:
    from ocibridge.api.convert import convert
    from ocibridge.kinds.locate import Role, locate
    from ocibridge.transfer.progress_modes import choose_progress

    src, dst = locate(args.src, Role.MODEL), locate(args.dst, Role.DESTINATION)  # the edge: once each
    evidence = evidence_options(args)  # a key and the extra checked before a byte is sent
    refuse_unattachable(dst, evidence)
    bar = choose_progress(args.progress, "convert", quiet=args.quiet, machine_output=args.json)
    try:
        result = convert(src, dst, args.to, options=write_options(args),
                         registry_options=transfer_options(args).registry_options(), concurrency=args.concurrency,
                         progress=bar)
    finally:
        if bar:
            bar.close()
    attached = None
    if evidence is not None:  # what was read: the source manifest, by digest
        digest = result.reference.rsplit("@", 1)[1]
        attached = source_evidence(args, "convert", src, dst, digest, result.conversion.source.desc, evidence)
    report(args, result, counts(result.stats, "copied"), attached)
    return 0


def register(command: CommandAdder) -> None:
    p = command("convert", cmd_convert)
    p.add_argument("src", metavar="SRC")
    p.add_argument("dst", metavar="DST")
    p.add_argument("--to", required=True, choices=family_choices(), help="family to write")
    p.add_argument("--media-types", choices=[f.value for f in Family], default=Family.CNAI.value,
                   help="ModelPack naming to write with --to modelpack (default cnai)")
    add_override_flags(p)
    add_evidence_flags(p, "convert")
    p.add_argument("-q", "--quiet", "--no-tty", action="store_true", help="no progress bar")
    from ocibridge.transfer.progress_modes import MODES

    p.add_argument("--progress", choices=MODES, default="auto", help="progress display (default auto)")
    add_transfer_flags(p)


def write_options(args: argparse.Namespace) -> WriteOptions:
    from ocibridge.kinds.family import WriteOptions

    return WriteOptions(media_types=Family(args.media_types), overrides=overrides_of(args))


def report(args: argparse.Namespace, result: ConvertResult, counts: str,
           evidence: dict[str, Any] | None = None) -> None:
    """Text: what became what, the copy counts, then one line per field the target lost (and
    the evidence attached, if any)."""
    data: dict[str, Any] = result.as_dict()
    if evidence is not None:
        data["evidence"] = evidence
    if args.json:
        print(json.dumps(data, indent=2, sort_keys=True))
        return
    c = result.conversion
    how = " (the original manifest, restored)" if c.restored else ""
    print(f"converted {args.src} ({c.source_family}) to {result.reference} ({c.target_family}){how}")
    print(f"  {counts}")
    kept = [loss for loss in c.losses if loss.kept]
    if kept:
        print(f"  {len(kept)} field(s) {c.target_family} cannot express are kept in io.ocibridge.origin.* "
              f"annotations: converting back to {c.source_family} restores them")
    for loss in c.losses:
        if not loss.kept:
            print(f"  lost: {loss.field} = {loss.value}")
    for change in c.changes:
        print(f"  changed: {change.field}: {change.value}")
    chunks = result.chunks()
    if chunks is not None:
        print(f"  chunk table {chunks['table']} bound ({chunks['layers']} layer(s)), "
              f"kept by referrer {chunks['referrer']}: lazy reads are verified by chunk")
    if evidence is not None:
        print(evidence_lines(evidence).lstrip("\n"))
