"""What each form of signature covers: the one rule every trusting decision goes through.

A signature is accepted for a decision only if its signed payload covers what the decision
trusts. A cosign signature (a ``.sig`` simple-signing payload naming the manifest digest, a
bundle's DSSE statement naming it, or a message signature over the manifest bytes) covers the
manifest and so everything the manifest's bytes bind: its annotations, the chunk table they
name, its layers by digest and the files those layers hold. An OMS signature lists file names
and their SHA-256, nothing of the manifest: it covers the files only, so a copy of the manifest
that differs in an annotation (a forged ``io.ocibridge.chunks.digest``) carries it as well.
The table is docs/security.md's "What a signature covers"; ``tests/signing/test_signing_coverage.py``
checks every cell.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum
from typing import Protocol, TypeVar

from ocibridge.errors import SignatureError


class Form(str, Enum):
    """How a signature was made (``Verified.form``)."""

    CLASSIC = "classic"  # cosign simple signing, the .sig tag: names the manifest digest
    BUNDLE = "bundle"  # a sigstore bundle: DSSE statement naming the digest, or a message signature over the manifest
    OMS = "oms"  # an OpenSSF model-signing statement: file names and their sha256
    ATTESTATION = "attestation"  # an in-toto statement of another predicate type about a digest (BOM, provenance)


class Trusted(str, Enum):
    """What a decision relies on once a signature verifies."""

    MANIFEST = "manifest"  # the manifest as a whole (verify, copy, mirror, k8s, bundles)
    ANNOTATION = "annotation"  # any one of its annotations
    CHUNK_TABLE = "chunk table"  # the table io.ocibridge.chunks.digest binds (lazy reads by range)
    REFERRER = "referrer"  # a referrer manifest (a chunk table attached, not bound), signed itself
    LAYER = "layer"  # a layer blob, by the digest the manifest lists
    FILES = "files"  # the model's file names and contents (pull into a directory, path)
    STATEMENT = "attested statement"  # what an attestation's predicate says of its subject (verify --attestation-type)


#: A signature vouches for the manifest and all it binds, never for a statement it does not make.
_MANIFEST_BOUND = frozenset(Trusted) - {Trusted.STATEMENT}
#: form -> what its signed payload covers
COVERS: dict[Form, frozenset[Trusted]] = {
    Form.CLASSIC: _MANIFEST_BOUND,
    Form.BUNDLE: _MANIFEST_BOUND,
    Form.OMS: frozenset({Trusted.FILES}),
    # its subject only: what the predicate says of that digest; it signs nothing of the artifact
    Form.ATTESTATION: frozenset({Trusted.STATEMENT}),
}

_WHY = {Form.OMS: "an OMS signature signs the model's file names and digests, nothing of its manifest: "
                  "`verify --files` checks what a pull into a directory uses",
        Form.ATTESTATION: "an attestation says something about its subject; it is not a signature of it",
        Form.CLASSIC: "a signature of the manifest is not an attestation",
        Form.BUNDLE: "a signature of the manifest is not an attestation"}


def covers(form: Form | str, trusted: Trusted) -> bool:
    """Whether a signature of ``form`` covers ``trusted``; an unknown form covers nothing."""
    try:
        return trusted in COVERS[Form(form)]
    except ValueError:
        return False


class _Signed(Protocol):
    @property
    def form(self) -> str: ...

    @property
    def where(self) -> str: ...


S = TypeVar("S", bound=_Signed)


def uncovered_reason(form: Form | str, where: str, trusted: Trusted) -> str:
    """One line: why a verified signature does not count for ``trusted``."""
    if not covers_anything(form):
        why = "an unknown form"
    elif Form(form) in (Form.CLASSIC, Form.BUNDLE) and trusted is not Trusted.STATEMENT:
        why = f"a {form} signature"
    else:
        why = _WHY.get(Form(form), f"a {form} signature")
    return f"{form} signature {where[:19]}: verifies, but does not cover the {trusted.value} ({why})"


def covered_by(forms: Iterable[Form | str]) -> frozenset[Trusted]:
    """What one of the signatures of ``forms`` covers (any one of them accepted: their union)."""
    found: frozenset[Trusted] = frozenset()
    for form in forms:
        if covers_anything(form):
            found |= COVERS[Form(form)]
    return found


def covers_anything(form: Form | str) -> bool:
    """Whether ``form`` is a known form of signature."""
    return form in {f.value for f in Form}


def require_cover(verified: Iterable[S], trusted: Trusted, subject: str) -> list[S]:
    """The verified signatures whose form covers ``trusted``; raises when there is none."""
    found = list(verified)
    good = [v for v in found if covers(v.form, trusted)]
    if good:
        return good
    reasons = "; ".join(dict.fromkeys(uncovered_reason(v.form, v.where, trusted) for v in found))
    raise SignatureError(f"{subject}: no signature covers the {trusted.value}" + (f": {reasons}" if reasons else ""))
