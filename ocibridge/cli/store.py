"""The everyday store commands of the CLI: list/ls, rm, prune, tag, delete, resolve, attach,
discover. Each parses its flags, calls :mod:`ocibridge.api.store_ops` (delete: ``delete_ops``,
prune: ``prune_ops``), and prints text or ``--json``."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ocibridge.cli.common import (
    CommandAdder,
    add_transfer_flags,
    annotation_values,
    emit,
    ref_command,
    transfer_options,
)
from ocibridge.core.lazyimport import LazyModule
from ocibridge.core.terminal import human_size, one_line

if TYPE_CHECKING:
    from ocibridge import ReferrerNode
    from ocibridge.api import delete_ops, prune_ops, store_ops
else:  # loaded on first use: --help must not load pydantic and httpx
    store_ops = LazyModule("ocibridge.api.store_ops")
    delete_ops = LazyModule("ocibridge.api.delete_ops")
    prune_ops = LazyModule("ocibridge.api.prune_ops")


def cmd_list(args: argparse.Namespace) -> int:
    entries = store_ops.list_models(args.layout, include_attached=args.all)
    if args.json:
        emit(args, [e.as_dict() for e in entries], "")
        return 0
    rows = [("NAME", "TAG", "TOTAL", "CREATED", "FAMILY", "ATTACHED", "DIGEST")]  # TOTAL: manifest, config, layers
    for e in entries:  # the local store's NAME and TAG are typed NAME:TAG (store_ops.list_models)
        tag = e.tag
        attached = str(e.attached) if e.attached else "-"
        if e.subject:
            attached = "to " + e.subject.split(":", 1)[-1][:12]
        rows.append((e.name or "-", tag or "<none>", human_size(e.size), e.created or "-",
                     e.family or "-", attached, e.digest.split(":", 1)[-1][:12]))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    print("\n".join(one_line("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()) for r in rows))
    return 0


def cmd_rm(args: argparse.Namespace) -> int:
    results = [store_ops.remove(ref) for ref in args.refs]
    text = "\n".join(f"removed {r.reference} ({r.digest})" for r in results)
    text += "\nblobs stay until 'ocibridge prune'"
    emit(args, [r.as_dict() for r in results], text)
    return 0


def cmd_prune(args: argparse.Namespace) -> int:
    if args.grace is None:
        args.grace = prune_ops.DEFAULT_PRUNE_GRACE_SECONDS
    result = prune_ops.prune(args.layout, dry_run=args.dry_run, grace_seconds=args.grace)
    verb = "would remove" if args.dry_run else "removed"
    text = f"{verb} {len(result.blobs)} unreferenced blobs ({human_size(result.bytes)})"
    if result.kept_recent:
        text += f"; kept {result.kept_recent} newer than {args.grace:g} s (a push may be running)"
    if args.dry_run and result.blobs:
        text += "".join(f"\n  {b}" for b in result.blobs)
    emit(args, result.as_dict(), text)
    return 0


def cmd_tag(args: argparse.Namespace) -> int:
    result = store_ops.tag(args.ref, args.tags, transfer=transfer_options(args))
    emit(args, result.as_dict(), "\n".join(f"tagged {t} -> {result.digest}" for t in result.tags))
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    result = delete_ops.delete(args.ref, transfer=transfer_options(args), force=args.force, dry_run=args.dry_run)
    verb = "would delete" if result.dry_run else "deleted"
    lines = [f"{verb} {result.digest} ({args.ref})", *(f"  tag {t}" for t in result.tags),
             *(f"  manifest {d}" for d in result.referrers)]  # referrers, and what attachment tags named
    emit(args, result.as_dict(), "\n".join(map(one_line, lines)))  # tags are the registry's text
    return 0


def cmd_resolve(args: argparse.Namespace) -> int:
    result = store_ops.resolve(args.ref, transfer=transfer_options(args))
    emit(args, result.as_dict(), result.digest)
    return 0


def cmd_attach(args: argparse.Namespace) -> int:
    annotations = annotation_values(args.annotation)
    result = store_ops.attach(args.subject, args.files, artifact_type=args.artifact_type,
                              annotations=annotations, transfer=transfer_options(args))
    emit(args, result.as_dict(),
          f"attached {result.artifact_type} to {result.subject.digest}\n  {result.reference}")
    return 0


def cmd_discover(args: argparse.Namespace) -> int:
    result = store_ops.discover(args.ref, artifact_type=args.artifact_type, transfer=transfer_options(args),
                                tree=not args.json)  # the text draws the referrers of referrers too
    if args.json:
        emit(args, result.as_dict(), "")
        return 0
    print(result.subject.digest)
    for i, node in enumerate(result.tree):
        last = i == len(result.tree) - 1
        ref = node.descriptor
        print(one_line(f"{'└── ' if last else '├── '}{store_ops.referrer_label(ref)}"))
        pad = "    " if last else "│   "
        print(f"{pad}└── {ref.digest}")
        for depth, below in _below(node.referrers):
            sub = below.descriptor
            print(one_line(f"{pad}{'    ' * (depth + 1)}└── {store_ops.referrer_label(sub)} {sub.digest}"))
    return 0


def _below(nodes: tuple[ReferrerNode, ...], depth: int = 0) -> Iterator[tuple[int, ReferrerNode]]:
    """Each node with its depth, depth-first."""
    for node in nodes:
        yield depth, node
        yield from _below(node.referrers, depth + 1)


def register(command: CommandAdder) -> None:
    """Add the store commands (list/ls, rm, prune, tag, delete, resolve, attach, discover)."""
    p = command("list", cmd_list)
    p.add_argument("layout", metavar="LAYOUT", nargs="?", help="oci:PATH (default: the local store)")
    p.add_argument("-a", "--all", action="store_true",
                   help="list signatures and other attached artifacts too (counted under ATTACHED), and the "
                        "names ocibridge serve keeps for itself (NAME:ocibridge-commit-<id>)")

    p = command("rm", cmd_rm)
    p.add_argument("refs", metavar="REF", nargs="+", help="NAME[:TAG] (local store), oci:PATH:TAG or oci:PATH@DIGEST")

    p = command("prune", cmd_prune)
    p.add_argument("layout", metavar="LAYOUT", nargs="?", help="oci:PATH (default: the local store)")
    p.add_argument("--dry-run", action="store_true", help="say what would be removed, remove nothing")
    p.add_argument("--grace", type=_seconds, metavar="SECONDS",  # None: store_ops' default
                   help="keep unreferenced blobs younger than this: a push may be writing them (default 300)")

    p = ref_command(command, "tag", cmd_tag)
    p.add_argument("tags", metavar="TAG", nargs="+",
                   help="for a local NAME[:TAG]: TAG (NAME:TAG) or another NAME:TAG")
    add_transfer_flags(p)

    p = ref_command(command, "delete", cmd_delete)
    p.add_argument("-f", "--force", action="store_true",
                   help="delete even when other tags, signature tags or referrers (signatures, chunk "
                        "tables, attestations) go with the manifest")
    p.add_argument("--dry-run", action="store_true", help="list the tags and manifests that would go; delete nothing")
    add_transfer_flags(p)

    p = ref_command(command, "resolve", cmd_resolve)
    add_transfer_flags(p)

    p = command("attach", cmd_attach)
    p.add_argument("subject", metavar="REF")
    p.add_argument("files", metavar="FILE", nargs="*", default=[])  # a default: argparse names a bare "*" as required
    p.add_argument("--artifact-type", required=True, metavar="TYPE", help="the artifact's type (a media type)")
    p.add_argument("-a", "--annotation", action="append", default=[], metavar="KEY=VALUE",
                   help="manifest annotation (repeatable)")
    add_transfer_flags(p)

    p = ref_command(command, "discover", cmd_discover)
    p.add_argument("--artifact-type", metavar="TYPE", help="only referrers of this type")
    add_transfer_flags(p)


def _seconds(text: str) -> float:
    value = float(text)
    if not value >= 0:  # nan too: no blob's age compares with it, so none would be kept as recent
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value
