"""Signing and verifying as API calls: :func:`sign` (cosign's ``.sig`` tag, a sigstore bundle
referrer, an OpenSSF model signature), :func:`verify` (an artifact in any store, or a file
against a bundle file as ``cosign verify-blob`` checks it) and :func:`verify_dir` (a pulled
directory against its OMS signature). A pipeline that pushes and signs needs no subprocess.

Light at import: ``cryptography``, the stores and the locator load inside the calls, so the
CLI can take its choices from here without paying for them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ocibridge.api.options import SignOptions as SignOptions  # its home: the options module
from ocibridge.core.textlists import one_or_many
from ocibridge.errors import UsageError
from ocibridge.signing import PASSWORD_ENV as PASSWORD_ENV  # cosign's variable for a key's password
from ocibridge.stores.opened import closes_its_stores

if TYPE_CHECKING:
    from ocibridge.api.options import TransferOptions
    from ocibridge.places.locators import Locator
    from ocibridge.signing.verify import Verified, VerifyPolicy
    from ocibridge.stores.target import StoreTarget

__all__ = ["OMS_HASHES", "SIGN_FORMS", "SIGN_FORM_CHOICES", "KeygenResult", "SignOptions", "SignResult",
           "VerifiedSignature", "VerifyDirResult", "VerifyOptions", "VerifyResult", "keygen", "sign", "verify",
           "verify_dir"]

#: The forms :func:`sign` makes: cosign's ``.sig`` tag, a sigstore bundle referrer, an OpenSSF
#: model signature (the model's file list, as a referrer).
SIGN_FORMS = ("classic", "bundle", "oms")
#: What ``form=`` (and ``sign --form``) takes: a form, ``both`` (classic and bundle) or ``all``.
SIGN_FORM_CHOICES = (*SIGN_FORMS, "both", "all")
_GROUPS = {"both": ("classic", "bundle"), "all": SIGN_FORMS}
#: The file hashes of an OMS signature (the OMS algorithm registry; signing/oms.py HASH_TYPES).
OMS_HASHES = ("sha256", "blake2b", "blake3")


# -- sign ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SignResult:
    """Where each form was written (the ``.sig`` tag, or the referrer's digest) and which were
    there already, byte for byte (signing twice with one key adds nothing)."""

    reference: str
    digest: str
    written: Mapping[str, str]
    unchanged: tuple[str, ...] = ()
    skipped: Mapping[str, str] = field(default_factory=dict)  # form -> why (OMS, for a model of no files)

    def as_dict(self) -> dict[str, Any]:
        return {"digest": self.digest, "written": dict(self.written), "unchanged": list(self.unchanged),
                "skipped": dict(self.skipped)}


def sign_forms(form: str | Sequence[str]) -> tuple[str, ...]:
    """``form`` as the forms it names (``both``, ``all`` or forms); an unknown one is a usage error."""
    named = [form] if isinstance(form, str) else list(form)
    forms: list[str] = []
    for one in named:
        if one not in SIGN_FORM_CHOICES:
            raise UsageError(f"unknown signature form {one!r} (choose from {', '.join(SIGN_FORM_CHOICES)})")
        forms.extend(f for f in _GROUPS.get(one, (one,)) if f not in forms)
    if not forms:
        raise UsageError("no signature form asked for")
    return tuple(forms)


@closes_its_stores
def sign(reference: str | Locator, options: SignOptions, *, form: str | Sequence[str] | None = None,
         transfer: TransferOptions | None = None, oms_hash: str = "sha256",
         oms_shard_size: int | None = None) -> SignResult:
    """Sign the manifest ``reference`` names, in each ``form`` (default: ``options.forms``;
    ``both``: the cosign ``.sig`` tag and the sigstore bundle referrer; ``oms``: an OpenSSF model
    signature; ``all``), and put the signatures beside it in its store. The OMS form hashes
    whole files with SHA-256 (the manifest's layer digests: no weight byte is read) unless ``oms_hash`` names blake2b or
    blake3 or ``oms_shard_size`` asks for shards of that many bytes (every blob read once).
    Signatures are deterministic (RFC 6979): signing again with the same key writes nothing.
    Raises :class:`ocibridge.errors.SignatureError` for a key that cannot be used (wrong
    password; not P-256, or for ``oms`` alone P-384 or P-521)."""
    from ocibridge.signing import keys
    from ocibridge.signing.oms import Hashing
    from ocibridge.signing.sign import SignOptions as Signing
    from ocibridge.signing.sign import sign_artifact

    forms: Any = sign_forms(options.forms if form is None else form)
    hashing = Hashing(oms_hash, oms_shard_size)
    if "oms" not in forms and hashing != Hashing():
        raise UsageError("--oms-hash and --oms-shard-size shape the OMS form only (--form oms or all)")
    password = options.password.encode() if isinstance(options.password, str) else options.password
    key = keys.load_private_key(options.key, password, any_curve=forms == ("oms",))
    target, name = _open(reference, transfer)
    subject = target.store.resolve(target.reference)
    signing = Signing(identity=options.identity or target.store.describe(), claims=dict(options.claims), forms=forms,
                      oms_hashing=hashing)
    done = sign_artifact(target.store, subject, key, signing)
    return SignResult(name, done.digest, dict(done.written), tuple(done.unchanged), dict(done.skipped))


def _open(reference: str | os.PathLike[str] | Locator, transfer: TransferOptions | None) -> tuple[StoreTarget, str]:
    """The store and reference an artifact's text names, and that text (for messages)."""
    from ocibridge.api.opening import open_located
    from ocibridge.places.locate import text_of

    located, target = open_located(os.fspath(reference) if isinstance(reference, os.PathLike) else reference,
                                   transfer).parts
    return target, reference if isinstance(reference, str) else text_of(located)


# -- verify -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class VerifyOptions:
    """Who may have signed and what the signature must say: public ``keys`` (PEM files), or a
    keyless signer (``certificate_identity`` and ``certificate_oidc_issuer``, checked offline
    against the sigstore ``trusted_root`` file); ``claims`` every accepted signature carries;
    ``attestation_type``: verify a signed in-toto attestation of this predicate type (a URI, or
    cosign's name: ``cyclonedx``, ``slsaprovenance1``, ...) instead of a signature.
    ``files``: vouch for the model's files only, as a pull into a directory does (an OMS
    signature counts; a cosign one too, as it binds the files through the manifest); by default
    the manifest itself, as everything that carries or serves the manifest needs (docs/signing.md,
    "What each form covers")."""

    keys: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] = ()
    certificate_identity: str | None = None
    certificate_oidc_issuer: str | None = None
    trusted_root: str | os.PathLike[str] | None = None
    claims: Mapping[str, str] = field(default_factory=dict)
    attestation_type: str | None = None
    files: bool = False

    def policy(self) -> VerifyPolicy:
        """The verifier's policy: the keys read, the attestation type resolved. Raises
        :class:`ocibridge.errors.SignatureError` for no key and no identity, or an unreadable key."""
        from ocibridge.signing.sigstorebundle import SIGN_PREDICATE_TYPE
        from ocibridge.signing.verify import VerifyPolicy

        predicate_type = SIGN_PREDICATE_TYPE
        if self.attestation_type:
            from ocibridge.signing.attest import predicate_type_of

            predicate_type = predicate_type_of(self.attestation_type)
        root = None if self.trusted_root is None else os.fspath(self.trusted_root)
        keys = [os.fspath(k) for k in one_or_many(self.keys)]
        return VerifyPolicy.from_files(keys, identity=self.certificate_identity, issuer=self.certificate_oidc_issuer,
                                       trusted_root=root, claims=dict(self.claims), predicate_type=predicate_type)


@dataclass(frozen=True)
class VerifiedSignature:
    """One signature (or attestation) that verified: its form (classic, bundle, oms,
    attestation), who signed (the key file, or the certificate identity), its signed claims and
    where it is (the ``.sig`` tag, the referrer's digest, the bundle file)."""

    form: str
    signer: str
    claims: Mapping[str, Any]
    where: str

    @classmethod
    def of(cls, verified: Verified) -> VerifiedSignature:
        return cls(verified.form, verified.signer, dict(verified.claims), verified.where)

    def as_dict(self) -> dict[str, Any]:
        return {"form": self.form, "signer": self.signer, "claims": dict(self.claims), "where": self.where}


@dataclass(frozen=True)
class VerifyResult:
    """The digest verified (the manifest's, or the file's for a bundle file) and every signature
    that verified and covers it. ``attestation_type``: the predicate type verified, when an
    attestation was asked for (None: signatures)."""

    reference: str
    digest: str
    signatures: tuple[VerifiedSignature, ...]
    attestation_type: str | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"verified": True, "reference": self.reference, "digest": self.digest,
                               "signatures": [s.as_dict() for s in self.signatures]}
        if self.attestation_type is not None:  # what was verified: an attestation of this type
            out["attestationType"] = self.attestation_type
        return out


