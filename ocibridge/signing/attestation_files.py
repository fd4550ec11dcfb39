"""The attestations of a pulled manifest, as files beside the model (``pull --with-attestations``).

Layout: ``OUT/.ocibridge/attestations/<type>.<digest12>.sigstore.json`` for a signed one (the
sigstore bundle, as ``cosign verify-blob-attestation --bundle`` takes it) and
``<type>.<digest12>.json`` for unsigned evidence (the in-toto statement, or the CycloneDX BOM);
``<type>`` is cosign's short name of the predicate type (``cyclonedx``, ``slsaprovenance1``),
``<digest12>`` the first 12 hex digits of the referrer's digest, so two of one type never
collide and a pull again writes the same names. Under a dot directory, they are never one of the
model's files. All are read (and, with keys, verified) before the model's files are written."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ocibridge.core import boundedjson
from ocibridge.core.fsutil import atomic_write_bytes
from ocibridge.errors import SignatureError, UsageError
from ocibridge.oci.models import Descriptor, Manifest, parse_manifest_bytes
from ocibridge.signing.attest import EVIDENCE_TYPES, TYPE_NAMES, find_attestations
from ocibridge.stores.base import referrers_read

if TYPE_CHECKING:
    from ocibridge.signing.verify import VerifyPolicy
    from ocibridge.stores.base import Store

FOLDER = Path(".ocibridge", "attestations")
_SHORT = {uri: name for name, uri in reversed(TYPE_NAMES.items())}  # the first name of each type
_UNSAFE = re.compile(r"[^a-z0-9]+")


@dataclass(frozen=True)
class AttestationFile:
    """One file to write, collected (and verified) before the model's files are written, so a
    refusal leaves the directory as it was."""

    name: str  # the file name under FOLDER
    data: bytes
    predicate_type: str
    signed: bool
    referrer: str


def short_name(predicate_type: str) -> str:
    """cosign's short name of a predicate type, else a file-safe form of its last segment."""
    if predicate_type in _SHORT:
        return _SHORT[predicate_type]
    tail = predicate_type.rstrip("/").rsplit("/", 2)
    return _UNSAFE.sub("-", "-".join(tail[-2:]).lower()).strip("-") or "statement"


def collect(store: Store, subject: Descriptor, keys: VerifyPolicy | None,
            name: str) -> tuple[list[AttestationFile], int]:
    """(files to write, unsigned ones left out). With ``keys``, every signed attestation must
    verify with one of them (raises, one line, naming it) and unsigned evidence, which nothing
    vouches for, is left out; without, all are taken as they are."""
    from ocibridge.signing.verify import verify_attestation

    found: list[AttestationFile] = []
    held = referrers_read(store, subject)  # listed once: each referrer's manifest read once
    for att in find_attestations(store, subject, held):
        if keys is not None:
            try:
                verify_attestation(att.bundle, att.referrer.digest, subject.digest,
                                   replace(keys, predicate_type=att.predicate_type))
            except SignatureError as e:
                raise SignatureError(f"{name}: refused: attestation {att.referrer.digest[:19]} "
                                     f"({att.predicate_type}): {e}") from None
        found.append(AttestationFile(f"{short_name(att.predicate_type)}.{_hex12(att.referrer)}.sigstore.json",
                                     att.bundle, att.predicate_type, True, att.referrer.digest))
    left_out = 0
    for ref in held:
        if ref.artifactType not in EVIDENCE_TYPES:
            continue
        if keys is not None:
            left_out += 1
            continue
        node = parse_manifest_bytes(held.manifest(ref), ref.mediaType)
        if not isinstance(node, Manifest) or len(node.layers) != 1:
            continue
        data = store.fetch_bytes(node.layers[0])
        kind = _statement_type(data) or EVIDENCE_TYPES[ref.artifactType]
        found.append(AttestationFile(f"{short_name(kind)}.{_hex12(ref)}.json", data, kind, False, ref.digest))
    return sorted(found, key=lambda f: f.name), left_out


def _hex12(desc: Descriptor) -> str:
    return desc.digest.split(":", 1)[1][:12]


def _statement_type(data: bytes) -> str | None:
    """The predicate type of an in-toto statement; None for another document (a bare BOM)."""
    try:
        doc = boundedjson.loads(data)
    except ValueError:
        return None
    kind = doc.get("predicateType") if isinstance(doc, dict) else None
    return kind if isinstance(kind, str) else None


def check_folder(directory: Path) -> None:
    """Refuse, before the model's files are written, a ``DIR/.ocibridge/attestations`` that
    cannot be the folder: a file or a link in its place. Found after the pull, it left the
    files written and the command failed; a link would have put the attestations elsewhere."""
    place = directory
    for part in FOLDER.parts:
        place = place / part
        if place.is_symlink() or (place.exists() and not place.is_dir()):
            raise UsageError(f"--with-attestations: {place} is in the way (not a directory): move it, or pull "
                             "elsewhere")


def write(files: list[AttestationFile], directory: Path) -> list[str]:
    """Write each file (atomically) under ``directory``/FOLDER; their paths relative to ``directory``."""
    folder = directory / FOLDER
    if files:
        folder.mkdir(parents=True, exist_ok=True)
    for f in files:
        atomic_write_bytes(folder / f.name, f.data)
    return [(FOLDER / f.name).as_posix() for f in files]
