"""``ocibridge convert SRC DST --to FAMILY``: parse, one call of :func:`ocibridge.api.convert.convert`,
print. Also the metadata flags (``--arch`` & co.) every writer takes (push too)."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from ocibridge.api import choices
from ocibridge.cli.chunk_flags import add_chunk_flags, chunk_choice_given
from ocibridge.cli.common import CommandAdder, add_transfer_flags, counts, transfer_options
from ocibridge.cli.evidence_flags import add_evidence_flags, attest_options, evidence_lines
from ocibridge.cli.progress_flags import add_progress_flags, progress_display
from ocibridge.core.lazyimport import LazyModule

if TYPE_CHECKING:
    from ocibridge import ConvertResult
    from ocibridge.api import convert as api_convert
else:  # the families are loaded only when a conversion runs
    api_convert = LazyModule("ocibridge.api.convert")

#: override flags (``--param-size`` ...) and what each sets, for --help
OVERRIDE_HELP = {
    "arch": "config.architecture", "family": "descriptor.family", "format": "config.format",
    "param_size": "config.paramSize", "precision": "config.precision", "quantization": "config.quantization",
    "version": "descriptor.version", "license": "descriptor.licenses (one SPDX id)",
    "description": "descriptor.description", "name": "descriptor.name",
}


#: metadata flags whose plain name is taken by the program or the command, and how they are
#: spelt instead (the former spelling still works, hidden: docs/cli.md)
RENAMED = {"version": "model-version"}


def add_override_flags(p: argparse.ArgumentParser, *, skip: tuple[str, ...] = (),
                       renamed: dict[str, str] | None = None) -> None:
    """``--arch``, ``--family``, ... : set a descriptor/config field of the written artifact.
    ``renamed`` spells a flag otherwise where the command already has that name (push's
    ``--format`` is the source format, so the model format is ``--model-format`` there).
    ``--version`` is ``--model-version`` (``ocibridge --version`` is the program's): the
    former spelling is kept as a hidden alias after the command's name."""
    g = p.add_argument_group("metadata (set or override a field of the written config)")
    spelling = {**RENAMED, **(renamed or {})}
    for flag in choices.metadata_fields():
        if flag in skip:
            continue
        spelled = spelling.get(flag, flag.replace("_", "-"))
        g.add_argument(f"--{spelled}", dest=f"set_{flag}", metavar="VALUE", help=f"set {OVERRIDE_HELP[flag]}")
        if flag in RENAMED:  # deprecated: the former spelling, one release more
            g.add_argument(f"--{flag.replace('_', '-')}", dest=f"set_{flag}", metavar="VALUE", help=argparse.SUPPRESS)


def overrides_of(args: argparse.Namespace) -> dict[str, str]:
    return {flag: value for flag in choices.metadata_fields()
            if (value := getattr(args, f"set_{flag}", None)) is not None}


def family_choices() -> list[str]:
    return choices.families()


def cmd_convert(args: argparse.Namespace) -> int:
    chunks = chunk_choice_given(args)
    attest = attest_options(args, "convert")
    bar = progress_display(args, "convert")
    try:
        result = api_convert.convert(args.src, args.dst, args.to, media_types=args.media_types,
                                     overrides=overrides_of(args), transfer=transfer_options(args), progress=bar,
                                     attest=attest, chunks=chunks)
    finally:
        if bar:
            bar.close()
    report(args, result, counts(result.stats, "copied"))
    return 0


def register(command: CommandAdder) -> None:
    p = command("convert", cmd_convert)
    p.add_argument("src", metavar="SRC")
    p.add_argument("dst", metavar="DST")
    p.add_argument("--to", required=True, choices=family_choices(), help="family to write")
    p.add_argument("--media-types", choices=choices.media_type_families(), default=choices.DEFAULT_MEDIA_TYPES,
                   help="ModelPack naming to write with --to modelpack (default cnai)")
    add_override_flags(p)
    add_evidence_flags(p, "convert")
    add_chunk_flags(p, "convert")
    add_progress_flags(p)
    add_transfer_flags(p)


def report(args: argparse.Namespace, result: ConvertResult, counts: str) -> None:
    """Text: what became what, the copy counts, then one line per field the target lost (and
    the evidence attached, if any)."""
    data: dict[str, Any] = result.as_dict()
    evidence = data.get("evidence")
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