@closes_its_stores
def verify(reference: str | os.PathLike[str] | Locator, options: VerifyOptions, *,
           bundle: str | os.PathLike[str] | None = None, transfer: TransferOptions | None = None) -> VerifyResult:
    """Verify the artifact ``reference`` names by its signatures (every form; an OMS signature
    counts for the files it lists only when they are the manifest's), or, with ``bundle``, the
    file ``reference`` against that sigstore bundle file (``cosign verify-blob --bundle``).
    Returns what verified; raises :class:`ocibridge.errors.SignatureError` (``REF: refused:
    why``, one line) when nothing does, or when a claim asked for is missing."""
    policy = options.policy()
    if bundle is not None:
        from ocibridge.signing.blob import verify_blob

        if not isinstance(reference, (str, os.PathLike)):
            raise UsageError("verify(..., bundle=) checks a file: give its path")
        blob, digest = verify_blob(Path(reference), Path(bundle), policy)
        return VerifyResult(os.fspath(reference), digest, (VerifiedSignature.of(blob),), _attestation(policy))
    from ocibridge.signing.policy import Trusted, verify_before_use

    target, name = _open(reference, transfer)
    subject = target.store.resolve(target.reference)
    if policy.attestation and options.files:
        raise UsageError("verify: --files is for signatures: an attestation is verified for its statement")
    trusts = Trusted.STATEMENT if policy.attestation else Trusted.FILES if options.files else Trusted.MANIFEST
    verified = verify_before_use(target.store, subject, policy, name=name, trusts=trusts)
    return VerifyResult(name, subject.digest, tuple(VerifiedSignature.of(v) for v in verified),
                        _attestation(policy))


