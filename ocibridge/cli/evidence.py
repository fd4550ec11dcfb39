"""The evidence flags of ``push`` (``--sbom``, ``--provenance``, ``--attest-key``): a helper of
the transfer group, not a group of its own."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ocibridge.errors import UsageError

if TYPE_CHECKING:
    from ocibridge.signing.evidence import EvidenceOptions

#: push's flags whose values change what is built: the provenance's external parameters
PUSH_FLAGS = ("format", "to", "media_types", "name", "file", "no_build_file", "kind", "layer", "group",
              "no_auto_group", "exclude", "annotation", "chunks", "created")


def add_evidence_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("evidence (docs/signing.md)")
    g.add_argument("--sbom", action="store_true",
                   help="attach the model's AI-BOM (CycloneDX 1.6 ML-BOM; pip install 'ocibridge[evidence]')")
    g.add_argument("--sbom-time", metavar="RFC3339", help="the BOM's timestamp (default: none)")
    g.add_argument("--provenance", action="store_true", help="attach SLSA provenance v1 of this push")
    g.add_argument("--provenance-time", metavar="RFC3339",
                   help="the provenance's startedOn (default: none, so the same push gives the same statement)")
    g.add_argument("--attest-key", metavar="KEY",
                   help="sign the BOM and provenance as in-toto attestations with this key (else attached unsigned)")


def evidence_options(args: argparse.Namespace) -> EvidenceOptions | None:
    """What to attach after the push; None: nothing. The key is loaded and the BOM's library
    looked for here, before anything is sent."""
    if not args.sbom and not args.provenance:
        if args.attest_key or args.sbom_time or args.provenance_time:
            raise UsageError("--attest-key, --sbom-time and --provenance-time go with --sbom or --provenance")
        return None
    from ocibridge.signing.evidence import EvidenceOptions

    if args.sbom:
        from ocibridge.signing.bom import _library

        _library()
    key = None
    if args.attest_key:
        from ocibridge.signing import keys

        key = keys.load_private_key(args.attest_key)
    return EvidenceOptions(sbom=args.sbom, key=key, sbom_time=args.sbom_time)


def push_evidence(args: argparse.Namespace, source: Any, dest: Any, result: Any, options: EvidenceOptions) -> str:
    """Attach the evidence to the pushed manifest; the line(s) to print."""
    from ocibridge.cli.common import transfer_options
    from ocibridge.cli.signing import repository_of
    from ocibridge.kinds.targets import default_store_path, open_store_target
    from ocibridge.oci.reference import LayoutReference
    from ocibridge.signing.evidence import attach_evidence
    from ocibridge.signing.provenance import model_dependencies, predicate
    from ocibridge.stores.base import close_store

    where = dest if dest is not None else LayoutReference(str(default_store_path()))
    target = open_store_target(where, for_write=True, options=transfer_options(args).registry_options())
    options.repository = repository_of(where)
    options.identity = options.repository or target.store.describe()
    try:
        if args.provenance:
            flags = {name: value for name in PUSH_FLAGS
                     if (value := vars(args).get(name)) not in (None, False, [], "")}
            external = {"source": args.source, "destination": args.dest, "flags": flags}
            options.provenance = predicate("push", external,
                                           model_dependencies(target.store, result.descriptor, args.source),
                                           started=args.provenance_time)
        attached = attach_evidence(target.store, result.descriptor, options)
    finally:
        close_store(target.store)
    result.extra["evidence"] = attached.as_dict()
    how = "attestation" if attached.signed else "referrer"
    return "".join(f"\n  {kind} attached ({how}): {digest}" for kind, digest in attached.written.items())
