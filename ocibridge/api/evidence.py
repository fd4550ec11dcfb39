"""Evidence about a model from Python: its AI-BOM (:func:`sbom`, CycloneDX 1.6), SLSA
provenance (:func:`provenance`), and both attached to a manifest as referrers, signed as in-toto
attestations when a key is given (:func:`attest`, the ``attest`` command).

Also what push, copy and convert attach to the manifest they wrote, inside the same call
(``attest=AttestOptions(...)``, ``sign=SignOptions(...)``, ``PushOptions(oms_signature=...)``):
the key is loaded and the BOM's
library looked for before a byte is sent (:func:`prepare`, :func:`prepare_signature`), then
the written manifest's store is opened once for all of it. Imported only by a call that asks
for evidence or a signature: ``ocibridge copy`` loads none of it otherwise."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ocibridge.api.opening import open_at, open_located, store_reference
from ocibridge.api.options import AttestOptions, SignOptions, TransferOptions
from ocibridge.core import boundedjson
from ocibridge.errors import UsageError
from ocibridge.oci.models import Descriptor
from ocibridge.oci.reference import RegistryReference
from ocibridge.places.locate import Locator, text_of
from ocibridge.places.locators import KindPlace
from ocibridge.places.targets import closes_its_stores

if TYPE_CHECKING:
    from ocibridge.signing.keys import PrivateKey
    from ocibridge.signing.omstravel import OmsSignature
    from ocibridge.stores.base import Store, WritableStore
    from ocibridge.transfer.push_result import PushResult

#: what an operation read, once the written manifest's store is open: resolvedDependencies
Dependencies = Callable[["Store", Descriptor], list[dict[str, Any]]]


@dataclass(frozen=True)
class EvidenceDocument:
    """Evidence about the model at ``reference`` (manifest ``digest``), made from what its store
    holds and not attached: ``kind`` ``sbom`` (``document``: the CycloneDX JSON) or
    ``provenance`` (the SLSA v1 predicate, what ``attest --provenance FILE`` takes). ``as_dict()``
    returns the document."""

    reference: str
    digest: str
    kind: str
    document: Mapping[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return dict(self.document)


@dataclass(frozen=True)
class AttestResult:
    """What :func:`attest` attached to manifest ``digest``: referrer digests by kind
    (``sbom``, ``provenance``), the kinds already there byte for byte, and whether signed."""

    digest: str
    written: Mapping[str, str] = field(default_factory=dict)
    unchanged: tuple[str, ...] = ()
    signed: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"digest": self.digest, "written": dict(self.written), "unchanged": list(self.unchanged),
                "signed": self.signed}


@closes_its_stores
def sbom(reference: str | Locator, *, timestamp: str | None = None,
         transfer: TransferOptions | None = None) -> EvidenceDocument:
    """The model's AI-BOM (CycloneDX 1.6 ML-BOM: its files, metadata, licences, card), made
    from what the registry or layout holds; nothing is attached. Needs ``ocibridge[evidence]``."""
    from ocibridge.signing.bom import model_bom

    located, target = open_located(reference, transfer).parts
    subject = target.store.resolve(target.reference)
    bom = model_bom(target.store, subject, repository=repository_of(located), timestamp=timestamp)
    return EvidenceDocument(text_of(located), subject.digest, "sbom", boundedjson.loads(bom))


@closes_its_stores
def provenance(reference: str | Locator, *, source: str | None = None, parameters: Mapping[str, Any] | None = None,
               started: str | None = None, transfer: TransferOptions | None = None) -> EvidenceDocument:
    """SLSA provenance v1 of a push that wrote the model at ``reference`` from ``source`` (a
    directory, as push took it; default: the reference): the model's files by SHA-256, where
    it came from as its annotations say, ``parameters`` as the push's settings and ``started``
    (RFC 3339) when given. Nothing is attached: :func:`attest` attaches it."""
    from ocibridge.signing.provenance import model_dependencies, predicate

    located, target = open_located(reference, transfer).parts
    subject = target.store.resolve(target.reference)
    shown = text_of(located)
    origin = source if source is not None else shown
    body = predicate("push", {"source": origin, "destination": shown, "flags": dict(parameters or {})},
                     model_dependencies(target.store, subject, origin), started=started)
    return EvidenceDocument(shown, subject.digest, "provenance", body)


@closes_its_stores
def attest(reference: str | Locator, *, sbom: bool = False,
           provenance: Mapping[str, Any] | str | os.PathLike[str] | None = None,
           key: str | os.PathLike[str] | None = None, identity: str | None = None, sbom_time: str | None = None,
           transfer: TransferOptions | None = None, password: str | bytes | None = None) -> AttestResult:
    """Attach the model's AI-BOM (``sbom``) and a SLSA provenance predicate (a mapping, or a
    JSON file holding one or a statement of one) to the manifest ``reference`` names, signed
    as in-toto attestations with ``key`` naming ``identity`` (default: where it is), else as
    plain referrers; ``password``: the key file's (None: ``$COSIGN_PASSWORD``, as cosign reads
    it). Attaching the same twice adds nothing (``unchanged``)."""
    from ocibridge.signing import keys
    from ocibridge.signing.evidence import EvidenceOptions, attach_evidence

    if not sbom and provenance is None:
        raise UsageError("attest needs --sbom, --provenance FILE or both")
    body = dict(provenance) if isinstance(provenance, Mapping) else \
        read_provenance(os.fspath(provenance)) if provenance is not None else None
    private = keys.load_private_key(key, _secret(password)) if key is not None else None
    located, target = open_located(reference, transfer, for_write=True).parts
    subject = target.store.resolve(target.reference)
    options = EvidenceOptions(sbom=sbom, provenance=body, key=private, identity=identity or target.store.describe(),
                              repository=repository_of(located), sbom_time=sbom_time)
    done = attach_evidence(target.store, subject, options)
    return AttestResult(subject.digest, dict(done.written), tuple(done.unchanged), done.signed)


def repository_of(located: object) -> str | None:
    """The registry repository a located reference names (``host/repo``), else None."""
    return f"{located.registry}/{located.repository}" if isinstance(located, RegistryReference) else None


def read_provenance(path: str) -> dict[str, Any]:
    """A SLSA v1 predicate from a file (or the predicate of a statement holding one)."""
    from ocibridge.core.limits import MAX_SMALL_INPUT, read_small_file

    data = read_small_file(path, MAX_SMALL_INPUT, "provenance", UsageError)
    try:
        doc = boundedjson.loads(data)
    except ValueError:
        raise UsageError(f"{path}: not JSON") from None
    if isinstance(doc, dict) and isinstance(doc.get("predicate"), dict):
        doc = doc["predicate"]
    if not isinstance(doc, dict) or not isinstance(doc.get("buildDefinition"), dict) \
            or not isinstance(doc.get("runDetails"), dict):
        raise UsageError(f"{path}: not a SLSA provenance v1 predicate (buildDefinition, runDetails)")
    return doc


# -- what push, copy and convert attach to the manifest they wrote ---------------------------


@dataclass(frozen=True)
class PreparedEvidence:
    """Evidence options checked before a byte is sent: the key loaded, the BOM's library found."""

    options: AttestOptions
    key: PrivateKey | None