def _attestation(policy: VerifyPolicy) -> str | None:
    return policy.predicate_type if policy.attestation else None


@dataclass(frozen=True)
class VerifyDirResult:
    """A directory that holds exactly the files its OMS signature lists, each with the signed
    digest: who signed, the model's name in the signature, how many files."""

    path: str
    signer: str
    model: str
    files: int

    def as_dict(self) -> dict[str, Any]:
        return {"verified": True, "signer": self.signer, "model": self.model, "files": self.files}


def verify_dir(path: str | os.PathLike[str], keys: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], *,
               signature: str | os.PathLike[str] | None = None, ignore_paths: Sequence[str | os.PathLike[str]] = (),
               ignore_unsigned_files: bool = False) -> VerifyDirResult:
    """Verify a directory of model files (a pull, a snapshot of the model cache), or the one
    file of a single-file model, against an OpenSSF model signature (``signature``; None:
    ``PATH/model.sig``, where pull puts it) by one of the public ``keys``: an extra, missing or
    changed file refuses it. ``ignore_paths``: paths in the directory (relative to it, or
    absolute inside it) left out besides those the signature ignores; ``ignore_unsigned_files``:
    files the signature does not list are let be (every listed one is still checked). Raises
    :class:`ocibridge.errors.SignatureError` (``PATH: refused: why``)."""
    from ocibridge.signing.oms import SIGNATURE_FILE
    from ocibridge.signing.omsdir import DirectoryCheck, verify_directory
    from ocibridge.signing.verify import VerifyPolicy

    policy = VerifyPolicy.from_files([os.fspath(k) for k in one_or_many(keys)])
    root = Path(path)
    where = Path(signature) if signature is not None else root / SIGNATURE_FILE
    if signature is None and not where.is_file():
        raise UsageError(f"{os.fspath(path)} holds no {SIGNATURE_FILE}: pass --signature FILE")
    check = DirectoryCheck(tuple(_inside(root, p) for p in ignore_paths), ignore_unsigned_files)
    verified, statement = verify_directory(root, where, policy, check)
    return VerifyDirResult(os.fspath(path), verified.signer, statement.name, len(statement.paths))


