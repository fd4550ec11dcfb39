"""The ``attest`` command: parse, one call of :func:`ocibridge.api.evidence.attest`, print. The
evidence flags of push, copy and convert are cli/evidence_flags.py's."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ocibridge.cli.args import given
from ocibridge.cli.common import CommandAdder, add_signed_name, add_signing_key, emit, transfer_options
from ocibridge.core.lazyimport import LazyModule

if TYPE_CHECKING:
    from ocibridge.api import evidence as api_evidence
else:  # loaded when the command runs: --help needs none of it
    api_evidence = LazyModule("ocibridge.api.evidence")


def cmd_attest(args: argparse.Namespace) -> int:
    result = api_evidence.attest(args.ref, sbom=args.sbom, provenance=args.provenance, key=args.key,
                                 identity=args.identity, sbom_time=args.sbom_time, transfer=transfer_options(args))
    where = ", ".join(f"{kind}: {place}" for kind, place in result.written.items())
    same = f" (already there: {', '.join(result.unchanged)})" if result.unchanged else ""
    emit(args, result.as_dict(), f"attested {args.ref} ({result.digest})\n  {where}{same}")
    return 0


def register(command: CommandAdder) -> None:
    """Add ``attest``."""
    p = add_signing_key(command("attest", cmd_attest),
                        "ECDSA P-256 private key, as sign takes it (password in $COSIGN_PASSWORD)")
    p.add_argument("--sbom", action="store_true",
                   help="attest the model's AI-BOM (CycloneDX 1.6 ML-BOM; pip install 'ocibridge[evidence]')")
    p.add_argument("--sbom-time", type=given, metavar="RFC3339",
                   help="the BOM's timestamp (default: none)")
    p.add_argument("--provenance", metavar="FILE",
                   help="attest this SLSA provenance v1 predicate (a JSON file, as push --provenance makes it)")
    add_signed_name(p, "repository name the statement's subject names (default: where REF is)")
