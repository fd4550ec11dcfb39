"""OMS conformance cases the tests make themselves (no copied file): models of our own bytes,
keys from ``cryptography``, bundles signed by the real ``model_signing`` library and then
broken on purpose. What ocibridge must do with each case is in tests/oms_cases.py."""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import model_signing
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.oms_cases import MT, MT_KEYS
from tests.signing_keys import key_pair


def content(label: str, size: int) -> bytes:
    """``size`` deterministic bytes of every value (binary, not text), different per label."""
    out = bytearray()
    while len(out) < size:
        out += hashlib.sha256(f"{label}:{len(out)}".encode()).digest()
    return bytes(out[:size])


#: the two files a signer signs and the one it is told to leave out (the shape of
#: model-transparency's test models; our own bytes)
TWO_FILES = {"signme-1": b"the first signed file\n", "signme-2": content("signme-2", 1000), "ignore-me": b""}
MULTI_FILE = {"config.json": b'{"layers": 2}\n', "weights.bin": content("weights", 70_000),
              "subdir/adapter.bin": content("adapter", 3000)}


def write_model(root: Path, files: dict[str, bytes]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root


def library_sign(model: Path, private: Path, bundle: Path, ignored: tuple[str, ...] = ()) -> None:
    hashing = model_signing.hashing.Config().set_ignored_paths(paths=[model / p for p in ignored] + [bundle])
    model_signing.signing.Config().use_elliptic_key_signer(private_key=private).set_hashing_config(
        hashing).sign(model, bundle)


# -- verify cases: a model, a bundle, the key given to verify-dir --------------------------------
@dataclass(frozen=True)
class Made:
    model: Path
    bundle: Path
    key: Path
    flags: tuple[str, ...] = ()
    private: Path | None = None  # the signer's key, to sign an edited statement again


def _signed(work: Path, files: dict[str, bytes] = TWO_FILES, single: str | None = None) -> Made:
    """``files`` signed by model_signing with a fresh P-256 key (``ignore-me`` left out), or the
    one file ``single`` of them as a single-file model."""
    root = write_model(work / "model", files)
    private, public = key_pair(work / "keys", "signer")
    bundle = work / "model.sig"
    if single:
        library_sign(root / single, private, bundle)
        return Made(root / single, bundle, public, (), private)
    ignored = ("ignore-me",) if "ignore-me" in files else ()
    library_sign(root, private, bundle, ignored)
    return Made(root, bundle, public, tuple(a for p in ignored for a in ("--ignore-paths", p)), private)


def _edit_bundle(made: Made, edit: Callable[[dict[str, Any]], object]) -> Made:
    doc = json.loads(made.bundle.read_text())
    edit(doc)
    made.bundle.write_text(json.dumps(doc))
    return made


def _rewrite(made: Made, change: Callable[[bytes], bytes]) -> Made:
    made.bundle.write_bytes(change(made.bundle.read_bytes()))
    return made


def _pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding, what an envelope's signature signs."""
    kind = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def _edit_statement(made: Made, edit: Callable[[dict[str, Any]], object], payload_type: str | None = None,
                    sign_again: bool = False) -> Made:
    """The statement (and the envelope's payloadType) changed after signing; signed again with
    the signer's key when ``sign_again``, so only the statement's own checks can refuse it."""
    def change(doc: dict[str, Any]) -> None:
        envelope = doc["dsseEnvelope"]
        statement = json.loads(base64.b64decode(envelope["payload"]))
        edit(statement)
        payload = json.dumps(statement).encode()
        envelope["payload"] = base64.b64encode(payload).decode()
        envelope["payloadType"] = payload_type or envelope["payloadType"]
        if sign_again:
            assert made.private is not None
            key = serialization.load_pem_private_key(made.private.read_bytes(), None)
            assert isinstance(key, ec.EllipticCurvePrivateKey)
            signature = key.sign(_pae(envelope["payloadType"], payload), ec.ECDSA(hashes.SHA256()))
            envelope["signatures"][0]["sig"] = base64.b64encode(signature).decode()
            public = serialization.load_pem_public_key(made.key.read_bytes())
            assert isinstance(public, ec.EllipticCurvePublicKey)
            public.verify(signature, _pae(envelope["payloadType"], payload), ec.ECDSA(hashes.SHA256()))
    return _edit_bundle(made, change)


def _mt_sigstore(work: Path, key: Path | None = None) -> Made:
    """model-transparency's v1.1.0 sigstore bundle and model (copied to ``work``)."""
    model = work / "model"
    shutil.copytree(MT / "v1.1.0-sigstore", model, ignore=shutil.ignore_patterns("model.sig"))
    return Made(model, MT / "v1.1.0-sigstore" / "model.sig", key or MT_KEYS / "signing-key-pub.pem",
                ("--ignore-paths", "ignore-me"))


def _certificate(work: Path, days: int = 365) -> Made:
    """TWO_FILES signed by model_signing with a certificate chain: a fresh P-256 leaf certified by
    model-transparency's intermediate CA (its published test key), valid ``days`` from now (a
    negative number: already expired); verified with the root CA's certificate file."""
    issuer_key = serialization.load_pem_private_key((MT_KEYS / "int-ca-priv.pem").read_bytes(), None)
    assert isinstance(issuer_key, rsa.RSAPrivateKey)
    issuer = x509.load_pem_x509_certificate((MT_KEYS / "int-ca-cert.pem").read_bytes())
    leaf_key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    start, end = sorted((now - datetime.timedelta(days=400), now + datetime.timedelta(days=days)))
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "signer")]))
            .issuer_name(issuer.subject).public_key(leaf_key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(end)
            .add_extension(x509.KeyUsage(True, False, False, False, False, False, False, False, False), True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), False)
            .sign(issuer_key, hashes.SHA256()))
    private, leaf = work / "leaf.key", work / "leaf.pem"
    private.write_bytes(leaf_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
    leaf.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    model, bundle = write_model(work / "model", TWO_FILES), work / "model.sig"
    hashing = model_signing.hashing.Config().set_ignored_paths(paths=[model / "ignore-me", bundle])
    model_signing.signing.Config().use_certificate_signer(
        private_key=private, signing_certificate=leaf, certificate_chain=[MT_KEYS / "int-ca-cert.pem"]
    ).set_hashing_config(hashing).sign(model, bundle)
    return Made(model, bundle, MT_KEYS / "ca-cert.pem", ("--ignore-paths", "ignore-me"))


def _other_ca(work: Path) -> Path:
    """A self-signed CA certificate that certified nothing here."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "another root")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now)
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), True).sign(key, hashes.SHA256()))
    path = work / "other-ca.pem"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path


def _changed(made: Made, write: dict[str, bytes] | None = None, delete: tuple[str, ...] = ()) -> Made:
    for name, data in (write or {}).items():
        (made.model / name).write_bytes(data)
    for name in delete:
        (made.model / name).unlink()
    return made


_OMS_TYPE = "https://model_signing/signature/v1.0"
#: statement edits of the suite's "malformed" category
_EDITS: dict[str, Callable[[dict[str, Any]], object]] = {
    "empty-resources": lambda s: s["predicate"].update(resources=[]),
    "no-predicate": lambda s: s.pop("predicate"),
    "no-subject": lambda s: s.update(subject=[]),
    "wrong-statement-type": lambda s: s.update(_type="https://in-toto.io/Statement/v0.1"),
    "wrong-predicate": lambda s: s.update(predicateType="https://example.com/not-a-model-signature/v1"),
    "wrong-payload-type": lambda s: None,  # the envelope's payloadType is what changes
}


def _edited(what: str, sign_again: bool) -> Callable[[Path], Made]:
    kind = "application/json" if what == "wrong-payload-type" else None
    return lambda work: _edit_statement(_signed(work), _EDITS[what], kind, sign_again)


#: case name (without ``generated/``) -> how to make it in a fresh directory
VERIFY: dict[str, Callable[[Path], Made]] = {
    "key-two-files": _signed,
    "key-multi-file": lambda work: _signed(work, MULTI_FILE),
    "key-single-file-directory": lambda work: _signed(work, {"model.bin": content("model", 5000)}),
    "key-single-file-model": lambda work: _signed(work, {"model.bin": content("model", 5000)}, single="model.bin"),
    "key-ignore-unsigned-files": lambda work: replace(
        _changed(_signed(work), {"extra.bin": b"added after signing\n"}),
        flags=("--ignore-paths", "ignore-me", "--ignore-unsigned-files")),
    "key-extra-file": lambda work: _changed(_signed(work), {"injected.bin": b"added after signing\n"}),
    "key-missing-file": lambda work: _changed(_signed(work), delete=("signme-2",)),
    "key-tampered-content": lambda work: _changed(_signed(work), {"signme-1": b"the first signed filf\n"}),
    "key-wrong-key": lambda work: replace(_signed(work), key=key_pair(work / "keys", "other")[1]),
    "key-verify-as-certificate": lambda work: replace(_signed(work), key=MT_KEYS / "ca-cert.pem"),
    "bundle-garbage": lambda work: _rewrite(_signed(work), lambda _: b'{"mediaType": "application/vnd.dev.sig'),
    "bundle-truncated": lambda work: _rewrite(_signed(work), lambda data: data[:100]),
    "bundle-empty": lambda work: _rewrite(_signed(work), lambda _: b""),
    "bundle-wrong-mediatype": lambda work: _edit_bundle(_signed(work),
                                                        lambda d: d.update(mediaType="application/json")),
    "bundle-missing-envelope": lambda work: _edit_bundle(_signed(work), lambda d: d.pop("dsseEnvelope")),
    "bundle-no-signature": lambda work: _edit_bundle(_signed(work),
                                                     lambda d: d["dsseEnvelope"].update(signatures=[])),
    **{f"edited-{what}": _edited(what, sign_again=False) for what in _EDITS},
    **{f"resigned-{what}": _edited(what, sign_again=True) for what in _EDITS},
    "certificate-chain": _certificate,
    "certificate-expired": lambda work: _certificate(work, days=-30),
    "certificate-wrong-ca": lambda work: replace(_certificate(work), key=_other_ca(work)),
    "sigstore-tampered-content": lambda work: _changed(_mt_sigstore(work), {"signme-1": b"tampered\n"}),
    "sigstore-verify-as-key": lambda work: _mt_sigstore(work, key_pair(work / "keys", "p256")[1]),
}


# -- roundtrips: a model ocibridge pushes, signs, pulls; then both verifiers --------------------
@dataclass(frozen=True)
class Roundtrip:
    files: dict[str, bytes]
    signed: tuple[str, ...] = ()  # what the statement lists, when signing succeeds
    ignore_paths: tuple[str, ...] = ()
    ignore_unsigned: bool = False
    sig_inside: bool = False  # verify the pulled directory, model.sig inside it
    curve: ec.EllipticCurve | None = None  # a fresh key of this curve; None: model-transparency's P-384 key
    symlinks: dict[str, str] = field(default_factory=dict)

    def lay_out(self, work: Path) -> Path:
        model = write_model(work / "model", self.files)
        (work / "outside.bin").write_bytes(b"a file beside the model\n")
        for name, target in self.symlinks.items():
            (model / name).symlink_to(target)
        return model

    def keys(self, work: Path) -> tuple[Path, Path]:
        if self.curve is None:
            return MT_KEYS / "signing-key.pem", MT_KEYS / "signing-key-pub.pem"
        return key_pair(work / "keys", "signer", curve=self.curve)


_TWO = Roundtrip(TWO_FILES, ("signme-1", "signme-2"), ("ignore-me",))
_HIDDEN = {".cache/weights.bin": content("cached", 2000), ".local/share/data.bin": b"data\n",
           "model.bin": content("model", 4000)}

ROUNDTRIPS: dict[str, Roundtrip] = {
    "key-simple": _TWO,
    "key-simple-deterministic": _TWO,
    "key-ignore-paths": _TWO,
    "key-ignore-unsigned": replace(_TWO, ignore_unsigned=True),
    "key-sig-inside-model": replace(_TWO, sig_inside=True),
    "key-p256": replace(_TWO, curve=ec.SECP256R1()),
    "key-p384": replace(_TWO, curve=ec.SECP384R1()),
    "key-p521": replace(_TWO, curve=ec.SECP521R1()),
    "key-multi-file": Roundtrip(MULTI_FILE, ("config.json", "subdir/adapter.bin", "weights.bin")),
    "key-single-file": Roundtrip({"model.bin": content("model", 4000)}, ("model.bin",)),
    "key-binary-content": Roundtrip({"header.bin": bytes(range(256)), "weights.bin": content("w", 9000)},
                                    ("header.bin", "weights.bin")),
    "key-default-ignores": Roundtrip({".gitattributes": b"*.bin filter=lfs\n", ".gitignore": b"*.tmp\n",
                                      ".github/ci.yml": b"on: push\n", "model.bin": b"weights\n"}, ("model.bin",)),
    "key-dotfile-included": Roundtrip({".config": b"x=1\n", ".env.example": b"TOKEN=\n", "model.bin": b"w\n"},
                                      (".config", ".env.example", "model.bin")),
    "key-empty-file": Roundtrip({"empty.bin": b"", "signme-1": b"signed\n"}, ("empty.bin", "signme-1")),
    "key-files-in-hidden-dir": Roundtrip(_HIDDEN),
    "key-files-in-hidden-dir-ignored": Roundtrip(_HIDDEN, (".local/share/data.bin", "model.bin"), (".cache",)),
    "key-special-chars-path": Roundtrip({"file (copy).bin": b"1\n", "normal.bin": b"2\n",
                                         "path with spaces/model.bin": b"3\n"},
                                        ("file (copy).bin", "normal.bin", "path with spaces/model.bin")),
    "key-unicode-filename": Roundtrip({"weights.bin": b"w\n", "模型.bin": b"m\n"}, ("weights.bin", "模型.bin")),
    "key-empty-model-rejected": Roundtrip({".gitignore": b""}),
    "key-empty-directory-rejected": Roundtrip({}),
    "key-symlink-default-rejected": replace(_TWO, symlinks={"link-to-signme": "signme-1"}),
    "key-symlink-outside-root": replace(_TWO, symlinks={"outside-link": "../outside.bin"}),
    "key-symlink-cycle": replace(_TWO, symlinks={"cycle-link": "."}),
}