def _inside(root: Path, ignored: str | os.PathLike[str]) -> str:
    """An ignore path as a POSIX path relative to ``root``: relative ones are taken from the
    model root (as the OMS specification matches them), absolute ones must lie inside it."""
    from ocibridge.core.fsutil import safe_relpath
    from ocibridge.errors import UnsafePath

    given = Path(ignored)
    if given.is_absolute():
        try:
            given = given.resolve().relative_to(root.resolve())
        except ValueError:
            raise UsageError(f"--ignore-paths {os.fspath(ignored)}: not inside {os.fspath(root)}") from None
    try:
        return safe_relpath(given.as_posix(), "--ignore-paths")
    except UnsafePath as e:
        raise UsageError(str(e)) from None


# -- keygen -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class KeygenResult:
    """The key pair :func:`keygen` wrote: cosign's encrypted private key file and the PEM public key."""

    private_key: str
    public_key: str

    def as_dict(self) -> dict[str, Any]:
        return {"privateKey": self.private_key, "publicKey": self.public_key}


def keygen(prefix: str | os.PathLike[str] = "cosign", *, password: str | bytes | None = None,
           overwrite: bool = False, curve: str = "p256") -> KeygenResult:
    """Make a P-256 key pair as cosign's ``generate-key-pair`` does: ``PREFIX.key``, the private
    key encrypted with ``password`` in cosign's format (scrypt + NaCl secretbox; cosign and
    :func:`sign` read it), mode 0600, and ``PREFIX.pub``, the PEM public key :func:`verify` and
    ``cosign verify`` take. ``password`` None: ``$COSIGN_PASSWORD`` (cosign's variable), which must
    then be set; an empty password is allowed, as cosign allows it. Either file existing is
    refused unless ``overwrite``; both are written in full or neither is.

    ``curve="p384"`` or ``"p521"``: a key for the OMS form alone (the cosign forms sign with
    P-256), written as ``openssl genpkey`` writes one, PEM PKCS#8 encrypted with the password
    (none when it is empty), so that ``model_signing sign key --private_key PREFIX.key
    --password …`` signs with it too: it reads no cosign key file."""
    from ocibridge.core.fsutil import atomic_writer, check_output_file
    from ocibridge.signing import keys

    if curve not in keys.KEYGEN_CURVES:
        raise UsageError(f"curve {curve!r}: one of {', '.join(keys.KEYGEN_CURVES)}")
    if password is None:
        if os.environ.get(PASSWORD_ENV) is None:
            raise UsageError(f"no password for the private key: set ${PASSWORD_ENV} (or pass one)")
        password = os.environ[PASSWORD_ENV]
    secret = password.encode() if isinstance(password, str) else password
    if not os.fspath(prefix).strip():  # not the hidden '.key' and '.pub' of the working directory
        raise UsageError("an empty key prefix (an unset shell variable?): name the key pair, such as cosign")
    private, public = Path(f"{os.fspath(prefix)}.key"), Path(f"{os.fspath(prefix)}.pub")
    existing = [str(p) for p in (private, public) if p.exists() or p.is_symlink()]
    if existing and not overwrite:
        raise UsageError(f"{' and '.join(existing)} already there: refused; "
                         "pass --overwrite (or --force) to replace them")
    if not private.parent.is_dir():  # as cosign: no directory is made for the keys
        raise UsageError(f"{private.parent}: no such directory for the key pair")
    for path in (private, public):  # even with --overwrite: a read-only key stays
        check_output_file(path)
    key = keys.generate_private_key(curve)
    # before any file: a missing PyNaCl leaves none
    sealed = keys.encrypt_cosign_key(key, secret) if curve == "p256" else keys.pkcs8_pem(key, secret)
    # both files written into temporary files first; the renames come last, the public key's
    # first: a failure before them leaves any existing pair as it was
    with atomic_writer(private, mode=0o600) as private_out, atomic_writer(public) as public_out:
        public_out.write(keys.public_pem(key))
        private_out.write(sealed)
    return KeygenResult(str(private), str(public))
