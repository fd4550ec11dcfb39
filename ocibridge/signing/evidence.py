"""Evidence attached to a model manifest: its AI-BOM and its provenance, signed (an in-toto
attestation, :mod:`.attest`) when a key is given, else attached as plain referrers."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ocibridge.core import boundedjson
from ocibridge.oci.models import Descriptor
from ocibridge.stores.base import WritableStore

if TYPE_CHECKING:
    from ocibridge.signing import keys

PROVENANCE_MEDIA_TYPE = "application/vnd.in-toto+json"


@dataclass
class EvidenceOptions:
    """``sbom``: make the AI-BOM; ``provenance``: the SLSA predicate to attach (made by the
    caller, who knows the build); ``key``: sign both as attestations naming ``identity``."""

    sbom: bool = False
    provenance: dict[str, Any] | None = None
    key: keys.PrivateKey | None = None
    identity: str = ""
    repository: str | None = None  # a registry repository, for the BOM's purl
    sbom_time: str | None = None

    @property
    def wanted(self) -> bool:
        return self.sbom or self.provenance is not None


@dataclass
class EvidenceResult:
    written: dict[str, str] = field(default_factory=dict)  # sbom|provenance -> referrer digest
    unchanged: list[str] = field(default_factory=list)
    signed: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"written": self.written, "unchanged": self.unchanged, "signed": self.signed}


def attach_evidence(store: WritableStore, subject: Descriptor, options: EvidenceOptions) -> EvidenceResult:
    """Make and attach what ``options`` asks for; making it twice of the same inputs adds nothing."""
    from ocibridge.signing.attest import attach_document, attest
    from ocibridge.signing.bom import BOM_MEDIA_TYPE, BOM_PREDICATE_TYPE, model_bom
    from ocibridge.signing.provenance import PROVENANCE_PREDICATE_TYPE, provenance_statement

    result = EvidenceResult(signed=options.key is not None)
    items: list[tuple[str, str, str, dict[str, Any]]] = []
    if options.sbom:
        bom = model_bom(store, subject, repository=options.repository, timestamp=options.sbom_time)
        items.append(("sbom", BOM_MEDIA_TYPE, BOM_PREDICATE_TYPE, boundedjson.loads(bom)))
    if options.provenance is not None:
        items.append(("provenance", PROVENANCE_MEDIA_TYPE, PROVENANCE_PREDICATE_TYPE, options.provenance))
    for kind, media_type, predicate_type, predicate in items:
        if options.key is not None:
            desc, new = attest(store, subject, options.key, options.identity, predicate_type, predicate)
        elif kind == "sbom":
            desc, new = attach_document(store, subject, media_type, _document(predicate))
        else:  # unsigned provenance: the statement itself, as in-toto tools keep it
            data = provenance_statement(options.identity, subject.digest, predicate)
            desc, new = attach_document(store, subject, media_type, data)
        result.written[kind] = desc.digest
        if not new:
            result.unchanged.append(kind)
    return result


def _document(doc: dict[str, Any]) -> bytes:
    return (json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()
