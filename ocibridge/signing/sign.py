"""``sign``: make the signature forms asked for one manifest and put them beside it.

``oms`` is the OpenSSF model signing form: a bundle over the model's file list (:mod:`.oms`),
made from the manifest's layer digests, attached as a referrer like the cosign bundle."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Literal

from ocibridge.errors import SignatureError
from ocibridge.oci.models import Descriptor
from ocibridge.signing import keys
from ocibridge.signing.attach import attach_bundle, attach_classic
from ocibridge.signing.classic import signature_layer, signature_tag
from ocibridge.signing.oms import SHA256_FILES, Hashing
from ocibridge.signing.payload import simple_signing_payload
from ocibridge.signing.sigstorebundle import make_bundle, statement
from ocibridge.stores.base import WritableStore

Form = Literal["classic", "bundle", "oms"]
FORMS: tuple[Form, ...] = ("classic", "bundle")
ALL_FORMS: tuple[Form, ...] = ("classic", "bundle", "oms")


@dataclass
class SignOptions:
    """``identity``: the repository name written into what is signed (cosign's
    ``docker-reference``); ``claims``: extra signed key/value pairs (``--annotation``);
    ``oms_hashing``: how the OMS form hashes the files (whole files with SHA-256 by default)."""

    identity: str
    claims: dict[str, str] = field(default_factory=dict)
    forms: tuple[Form, ...] = FORMS
    oms_hashing: Hashing = SHA256_FILES


@dataclass
class SignResult:
    digest: str
    written: dict[str, str] = field(default_factory=dict)  # form -> where (tag or referrer digest)
    unchanged: list[str] = field(default_factory=list)  # forms already there, byte for byte
    skipped: dict[str, str] = field(default_factory=dict)  # form -> why it was not written

    def as_dict(self) -> dict[str, object]:
        return {"digest": self.digest, "written": self.written, "unchanged": self.unchanged, "skipped": self.skipped}


def sign_artifact(store: WritableStore, subject: Descriptor, key: keys.PrivateKey, options: SignOptions) -> SignResult:
    """Sign ``subject`` in each form asked for; signing twice with the same key adds nothing.

    A model of no files (a commit that deleted the last one) gets no OMS signature: the
    specification wants at least one file. Asked for alone, that is an error before anything
    is written; beside the cosign forms, the OMS form is skipped and ``skipped`` says why."""
    result = SignResult(subject.digest)
    oms_files: dict[str, str] | None = None
    if "oms" in options.forms:
        from ocibridge.signing.omsfiles import manifest_files

        # whole files, SHA-256: the raw layers' digests, no weight byte read; else each blob read once
        oms_files = manifest_files(store, subject, hashing=options.oms_hashing)
        if not oms_files:
            why = "the model has no files to sign (git's files are left out); an OMS signature lists at least one"
            if set(options.forms) == {"oms"}:
                raise SignatureError(f"{subject.digest}: {why}")
            result.skipped["oms"] = why
    if "classic" in options.forms:
        payload = simple_signing_payload(options.identity, subject.digest, options.claims)
        signature = base64.b64encode(keys.sign(key, payload)).decode()
        _, changed = attach_classic(store, subject, signature_layer(payload, signature))
        result.written["classic"] = signature_tag(subject.digest)
        if not changed:
            result.unchanged.append("classic")
    if "bundle" in options.forms:
        bundle = make_bundle(key, statement(options.identity, subject.digest, options.claims))
        desc, new = attach_bundle(store, subject, bundle)
        result.written["bundle"] = desc.digest
        if not new:
            result.unchanged.append("bundle")
    if oms_files:
        from ocibridge.signing.oms import OMS_PREDICATE_TYPE, model_name, oms_statement

        payload = oms_statement(model_name(options.identity), oms_files, options.oms_hashing)
        bundle = make_bundle(key, payload, hint=keys.pem_hint(key))
        desc, new = attach_bundle(store, subject, bundle, OMS_PREDICATE_TYPE)
        result.written["oms"] = desc.digest
        if not new:
            result.unchanged.append("oms")
    return result
