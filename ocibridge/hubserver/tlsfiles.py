"""serve's ``--cert`` and ``--key`` checked before anything starts, each mistake told in words.

uvicorn loads them after the banner, and what OpenSSL says names no file and no mistake
("No such file or directory", "[SSL] PEM lib (_ssl.c:3905)"): a private key given as the
certificate, the same key file twice, a certificate given as the key, the key of another
certificate, an encrypted key whose passphrase cannot be had each get a line of their own.
"""

from __future__ import annotations

import os
import re
from typing import Any

from ocibridge.errors import OcibridgeError, UsageError

#: bytes of a key file read to tell whether a passphrase protects it (its PEM header lines)
PEM_HEAD = 256


def check_tls_files(cert: str, key: str) -> None:
    """Load ``--cert`` and ``--key`` as uvicorn will, once, before anything starts: uvicorn loads
    them after the banner, and its error names no file ("No such file or directory", "[SSL] PEM
    lib"). A key protected by a passphrase is only opened: loading it here would ask for the
    passphrase, and uvicorn asks again."""
    import ssl

    _pem_head("--cert", cert)
    if b"ENCRYPTED" in _pem_head("--key", key):  # PKCS#8 "BEGIN ENCRYPTED PRIVATE KEY", or "Proc-Type: 4,ENCRYPTED"
        return
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert, key)
        return
    except ssl.SSLError as e:
        mismatch = e.reason == "KEY_VALUES_MISMATCH"
    except (OSError, ValueError):
        mismatch = False
    raise UsageError(_tls_problem(cert, key, mismatch))


#: bytes of a TLS file read to say what it is when OpenSSL refuses it (a chain of certificates fits)
PEM_WHOLE = 1 << 20
_PRIVATE_KEY = re.compile(rb"-----BEGIN [A-Z ]*PRIVATE KEY-----")
_CERTIFICATE = b"-----BEGIN CERTIFICATE-----"


def _tls_problem(cert: str, key: str, mismatch: bool) -> str:
    """What is wrong with a certificate and key OpenSSL refused, in words: its own reason is a
    code and a line of _ssl.c ('[SSL] PEM lib (_ssl.c:3905)'), the same for most mistakes."""
    cert_text, key_text = _pem_head("--cert", cert, PEM_WHOLE), _pem_head("--key", key, PEM_WHOLE)
    if _CERTIFICATE not in cert_text:
        if _PRIVATE_KEY.search(cert_text):
            return f"--cert {cert}: a private key, not a certificate{_why_a_key(cert, key, key_text)}"
        return f"--cert {cert}: not a PEM certificate (no '{_CERTIFICATE.decode()}' line)"
    if not _PRIVATE_KEY.search(key_text):
        if _CERTIFICATE in key_text:
            return f"--key {key}: a certificate, not a private key"
        return f"--key {key}: not a PEM private key (no '-----BEGIN PRIVATE KEY-----' line)"
    if mismatch:
        return f"--key {key} does not go with --cert {cert}: it is the key of another certificate"
    return (f"--cert {cert} --key {key}: a PEM certificate and a private key, but they cannot be read (a file "
            "cut short or edited?)")


def _why_a_key(cert: str, key: str, key_text: bytes) -> str:
    """How a private key came to be the --cert, as far as the --key file tells: swapped only
    when --key holds the certificate."""
    if _CERTIFICATE in key_text:
        return " (are --cert and --key swapped?)"
    try:
        same = os.path.samefile(cert, key)
    except OSError:
        same = False
    if same:
        return " (--cert and --key name the same key)"
    if _PRIVATE_KEY.search(key_text):
        return f" (--key {key} is a private key too; --cert takes the certificate that goes with it)"
    return ""


def load_tls(config: Any, cert: str, key: str) -> None:
    """Load uvicorn's config (its TLS context) before the banner, so that a key whose passphrase
    is wrong (OpenSSL asks at the terminal) is one line naming the key: uvicorn's own load, once
    serving, ended with OpenSSL's 'Invalid argument' or '[SSL] PEM lib (_ssl.c:3926)'. An
    encrypted key was not checked with its certificate (:func:`check_tls_files`): a certificate
    that cannot be read is told as for a key in the clear; a key that is not the certificate's
    fails as a wrong passphrase does (OSError EINVAL, after OpenSSL's prompt), so the line names
    both."""
    try:
        config.load()
    except OSError:  # (ssl.SSLError is one)
        if b"ENCRYPTED" not in _pem_head("--key", key):  # (the files were checked: something else)
            raise
        if not _certificates_in(cert):  # (read before the key: no passphrase was asked)
            raise UsageError(_tls_problem(cert, key, False)) from None
        raise OcibridgeError(f"--key {key}: the key is encrypted and could not be used with --cert {cert} (a wrong "
                             "passphrase, no terminal to ask for it, or the key of another certificate)") from None


def _certificates_in(cert: str) -> bool:
    """Whether OpenSSL reads PEM certificates in ``cert`` (on their own: no key, no passphrase)."""
    import ssl

    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cert)
    except (OSError, ValueError):  # (ssl.SSLError is an OSError)
        return False
    return True


def _pem_head(flag: str, path: str, size: int = PEM_HEAD) -> bytes:
    """The first bytes of a TLS file (its PEM header lines); one line naming ``flag`` and the
    file when it cannot be read."""
    try:
        with open(path, "rb") as f:
            return f.read(size)
    except OSError as e:
        raise UsageError(f"{flag} {path}: {e.strerror or e}") from None
