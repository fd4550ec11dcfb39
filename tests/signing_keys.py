"""Fresh ECDSA key pairs for signing tests (P-256 unless a curve is named), written as PEM files."""

from __future__ import annotations

from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec


def key_pair(directory: Path, name: str = "cosign", curve: ec.EllipticCurve | None = None) -> tuple[Path, Path]:
    """(private key path, public key path): PKCS#8 PEM, unencrypted."""
    directory.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(curve or ec.SECP256R1())
    private = directory / f"{name}.key"
    public = directory / f"{name}.pub"
    private.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    public.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                     serialization.PublicFormat.SubjectPublicKeyInfo))
    return private, public