@dataclass(frozen=True)
class PreparedSignature:
    """Signature options checked before a byte is sent: the OMS signature checked against the
    source directory (``excludes``: the signature file, when it lies inside it), the key loaded
    with the forms it makes."""

    options: SignOptions | None
    oms: OmsSignature | None = None
    key: PrivateKey | None = None
    excludes: tuple[str, ...] = ()


def prepare(options: AttestOptions, dest: Locator | None) -> PreparedEvidence:
    """Check ``options`` for a write to ``dest`` before anything is written. Evidence goes on
    as referrers of the manifest written: the local Ollama store keeps models, no referrers,
    so it is refused here rather than after the model is there."""
    if isinstance(dest, KindPlace) and not dest.holds_referrers:
        raise UsageError(f"--sbom and --provenance attach referrers, which {dest} cannot hold (the Ollama "
                         "store keeps models only): write to a registry or an oci: layout, then pull it into Ollama")
    if options.sbom:
        from ocibridge.signing.bom import _library

        _library()
    key = None
    if options.key is not None:
        from ocibridge.signing import ATTEST_PASSWORD_ENV, keys

        key = keys.load_private_key(options.key, _secret(options.password), password_env=ATTEST_PASSWORD_ENV,
                                    flag="--attest-key")
    return PreparedEvidence(options, key)


def prepare_signature(options: SignOptions | None, oms_signature: str | os.PathLike[str] | None,
                      source: Locator) -> PreparedSignature:
    """Check a push's signing (``options``: a key and its forms; ``oms_signature``: the source
    directory's own OMS signature, to carry along) before a byte is sent."""
    oms: OmsSignature | None = None
    excludes: tuple[str, ...] = ()
    if oms_signature is not None:
        from ocibridge.signing.omstravel import directory_signature

        directory, signature = Path(text_of(source)), Path(oms_signature)
        oms = directory_signature(directory, signature)  # it signs exactly the directory's files
        inside = _relative_inside(signature, directory)
        excludes = (inside,) if inside else ()
    key = None
    if options is not None:
        from ocibridge.api.signing import sign_forms
        from ocibridge.signing import keys

        sign_forms(options.forms)  # an unknown form is a usage error, before the key is read
        key = keys.load_private_key(options.key, _secret(options.password))
    return PreparedSignature(options, oms, key, excludes)


