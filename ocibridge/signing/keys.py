"""Keys: ECDSA P-256, P-384 and P-521 in PEM (PKCS#8, SEC 1, SubjectPublicKeyInfo,
certificates) and cosign's own encrypted key files.

Each curve signs with the hash of its size (P-256: SHA-256, P-384: SHA-384, P-521: SHA-512), as
the sigstore algorithm registry pairs them and ``model_signing`` signs and verifies. The cosign
forms are made with P-256 keys only (:func:`require_p256`); the OpenSSF model signing form takes
all three curves, which its specification requires.

Signatures use RFC 6979 deterministic ECDSA: the same key over the same bytes gives the same
signature, so signing an artifact twice writes nothing new. Verifiers cannot tell the difference
(an ECDSA signature verifies the same whichever nonce made it).

cosign's ``ENCRYPTED SIGSTORE PRIVATE KEY`` (and older ``ENCRYPTED COSIGN PRIVATE KEY``) is a
JSON document: scrypt derives a key from the password, NaCl secretbox seals the PKCS#8 DER key.
scrypt comes from ``cryptography``; secretbox (XSalsa20-Poly1305) from PyNaCl, the maintained
binding of libsodium, installed with the ``signing`` extra.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from ocibridge.core import boundedjson
from ocibridge.core.limits import MAX_SMALL_INPUT, read_small_file
from ocibridge.errors import SignatureError
from ocibridge.signing import PASSWORD_ENV, env_password

COSIGN_PEM_TYPES = (b"ENCRYPTED SIGSTORE PRIVATE KEY", b"ENCRYPTED COSIGN PRIVATE KEY")

PrivateKey = ec.EllipticCurvePrivateKey
PublicKey = ec.EllipticCurvePublicKey


def _read(path: str | os.PathLike[str], what: str) -> bytes:
    return read_small_file(path, MAX_SMALL_INPUT, what, SignatureError)


#: curve name -> (what people call it, the hash its signatures use)
CURVES: dict[str, tuple[str, type[hashes.HashAlgorithm]]] = {
    "secp256r1": ("P-256", hashes.SHA256),
    "secp384r1": ("P-384", hashes.SHA384),
    "secp521r1": ("P-521", hashes.SHA512),
}


def _ecdsa(key: object, path: str | os.PathLike[str]) -> None:
    if not isinstance(key, (ec.EllipticCurvePrivateKey, ec.EllipticCurvePublicKey)):
        raise SignatureError(f"{path}: not an ECDSA key (ocibridge signs with ECDSA P-256, P-384 or P-521)")
    if key.curve.name not in CURVES:
        raise SignatureError(f"{path}: ECDSA key on {key.curve.name}, not P-256, P-384 or P-521")


def curve_of(key: PrivateKey | PublicKey) -> str:
    """P-256, P-384 or P-521."""
    return CURVES[key.curve.name][0]


def require_p256(key: PrivateKey | PublicKey, path: str | os.PathLike[str], why: str) -> None:
    """Refuse another curve where only P-256 is used (``why``: the form that needs it)."""
    if not isinstance(key.curve, ec.SECP256R1):
        raise SignatureError(f"{path}: ECDSA key on {key.curve.name}, not P-256 ({why})")


def _hash(key: PrivateKey | PublicKey) -> hashes.HashAlgorithm:
    return CURVES[key.curve.name][1]()


def load_private_key(path: str | os.PathLike[str], password: bytes | None = None, *,
                     any_curve: bool = False, password_env: str = PASSWORD_ENV, flag: str = "") -> PrivateKey:
    """A P-256 private key from PEM (P-384 and P-521 too with ``any_curve``, for the OMS form);
    the password defaults to ``$password_env``, else ``$COSIGN_PASSWORD``. ``flag``: the option
    that named the key, so that a message says which of two keys failed."""
    return private_key_from_pem(_read(path, "key"), f"{flag} {os.fspath(path)}" if flag else path, password,
                                any_curve=any_curve, password_env=password_env)


def private_key_from_pem(data: bytes, path: str | os.PathLike[str], password: bytes | None = None, *,
                         any_curve: bool = False, password_env: str = PASSWORD_ENV) -> PrivateKey:
    """:func:`load_private_key` of bytes already read (``path`` names them in messages)."""
    variable, source = password_env, "the password given"
    if password is None:
        value, variable = env_password(password_env)
        password, source = (None if value is None else value.encode()), f"${variable}"
    if any(b"BEGIN " + kind in data for kind in COSIGN_PEM_TYPES):
        key: object = _load_cosign_key(data, password or b"", path, source)
    else:
        try:
            key = serialization.load_pem_private_key(data, password or None)
        except TypeError:  # encrypted PKCS#8 without a password, or a password for a plain key
            hint = f"set {variable}" if not password else f"unset {variable}"
            raise SignatureError(f"{path}: key is {'encrypted' if not password else 'not encrypted'} "
                                 f"({hint})") from None
        except (ValueError, UnsupportedAlgorithm) as e:
            raise SignatureError(f"{path}: not a PEM private key ({_first_line(e)})") from None
    _ecdsa(key, path)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    if not any_curve:
        require_p256(key, path, "cosign signatures; --form oms signs with P-384 and P-521 keys too")
    return key


def _load_cosign_key(pem: bytes, password: bytes, path: str | os.PathLike[str], source: str) -> object:
    try:
        import nacl.exceptions
        import nacl.secret
    except ImportError:
        raise SignatureError(f"{path}: cosign key files need PyNaCl (pip install 'ocibridge[signing]')") from None
    try:
        body = b"".join(line for line in pem.strip().splitlines() if not line.startswith(b"-----"))
        doc = boundedjson.loads(base64.b64decode(body))
        kdf, cipher = doc["kdf"], doc["cipher"]
        if kdf["name"] != "scrypt" or cipher["name"] != "nacl/secretbox":
            raise SignatureError(f"{path}: unknown cosign key encryption {kdf['name']}/{cipher['name']}")
        params = kdf["params"]
        secret = Scrypt(salt=base64.b64decode(kdf["salt"]), length=32, n=int(params["N"]),
                        r=int(params["r"]), p=int(params["p"])).derive(password)
        box = nacl.secret.SecretBox(secret)
        der = box.decrypt(base64.b64decode(doc["ciphertext"]), base64.b64decode(cipher["nonce"]))
    except nacl.exceptions.CryptoError:
        raise SignatureError(f"{path}: wrong password for the cosign key ({source})") from None
    except (ValueError, KeyError, TypeError) as e:
        raise SignatureError(f"{path}: not a cosign key file ({_first_line(e)})") from None
    try:
        return serialization.load_der_private_key(der, None)
    except (ValueError, UnsupportedAlgorithm) as e:
        raise SignatureError(f"{path}: cosign key holds no usable key ({_first_line(e)})") from None


#: ``keygen --curve`` -> the curve: P-256 for every form, P-384 and P-521 for the OMS form
KEYGEN_CURVES: dict[str, type[ec.EllipticCurve]] = {
    "p256": ec.SECP256R1, "p384": ec.SECP384R1, "p521": ec.SECP521R1,
}


def generate_private_key(curve: str = "p256") -> PrivateKey:
    """A new key: P-256 (the curve cosign's ``generate-key-pair`` makes and every form signs
    with) unless ``curve`` names another of :data:`KEYGEN_CURVES`."""
    return ec.generate_private_key(KEYGEN_CURVES[curve]())


def pkcs8_pem(key: PrivateKey, password: bytes) -> bytes:
    """``key`` as PEM PKCS#8, as ``openssl genpkey`` writes it: encrypted with ``password``
    (``BEGIN ENCRYPTED PRIVATE KEY``, the best encryption ``cryptography`` offers) unless it is
    empty. ocibridge reads it with ``$COSIGN_PASSWORD``, ``model_signing`` with ``--password``."""
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password) if password else serialization.NoEncryption())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)


def encrypt_cosign_key(key: PrivateKey, password: bytes, *, n: int = 32768) -> bytes:
    """``key`` as cosign writes an encrypted key file (scrypt N, r=8, p=1 + secretbox)."""
    try:
        import nacl.secret
        import nacl.utils
    except ImportError:
        raise SignatureError("cosign key files need PyNaCl (pip install 'ocibridge[signing]')") from None

    salt, nonce = os.urandom(32), nacl.utils.random(nacl.secret.SecretBox.NONCE_SIZE)
    secret = Scrypt(salt=salt, length=32, n=n, r=8, p=1).derive(password)
    der = key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    sealed = nacl.secret.SecretBox(secret).encrypt(der, nonce).ciphertext
    doc = {
        "kdf": {"name": "scrypt", "params": {"N": n, "r": 8, "p": 1}, "salt": _b64(salt)},
        "cipher": {"name": "nacl/secretbox", "nonce": _b64(nonce)},
        "ciphertext": _b64(sealed),
    }
    body = base64.encodebytes(json.dumps(doc, separators=(",", ":")).encode()).decode()
    body = "".join(body.split())
    lines = [body[i:i + 64] for i in range(0, len(body), 64)]
    kind = COSIGN_PEM_TYPES[0].decode()
    return ("\n".join([f"-----BEGIN {kind}-----", *lines, f"-----END {kind}-----"]) + "\n").encode()


def load_public_key(path: str | os.PathLike[str]) -> PublicKey:
    """A P-256, P-384 or P-521 public key from a PEM public key or certificate."""
    return public_key_from_pem(_read(path, "public key"), path)


def public_key_from_pem(data: bytes, path: str | os.PathLike[str]) -> PublicKey:
    """:func:`load_public_key` of bytes already read (``path`` names them in messages)."""
    try:
        if b"BEGIN CERTIFICATE" in data:
            key: object = x509.load_pem_x509_certificate(data).public_key()
        else:
            key = serialization.load_pem_public_key(data)
    except (ValueError, UnsupportedAlgorithm) as e:
        raise SignatureError(f"{path}: not a PEM public key ({_first_line(e)})") from None
    _ecdsa(key, path)
    assert isinstance(key, ec.EllipticCurvePublicKey)
    return key


def public_pem(key: PrivateKey | PublicKey) -> bytes:
    public = key.public_key() if isinstance(key, ec.EllipticCurvePrivateKey) else key
    return public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def key_hint(key: PrivateKey | PublicKey) -> str:
    """What a bundle names its key by: base64 of the SHA-256 of the DER public key."""
    public = key.public_key() if isinstance(key, ec.EllipticCurvePrivateKey) else key
    der = public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return _b64(hashlib.sha256(der).digest())


def pem_hint(key: PrivateKey | PublicKey) -> str:
    """What ``model_signing`` names a key by (and checks): hex SHA-256 of the PEM public key."""
    return hashlib.sha256(public_pem(key)).hexdigest()


def sign(key: PrivateKey, data: bytes) -> bytes:
    """A DER ECDSA signature of ``data``, hashed as the curve says (RFC 6979: reproducible)."""
    return key.sign(data, ec.ECDSA(_hash(key), deterministic_signing=True))


def verifies(key: PublicKey, signature: bytes, data: bytes) -> bool:
    try:
        key.verify(signature, data, ec.ECDSA(_hash(key)))
    except InvalidSignature:
        return False
    return True


def verifies_prehashed(key: PublicKey, signature: bytes, sha256: bytes) -> bool:
    """:func:`verifies` for content given by its sha256, so a big file need never be in memory."""
    from cryptography.hazmat.primitives.asymmetric.utils import Prehashed

    try:
        key.verify(signature, sha256, ec.ECDSA(Prehashed(hashes.SHA256())))
    except InvalidSignature:
        return False
    return True


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _first_line(e: BaseException) -> str:
    return (str(e).splitlines() or [type(e).__name__])[0]
