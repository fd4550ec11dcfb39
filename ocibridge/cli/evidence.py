"""The evidence flags (``--sbom``, ``--provenance``, ``--attest-key``) of the commands that write
a model (push, convert, copy): a helper of their groups, not a group of its own. Each command
says what was given and what was read; attaching is the same for all."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ocibridge.errors import UsageError

if TYPE_CHECKING:
    from ocibridge.kinds.locators import Locator
    from ocibridge.oci.models import Descriptor
    from ocibridge.signing.evidence import EvidenceOptions
    from ocibridge.stores.base import Store

#: per command, the flags whose values change what is written: the provenance's external parameters
RESULT_FLAGS = {
    "push": ("format", "to", "media_types", "name", "file", "no_build_file", "kind", "layer", "group",
             "no_auto_group", "exclude", "annotation", "chunks", "created"),
    "convert": ("to", "media_types"),
    "copy": ("referrers",),
}


def add_evidence_flags(p: argparse.ArgumentParser, what: str = "push") -> None:
    g = p.add_argument_group("evidence (docs/signing.md)")
    g.add_argument("--sbom", action="store_true",
                   help="attach the model's AI-BOM (CycloneDX 1.6 ML-BOM; pip install 'ocibridge[evidence]')")
    g.add_argument("--sbom-time", metavar="RFC3339", help="the BOM's timestamp (default: none)")
    g.add_argument("--provenance", action="store_true", help=f"attach SLSA provenance v1 of this {what}")
    g.add_argument("--provenance-time", metavar="RFC3339",
                   help=f"the provenance's startedOn (default: none, so the same {what} gives the same statement)")
    g.add_argument("--attest-key", metavar="KEY",
                   help="sign the BOM and provenance as in-toto attestations with this key (else attached unsigned)")


def evidence_options(args: argparse.Namespace) -> EvidenceOptions | None:
    """What to attach after the command; None: nothing. The key is loaded and the BOM's library
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


def refuse_unattachable(dest: Locator | None, options: EvidenceOptions | None) -> None:
    """Evidence goes on as referrers of the manifest written. The local Ollama store keeps
    models, no referrers: checked before the command writes, since after it the model is there
    and only the attach fails (with a message about blob types)."""
    from ocibridge.oci.reference import OllamaReference

    if options is not None and isinstance(dest, OllamaReference) and not dest.remote:
        raise UsageError(f"--sbom and --provenance attach referrers, which {dest} cannot hold (the Ollama "
                         "store keeps models only): write to a registry or an oci: layout, then pull it into Ollama")


def result_flags(args: argparse.Namespace, command: str) -> dict[str, Any]:
    """The flags of ``command`` that change its result, as given (unset ones left out)."""
    values = vars(args)
    flags = {name: value for name in RESULT_FLAGS[command] if (value := values.get(name)) not in (None, False, [], "")}
    flags.update({name: value for name, value in sorted(values.items())
                  if name.startswith("set_") and value is not None})  # --arch, --license, ...
    return flags


#: what a command read, once the written manifest's store is open: resolvedDependencies
Dependencies = Callable[["Store", "Descriptor"], list[dict[str, Any]]]


def attach_after(args: argparse.Namespace, command: str, where: Locator | None, digest: str,
                 options: EvidenceOptions, external: dict[str, Any], dependencies: Dependencies) -> dict[str, Any]:
    """Attach the evidence to the manifest ``digest`` written at ``where`` (None: the local
    store); ``external`` are the command's external parameters (its flags are added here).
    Returns the evidence's JSON (written referrers by kind, unchanged kinds, signed)."""
    from ocibridge.cli.common import transfer_options
    from ocibridge.cli.signing import repository_of
    from ocibridge.kinds.targets import default_store_path, open_store_target
    from ocibridge.oci.reference import LayoutReference
    from ocibridge.signing.evidence import attach_evidence
    from ocibridge.signing.provenance import predicate
    from ocibridge.stores.base import close_store

    place = where if where is not None else LayoutReference(str(default_store_path()))
    target = open_store_target(place, for_write=True, options=transfer_options(args).registry_options())
    options.repository = repository_of(place)
    options.identity = options.repository or target.store.describe()
    try:
        subject = target.store.resolve(digest)
        if args.provenance:
            options.provenance = predicate(command, {**external, "flags": result_flags(args, command)},
                                           dependencies(target.store, subject), started=args.provenance_time)
        attached = attach_evidence(target.store, subject, options)
    finally:
        close_store(target.store)
    return attached.as_dict()


def evidence_lines(attached: dict[str, Any]) -> str:
    """The text lines saying what was attached."""
    how = "attestation" if attached["signed"] else "referrer"
    return "".join(f"\n  {kind} attached ({how}): {digest}" for kind, digest in attached["written"].items())


def push_evidence(args: argparse.Namespace, source: Any, dest: Locator | None, result: Any,
                  options: EvidenceOptions) -> str:
    """Attach the evidence to the pushed manifest; the line(s) to print."""
    from ocibridge.signing.provenance import model_dependencies

    attached = attach_after(args, "push", dest, result.descriptor.digest, options,
                            {"source": args.source, "destination": args.dest},
                            lambda store, subject: model_dependencies(store, subject, args.source))
    result.extra["evidence"] = attached
    return evidence_lines(attached)


def source_evidence(args: argparse.Namespace, command: str, src: Locator, dst: Locator, digest: str,
                    source: Descriptor, options: EvidenceOptions) -> dict[str, Any]:
    """Attach the evidence of a command that made ``digest`` at ``dst`` from the manifest
    ``source`` at ``src`` (convert, copy): that manifest, by digest, is what was read."""
    from ocibridge.kinds.locators import text_of
    from ocibridge.signing.provenance import locator_uri, manifest_dependency

    return attach_after(args, command, dst, digest, options,
                        {"source": text_of(src), "destination": text_of(dst)},
                        lambda store, subject: [manifest_dependency(locator_uri(src), source)])
