"""``ocibridge save`` and ``ocibridge load``: several models in one bundle file, carried into a site with no
network to the registry they came from (as ``oras backup/restore`` and ``podman save/load``)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ocibridge.cli.common import CommandAdder, add_transfer_flags, emit, plural, transfer_options
from ocibridge.cli.progress_flags import add_progress_flags, progress_display
from ocibridge.cli.signing import add_verify_flags, policy_from_args
from ocibridge.core.lazyimport import LazyModule
from ocibridge.core.terminal import one_line

if TYPE_CHECKING:
    from ocibridge.api import bundle
    from ocibridge.api.bundle import BundleResult
else:  # loaded on first use: --help must not load pydantic and httpx
    bundle = LazyModule("ocibridge.api.bundle")


@contextmanager
def _progress(args: argparse.Namespace, label: str) -> Iterator[Any]:
    """The bar (or plain lines) ``--progress`` asks for, closed however the command ends."""
    bar = progress_display(args, label)
    try:
        yield bar
    finally:
        if bar:
            bar.close()


def cmd_save(args: argparse.Namespace) -> int:
    with _progress(args, "save") as bar:
        result = bundle.save(args.refs, args.output, transfer=transfer_options(args), verify=policy_from_args(args),
                             progress=bar)
    return _said(args, result, f"bundled {{}} into {result.path}",
                 [f"{e.tag}  {e.digest}  {e.reference}" for e in result.entries])


def cmd_load(args: argparse.Namespace) -> int:
    if args.list:
        return cmd_list(args)
    with _progress(args, "load") as bar:
        result = bundle.load(args.bundle, args.prefix, transfer=transfer_options(args), progress=bar,
                             verify=policy_from_args(args))
    return _said(args, result, f"loaded {{}} from {result.path}", list(result.destinations))


def _said(args: argparse.Namespace, result: BundleResult, first: str, rows: list[str]) -> int:
    """The summary of save and load: ``first`` with the counts in its ``{}``, then a row each."""
    counted = f"{plural(len(result.entries), 'model')} ({plural(result.signatures, 'signature')})"
    lines = [first.format(counted), *(f"  {row}" for row in rows)]
    emit(args, result.as_dict(), "\n".join(one_line(x) for x in lines))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    result = bundle.list_bundle(args.bundle)
    lines = [f"{e.tag}  {e.digest}  {e.reference}" for e in result.entries]
    emit(args, result.as_dict(), "\n".join(one_line(x) for x in lines))
    return 0


def register(command: CommandAdder) -> None:
    p = command("save", cmd_save)
    p.add_argument("refs", metavar="REF", nargs="+")
    p.add_argument("-o", "--output", metavar="FILE", required=True, help="the bundle (a tar holding an OCI layout)")
    add_verify_flags(p)
    add_progress_flags(p)
    add_transfer_flags(p)
    p = command("load", cmd_load)
    p.add_argument("bundle", metavar="FILE")
    p.add_argument("prefix", metavar="PREFIX", nargs="?",
                   help="host[/path] (each model keeps its repository and tag) or oci:DIR; default: the local "
                        "store, each model as NAME:TAG (NAME the last part of its repository)")
    p.add_argument("--list", action="store_true", help="only list the models the bundle holds")
    add_verify_flags(p)
    add_progress_flags(p)
    add_transfer_flags(p)
