"""The evidence flags (``--sbom``, ``--provenance``, ``--attest-key``) of the commands that write a
model (push, convert, copy): a helper of their groups, not a group of its own (the ``attest``
command is cli/evidence.py's). The flags become the :class:`~ocibridge.api.options.AttestOptions`
of the command's one API call, which attaches the evidence to what it wrote."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ocibridge.cli.args import given
from ocibridge.core.lazyimport import LazyModule
from ocibridge.errors import UsageError

if TYPE_CHECKING:
    from ocibridge.api import options as api_options
else:  # loaded when a command runs: --help needs none of it
    api_options = LazyModule("ocibridge.api.options")

#: per command, the flags whose values change what is written: the provenance's external parameters
RESULT_FLAGS = {
    "push": ("format", "to", "media_types", "name", "file", "no_build_file", "kind", "layer", "group",
             "no_auto_group", "exclude", "annotation", "chunks", "created"),
    "convert": ("to", "media_types"),
    "copy": ("referrers",),
    "serve": (),  # a commit's facts (parent, uploader) are the provenance's own parameters
}


def add_evidence_flags(p: argparse.ArgumentParser, what: str = "push") -> None:
    g = p.add_argument_group("evidence (docs/signing.md)")
    g.add_argument("--sbom", action="store_true",
                   help="attach the model's AI-BOM (CycloneDX 1.6 ML-BOM; pip install 'ocibridge[evidence]')")
    g.add_argument("--sbom-time", type=given, metavar="RFC3339",
                   help="the BOM's timestamp (default: none)")
    g.add_argument("--provenance", action="store_true", help=f"attach SLSA provenance v1 of this {what}")
    g.add_argument("--provenance-time", type=given, metavar="RFC3339",
                   help=f"the provenance's startedOn (default: none, so the same {what} gives the same statement)")
    g.add_argument("--attest-key", metavar="KEY",
                   help="sign the BOM and provenance as in-toto attestations with this key (else attached unsigned)")


def attest_options(args: argparse.Namespace, command: str) -> api_options.AttestOptions | None:
    """What ``command`` attaches after writing; None: nothing. The API loads the key and looks
    for the BOM's library before anything is sent."""
    if not args.sbom and not args.provenance:
        if args.attest_key or args.sbom_time or args.provenance_time:
            raise UsageError("--attest-key, --sbom-time and --provenance-time go with --sbom or --provenance")
        return None
    return api_options.AttestOptions(sbom=args.sbom, provenance=args.provenance, key=args.attest_key,
                                     sbom_time=args.sbom_time, provenance_time=args.provenance_time,
                                     parameters=result_flags(args, command))


def result_flags(args: argparse.Namespace, command: str) -> dict[str, Any]:
    """The flags of ``command`` that change its result, as given (unset ones left out)."""
    values = vars(args)
    flags = {name: value for name in RESULT_FLAGS[command] if (value := values.get(name)) not in (None, False, [], "")}
    flags.update({name: value for name, value in sorted(values.items())
                  if name.startswith("set_") and value is not None})  # --arch, --license, ...
    return flags


def evidence_lines(attached: dict[str, Any]) -> str:
    """The text lines saying what was attached."""
    how = "attestation" if attached["signed"] else "referrer"
    return "".join(f"\n  {kind} attached ({how}): {digest}" for kind, digest in attached["written"].items())
