"""Test PKI made with `cryptography`: a CA, a loopback server certificate, a token-signing cert.

Everything is generated per test session into a temp directory, so no key material lives in
the repository and nothing depends on the machine's trust store.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = dt.timedelta(days=2)


@dataclass(frozen=True)
class TLSFiles:
    """PEM files for a TLS server signed by a private CA."""

    ca_file: Path
    cert_file: Path
    key_file: Path
    cert_dir: Path  # holds ca.crt only: the layout skopeo/containers expect for --cert-dir
    client_cert: Path  # a client certificate signed by the CA (mTLS), PEM
    client_key: Path


@dataclass(frozen=True)
class SigningKey:
    """An ECDSA P-256 key with its self-signed certificate, for signing registry JWTs."""

    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate
    cert_file: Path

    @property
    def cert_der_b64(self) -> str:
        """The certificate as standard base64 DER, the form a JWT `x5c` header carries."""
        return base64.b64encode(self.cert.public_bytes(serialization.Encoding.DER)).decode()

    @property
    def libtrust_kid(self) -> str:
        """Key id as docker/libtrust computes it (what distribution matches a JWT `kid` against)."""
        return libtrust_key_id(self.key.public_key())


def libtrust_key_id(public_key: ec.EllipticCurvePublicKey) -> str:
    """sha256 of the DER SubjectPublicKeyInfo, first 240 bits, base32, in 4-char groups."""
    der = public_key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    b32 = base64.b32encode(hashlib.sha256(der).digest()[:30]).decode()
    return ":".join(b32[i : i + 4] for i in range(0, len(b32), 4))


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=5)


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def make_tls_files(directory: Path, hostnames: tuple[str, ...] = ("localhost",)) -> TLSFiles:
    """Create a CA and a server certificate valid for 127.0.0.1, ::1 and `hostnames`."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(_name("ocibridge test CA"))
        .issuer_name(_name("ocibridge test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_now())
        .not_valid_after(_now() + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = [
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.IPAddress(ipaddress.ip_address("::1")),
    ]
    sans += [x509.DNSName(h) for h in hostnames]
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("127.0.0.1"))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_now())
        .not_valid_after(_now() + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    ca_file = directory / "ca.pem"
    ca_file.write_bytes(_pem(ca_cert))
    cert_file = directory / "server.pem"
    cert_file.write_bytes(_pem(cert))
    key_file = directory / "server-key.pem"
    _write_key(key_file, key)
    cert_dir = directory / "certs.d"
    cert_dir.mkdir(exist_ok=True)
    (cert_dir / "ca.crt").write_bytes(_pem(ca_cert))
    client_key = ec.generate_private_key(ec.SECP256R1())
    client = (
        x509.CertificateBuilder()
        .subject_name(_name("ocibridge test client"))
        .issuer_name(ca_cert.subject)
        .public_key(client_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_now())
        .not_valid_after(_now() + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    client_cert = directory / "client.cert"
    client_cert.write_bytes(_pem(client))
    client_key_file = directory / "client.key"
    _write_key(client_key_file, client_key)
    return TLSFiles(ca_file=ca_file, cert_file=cert_file, key_file=key_file, cert_dir=cert_dir,
                    client_cert=client_cert, client_key=client_key_file)


def make_signing_key(directory: Path, common_name: str = "ocibridge test token issuer") -> SigningKey:
    """A self-signed ECDSA cert; distribution trusts it via `rootcertbundle`."""
    directory.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_now())
        .not_valid_after(_now() + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file = directory / "token-signing.pem"
    cert_file.write_bytes(_pem(cert))
    return SigningKey(key=key, cert=cert, cert_file=cert_file)