def _secret(password: str | bytes | None) -> bytes | None:
    """A key file's password as the key reader takes it (None: ``$COSIGN_PASSWORD``)."""
    return password.encode() if isinstance(password, str) else password


def _relative_inside(path: Path, root: Path) -> str | None:
    """``path`` relative to ``root`` when it lies inside it (a signature kept in the model)."""
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return None


def after_push(result: PushResult, where: Locator | None, source: Locator, dest: Locator | None,
               transfer: TransferOptions, *, evidence: PreparedEvidence | None,
               signature: PreparedSignature | None) -> PushResult:
    """``result`` with what was attached to the pushed manifest at ``where`` (None: the local
    store): ``extra["evidence"]``, ``extra["signed"]`` (key signatures by form) and
    ``extra["signature"]`` (the OMS signature's referrer)."""
    place, store = _open_written(where, transfer)
    subject = store.resolve(result.descriptor.digest)
    extra: dict[str, Any] = {}
    if evidence is not None:
        from ocibridge.signing.provenance import model_dependencies

        origin = text_of(source)
        extra["evidence"] = _attach(evidence, "push", place, store, subject,
                                    {"source": origin, "destination": text_of(dest) if dest is not None else None},
                                    lambda store, subject: model_dependencies(store, subject, origin))
    if signature is not None and signature.key is not None and signature.options is not None:
        from ocibridge.api.signing import sign_forms
        from ocibridge.signing.sign import SignOptions as Signing
        from ocibridge.signing.sign import sign_artifact

        wanted = signature.options
        forms: Any = sign_forms(wanted.forms)
        signed = sign_artifact(store, subject, signature.key,
                               Signing(identity=wanted.identity or store.describe(), claims=dict(wanted.claims),
                                       forms=forms))
        extra["signed"] = {"written": signed.written, "unchanged": signed.unchanged}
    if signature is not None and signature.oms is not None:
        from ocibridge.signing.omstravel import attach_oms

        extra["signature"] = attach_oms(store, result.descriptor, signature.oms).digest
    return with_extra(result, **extra)


def attach_from_source(evidence: PreparedEvidence, operation: str, src: Locator, dst: Locator, digest: str,
                       source: Descriptor, transfer: TransferOptions) -> dict[str, Any]:
    """Attach the evidence of an operation (copy, convert) that wrote ``digest`` at ``dst``
    from the manifest ``source`` at ``src``: that manifest, by digest, is what was read.
    Returns the evidence's JSON (written referrers by kind, unchanged kinds, signed)."""
    from ocibridge.signing.provenance import locator_uri, manifest_dependency

    place, store = _open_written(dst, transfer)
    subject = store.resolve(digest)
    return _attach(evidence, operation, place, store, subject, {"source": text_of(src), "destination": text_of(dst)},
                   lambda store, subject: [manifest_dependency(locator_uri(src), source)])


def with_extra(result: PushResult, **extra: Any) -> PushResult:
    """``result`` with more entries in ``extra`` (what its ``as_dict()`` reports)."""
    return dataclasses.replace(result, extra={**result.extra, **extra}) if extra else result


def _open_written(where: Locator | None, transfer: TransferOptions) -> tuple[Locator, WritableStore]:
    """The store a manifest was written to, opened for writing referrers (closed with the
    calling API function's stores)."""
    place = where if where is not None else store_reference(None)
    return place, open_at(place, transfer, for_write=True).store


def _attach(evidence: PreparedEvidence, operation: str, place: Locator, store: WritableStore, subject: Descriptor,
            external: dict[str, Any], dependencies: Dependencies) -> dict[str, Any]:
    from ocibridge.signing.evidence import EvidenceOptions, attach_evidence
    from ocibridge.signing.provenance import predicate

    wanted = evidence.options
    repository = repository_of(place)
    options = EvidenceOptions(sbom=wanted.sbom, key=evidence.key, sbom_time=wanted.sbom_time, repository=repository,
                              identity=repository or store.describe())
    if wanted.provenance:
        options.provenance = predicate(operation, {**external, "flags": dict(wanted.parameters)},
                                       dependencies(store, subject), started=wanted.provenance_time)
    return attach_evidence(store, subject, options).as_dict()
