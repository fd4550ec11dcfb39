"""Evidence on publish: a commit serve pushes is signed (cosign's way, as ``ocibridge sign``
signs) and given its AI-BOM and SLSA provenance (as ``push --sbom --provenance`` attaches them)
*before* the branch's tag moves to it.

The order is the guarantee: the commit's manifest is pushed by digest only (no tag), the
signature and attestations go on that digest, and only then are its commit tag and the branch's
tag written (:mod:`.landing`). A commit whose signing or attestation fails is refused
(:class:`EvidenceFailed`) with the tag where it was: no reader of the branch ever sees an
unsigned head, and a containers policy requiring ``sigstoreSigned`` accepts every head the branch
has had. What is left of a refused commit is an untagged manifest, which a registry's garbage
collection removes.

The provenance (build type ``https://ocibridge.dev/slsa/publish/v1``) names what a commit is:
the destination, the parent commit (its id as the Hub's API shows it, and its manifest as a
resolved dependency, by digest), the uploader (the name of the ``--token-file`` token that
wrote it) and the commit's summary; its files by SHA-256, as push's provenance lists them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ocibridge.errors import OcibridgeError
from ocibridge.hubserver.repo.commits import AUTHOR, PARENT, SUMMARY
from ocibridge.hubserver.repo.sources import commit_of

if TYPE_CHECKING:
    from ocibridge.oci.models import Descriptor
    from ocibridge.signing.keys import PrivateKey
    from ocibridge.signing.sign import Form
    from ocibridge.stores.base import WritableStore

#: the provenance's operation (its build type: https://ocibridge.dev/slsa/publish/v1)
OPERATION = "publish"


class EvidenceFailed(OcibridgeError):
    """A commit's signature or attestations could not be written: the commit is refused and
    its branch's tag not moved."""


@dataclass(frozen=True)
class Evidence:
    """What serve adds to every commit it pushes; the keys are loaded when serve starts (a
    wrong password stops serve there, not a commit later). ``sign_key``: sign each commit's
    manifest in ``forms`` naming ``identity`` (None: the repository, as ``ocibridge sign``
    does) with ``claims``; ``sbom``/``provenance``: attach them, signed as in-toto attestations
    with ``attest_key`` (else plain referrers); ``parameters``: serve's settings recorded in
    the provenance."""

    sign_key: PrivateKey | None = None
    #: signing.sign's FORMS, written out: importing it loads cryptography (9 MiB of serve's RSS)
    #: into every serve, signing or not
    forms: tuple[Form, ...] = ("classic", "bundle")
    identity: str | None = None
    claims: Mapping[str, str] = field(default_factory=dict)
    sbom: bool = False
    provenance: bool = False
    attest_key: PrivateKey | None = None
    sbom_time: str | None = None
    provenance_time: str | None = None
    parameters: Mapping[str, Any] = field(default_factory=dict)
    scan: str = "off"  # "refuse"/"quarantine": each commit scanned before its tags, a flagged one refused or held

    @property
    def wanted(self) -> bool:
        return self.sign_key is not None or self.sbom or self.provenance


def attach(store: WritableStore, subject: Descriptor, tag: str, annotations: Mapping[str, str],
           evidence: Evidence) -> None:
    """The signature, then the AI-BOM and provenance, on ``subject`` (no tag names it yet)."""
    identity = evidence.identity or store.describe()
    if evidence.sign_key is not None:
        from ocibridge.signing.sign import SignOptions, sign_artifact

        sign_artifact(store, subject, evidence.sign_key,
                      SignOptions(identity=identity, claims=dict(evidence.claims), forms=evidence.forms))
    if evidence.sbom or evidence.provenance:
        from ocibridge.signing.evidence import EvidenceOptions, attach_evidence

        options = EvidenceOptions(sbom=evidence.sbom, key=evidence.attest_key, identity=identity,
                                  repository=store.describe(), sbom_time=evidence.sbom_time)
        if evidence.provenance:
            options.provenance = provenance(store, subject, tag, annotations, evidence)
        attach_evidence(store, subject, options)


def provenance(store: WritableStore, subject: Descriptor, tag: str, annotations: Mapping[str, str],
               evidence: Evidence) -> dict[str, Any]:
    """The SLSA v1 predicate of a commit: where it went, its parent, who uploaded it, its files."""
    from ocibridge.signing.provenance import model_dependencies, predicate

    where = f"oci://{store.describe()}"
    parent = annotations.get(PARENT)
    external: dict[str, Any] = {
        "destination": f"{store.describe()}:{tag}",
        "uploader": annotations.get(AUTHOR),
        "summary": annotations.get(SUMMARY),
        "parentCommit": commit_of(parent) if parent else None,
        "flags": dict(evidence.parameters),
    }
    dependencies = model_dependencies(store, subject, where)
    if parent:
        algorithm, hexpart = parent.split(":", 1)
        dependencies.append({"uri": where, "name": "parent", "digest": {algorithm: hexpart}})
    return predicate(OPERATION, external, dependencies, started=evidence.provenance_time)
