"""``push``, ``pull`` and ``copy``: parse their flags, build the option values, make one call of
:mod:`ocibridge.api.model_ops` (or :mod:`ocibridge.api.copy`, which loads none of push's and
pull's modules), print the counts."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

import ocibridge
from ocibridge.api import choices
from ocibridge.cli.args import given
from ocibridge.cli.chunk_flags import add_chunk_flags, add_table_shape_flags, chunk_choice, chunk_choice_given
from ocibridge.cli.common import CommandAdder, add_file_glob_flags, add_transfer_flags, counts, emit, transfer_options
from ocibridge.cli.common import annotation_values as _annotations
from ocibridge.cli.convert import add_override_flags, family_choices, overrides_of
from ocibridge.cli.evidence_flags import add_evidence_flags, attest_options, evidence_lines
from ocibridge.cli.progress_flags import add_progress_flags, progress_display
from ocibridge.cli.signing import add_verify_flags, policy_from_args
from ocibridge.core.lazyimport import LazyModule
from ocibridge.core.terminal import human_size
from ocibridge.errors import UsageError

if TYPE_CHECKING:
    from ocibridge import BuildOptions, Kind, Variant
    from ocibridge.api import copy as api_copy
    from ocibridge.api import model_ops as api
    from ocibridge.api import options as api_options
else:  # loaded on first use: --help and --version need neither pydantic nor httpx
    api = LazyModule("ocibridge.api.model_ops")
    api_copy = LazyModule("ocibridge.api.copy")  # copy: without the modules of push and pull
    api_options = LazyModule("ocibridge.api.options")


def _layer_variants(items: list[str]) -> tuple[dict[Kind, Variant], set[Kind]]:
    variants: dict[Kind, Variant] = {}
    group: set[Kind] = set()
    for item in items:
        kind, sep, variant = item.partition("=")
        try:
            k = ocibridge.Kind(kind)
            v = ocibridge.Variant(variant)
        except ValueError:
            raise UsageError(
                f"--layer expects KIND=VARIANT (kinds: {', '.join(choices.layer_kinds())}; "
                f"variants: {', '.join(choices.layer_variants())}), got {item!r}"
            ) from None
        if not sep:
            raise UsageError(f"--layer expects KIND=VARIANT, got {item!r}")
        variants[k] = v
    return variants, group


def _build_options(args: argparse.Namespace) -> BuildOptions:
    variants, group = _layer_variants(args.layer)
    created = None
    if args.created:
        try:
            created = api_options.created_time(args.created)
        except ValueError:
            raise UsageError(f"--created {args.created!r}: not an RFC 3339 date-time such as "
                             "2025-01-01T00:00:00Z (or give no value: now)") from None
    group |= {ocibridge.Kind(k) for k in args.group}
    return ocibridge.BuildOptions(
        family=ocibridge.Family(args.media_types),
        variants=variants,
        group=group,
        auto_group=not args.no_auto_group,
        created_at=created,
        annotations=_annotations(args.annotation),
    )


def _push_options(args: argparse.Namespace) -> api_options.PushOptions:
    build = _build_options(args)
    chunking = chunk_choice(args)
    try:
        kinds = api_options.kind_overrides(args.kind)
    except ValueError as e:
        raise UsageError(str(e)) from None
    return api_options.PushOptions(
        format=args.format,
        to=args.to,
        name=args.name,
        overrides=overrides_of(args),
        kind_overrides=kinds,
        excludes=tuple(args.exclude),
        build=build,
        build_file=args.file,
        use_build_file=not args.no_build_file,
        chunks=chunking.chunks,
        chunk_threshold=chunking.threshold,
        chunk_hash=chunking.algorithm,
        scan=args.scan,
        scan_key=args.scan_key,
    )


def cmd_push(args: argparse.Namespace) -> int:
    options = _push_options(args)
    if args.signature:  # an OMS signature of SOURCE: checked to sign exactly its files before a byte
        # is sent, kept out of the model's files, attached to what was pushed
        options = dataclasses.replace(options, oms_signature=args.signature)
    attest = attest_options(args, "push")
    if args.tag_dest is not None:
        if args.dest is not None:
            raise UsageError(f"push takes DEST or -t/--tag, not both ({args.dest}, {args.tag_dest})")
        args.dest = args.tag_dest
    bar = progress_display(args, "push")
    try:
        result = api.push(args.source, args.dest, options=options, transfer=transfer_options(args),
                          attest=attest, progress=bar)
    finally:
        if bar:
            bar.close()
    text = f"pushed {result.reference}\n  {counts(result.stats, 'uploaded')}"
    if "evidence" in result.extra:
        text += evidence_lines(result.extra["evidence"])
    if "signature" in result.extra:
        text += f"\n  OMS signature attached: {result.extra['signature']}"
    if "scan" in result.extra:
        scan = result.extra["scan"]
        held = f"quarantined: {scan['finding']}; " if scan["quarantined"] else ""
        how = "signed" if scan["signed"] else "unsigned"
        text += f"\n  scan: {scan['verdict']}, {held}report {scan['report']} ({how})"
    emit(args, result.as_dict(), text)
    return 0


def cmd_pull(args: argparse.Namespace) -> int:
    if (args.dest is None) == (args.output is None):
        raise UsageError("pull needs one destination: DEST or -o/--output DIR")
    args.dest = args.output if args.dest is None else args.dest
    dest = api.pull_destination(args.dest, args.format)  # the edge: located once (SRC: by the API)
    # exports into an archive or the Ollama store report no progress (yet): no frozen bar
    export = not dest.shows_progress
    bar = progress_display(args, "pull", machine_output=export)
    on_existing = "overwrite" if args.overwrite else "keep" if args.keep_old_files else "refuse"
    try:
        wanted = api_options.PullOptions(format=args.format, include=tuple(args.include),
                                         exclude=tuple(args.pull_exclude), on_existing=on_existing,
                                         with_signatures=args.with_signatures,
                                         with_attestations=args.with_attestations)
        result = api.pull(args.src, dest, options=wanted, transfer=transfer_options(args), progress=bar,
                          verify=policy_from_args(args))
    finally:
        if bar:
            bar.close()
    if result.format == "directory":
        count, size = len(result.files), human_size(result.bytes)
        text = f"pulled {result.digest} into {args.dest}: {count} files, {size}"
        if result.signature:
            text += f"; OMS signature in {result.signature}"
        if result.attestations is not None:
            text += f"; {len(result.attestations)} attestation(s) in {Path(args.dest) / '.ocibridge' / 'attestations'}"
            if result.attestations_left_out:
                text += f" ({result.attestations_left_out} unsigned left out: no key vouches for them)"
        if result.kept:
            text += f"; kept {len(result.kept)} existing files that differ: {', '.join(result.kept)}"
    else:
        text = f"pulled {result.digest} to {args.dest}"
    emit(args, result.as_dict(), text)
    return 0


def _add_pull_file_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("into a directory")
    add_file_glob_flags(g, "unmatched layers are not fetched", exclude_dest="pull_exclude")
    g.add_argument("--with-signatures", action="store_true",
                   help="write the model's OMS signature beside the files as model.sig (OpenSSF model "
                        "signing tools verify the directory with it); the pulled files are checked against it")
    g.add_argument("--with-attestations", action="store_true",
                   help="write the model's attestations (AI-BOM, provenance; signed or not) under "
                        "DIR/.ocibridge/attestations/, verified first with --verify-key (docs/signing.md)")
    mode = g.add_mutually_exclusive_group()
    mode.add_argument("--overwrite", "--force", action="store_true",
                      help="replace existing files that differ (also an existing archive DEST)")
    mode.add_argument("-k", "--keep-old-files", action="store_true", help="keep existing files that differ")


def cmd_copy(args: argparse.Namespace) -> int:
    chunks = chunk_choice_given(args)
    attest = attest_options(args, "copy")
    bar = progress_display(args, "copy")
    try:
        result = api_copy.copy_reference(args.src, args.dst, referrers=args.referrers, transfer=transfer_options(args),
                                         progress=bar, verify=policy_from_args(args), attest=attest, chunks=chunks)
    finally:
        if bar:
            bar.close()
    s = result.stats
    referrers = f", {len(s.referrers)} referrers" if args.referrers else ""
    text = f"copied {args.src} to {result.reference}\n  {counts(s, 'copied')}{referrers}"
    if "evidence" in result.extra:
        text += evidence_lines(result.extra["evidence"])
    emit(args, result.as_dict(), text)
    return 0


def register(command: CommandAdder) -> None:
    p = command("push", cmd_push)
    p.add_argument("source", metavar="SOURCE")
    p.add_argument("dest", metavar="DEST", nargs="?",
                   help="NAME[:TAG] (the local store), oci:PATH:TAG or host/repo:tag "
                        "(default: the local store, NAME:VERSION of the model, else DIRNAME:latest)")
    p.add_argument("-t", "--tag", dest="tag_dest", metavar="NAME:TAG",
                   help="DEST as kit, modctl and docker spell it")
    p.add_argument("--format", choices=["auto", *choices.source_formats()], default=None,
                   help="source format (default: by extension, else by content)")
    p.add_argument("--media-types", choices=choices.media_type_families(), default=choices.DEFAULT_MEDIA_TYPES,
                   help="ModelPack naming family to write (default cnai)")
    p.add_argument("--name", help="model name (default: from the source)")
    p.add_argument("-f", "--file", metavar="FILE",
                   help="a Modelfile (modctl) or Kitfile (KitOps) naming the files of SOURCE and their metadata "
                        "(default: a Kitfile or Modelfile at the top of SOURCE)")
    p.add_argument("--no-build-file", action="store_true",
                   help="pack a top-level Kitfile or Modelfile as a plain file instead of reading it")
    p.add_argument("--to", choices=family_choices(), default=None,
                   help="model family to write (default modelpack)")
    add_override_flags(p, skip=("name",), renamed={"format": "model-format"})
    p.add_argument("--kind", action="append", default=[], metavar="GLOB=KIND",
                   help="override the inferred kind of matching files (repeatable)")
    p.add_argument("--layer", action="append", default=[], metavar="KIND=VARIANT",
                   help="layer variant per kind: raw, tar, tar+gzip, tar+zstd (repeatable)")
    p.add_argument("--group", action="append", default=[], choices=choices.layer_kinds(),
                   help="pack all files of this kind into one tar layer (repeatable)")
    p.add_argument("--no-auto-group", action="store_true",
                   help="never group many small files into one tar layer automatically")
    p.add_argument("--signature", metavar="FILE",
                   help="an OMS signature of SOURCE (model_signing's model.sig): checked to sign exactly its "
                        "files, then attached to the pushed artifact (and left out of its files)")
    p.add_argument("--exclude", action="append", default=[], metavar="GLOB",
                   help="leave out matching files (repeatable)")
    p.add_argument("--scan", choices=("off", "refuse", "quarantine"), default="off",
                   help="scan SOURCE's files by content first: refuse it when flagged (nothing is written), or "
                        "quarantine it (pushed, its flagged report attached: a policy asking for a clean scan "
                        "refuses its use); the report is attached to what was pushed (pip install "
                        "'ocibridge[scan]'; default off)")
    p.add_argument("--scan-key", metavar="KEY", help="sign the scan report with this private key, as sign takes it")
    add_evidence_flags(p)
    p.add_argument("-a", "--annotation", action="append", default=[], metavar="KEY=VALUE",
                   help="manifest annotation (repeatable)")
    chunking = p.add_mutually_exclusive_group()
    chunking.add_argument("--chunks", action="store_true",
                          help="bind a chunk table of the large raw files in the manifest, for verified lazy "
                               "reads (the default; made in the read that hashes them; docs/lazy.md)")
    chunking.add_argument("--no-chunks", action="store_true",
                          help="bind no chunk table: a lazy read of a file moves all of it")
    add_table_shape_flags(p)
    p.add_argument("--created", nargs="?", const="now", default=None, type=given, metavar="RFC3339",
                   help="set descriptor.createdAt (now, honouring SOURCE_DATE_EPOCH, or a time)")
    add_progress_flags(p)
    add_transfer_flags(p)

    p = command("pull", cmd_pull)
    p.add_argument("src", metavar="SRC",
                   help="the model: host/repo[:tag|@digest], oci:PATH[:TAG], a local NAME[:TAG], ollama:NAME")
    p.add_argument("dest", metavar="DEST", nargs="?",
                   help=f"{choices.source_kinds()} or a store")
    p.add_argument("-o", "--output", metavar="DIR", help="DEST as oras spells it")
    p.add_argument("--format", choices=["auto", *choices.source_formats()], default=None,
                   help="what to write at DEST (default auto: by its name: *.carton, *.mlarchive, else a "
                        "directory); given, it overrides the name")
    _add_pull_file_flags(p)
    add_progress_flags(p)
    add_verify_flags(p)
    add_transfer_flags(p, uploads=False)

    p = command("copy", cmd_copy)
    p.add_argument("src", metavar="SRC")
    p.add_argument("dst", metavar="DST")
    p.add_argument("-r", "--referrers", "--recursive", action="store_true",
                   help="copy signatures and other referrers too (oras: --recursive)")
    add_evidence_flags(p, "copy")
    add_chunk_flags(p, "copy")
    add_progress_flags(p)
    add_verify_flags(p)
    add_transfer_flags(p)

