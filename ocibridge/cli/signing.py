"""The ``sign`` and ``verify`` commands, and the ``--verify-key`` flag of commands that read.

Registered on the main parser by :func:`register`, as every command group is (cli/parser.py).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ocibridge.api.session import POLICY_ENV
from ocibridge.cli.args import key_values
from ocibridge.cli.common import (
    CommandAdder,
    add_signed_name,
    add_signing_key,
    add_transfer_flags,
    transfer_options,
)
from ocibridge.core.lazyimport import LazyModule
from ocibridge.core.terminal import one_line, printable
from ocibridge.errors import OcibridgeError

if TYPE_CHECKING:  # the API modules are light; what they run (``cryptography``) loads in the calls
    from ocibridge.api import policy as policy_api
    from ocibridge.api import signing as signing_api
    from ocibridge.api.policy import Verification
else:
    policy_api = LazyModule("ocibridge.api.policy")
    signing_api = LazyModule("ocibridge.api.signing")


def add_verify_flags(p: argparse.ArgumentParser,
                     key_help: str = "refuse the source unless signed by this public key (repeatable)") -> None:
    """``--verify-key``: refuse the source unless a signature verifies with one of these keys
    (``key_help``: what the command does with them); ``--policy``: the containers policy file to
    obey (else the one found, docs/signing.md). :func:`policy_from_args` reads both."""
    p.add_argument("--verify-key", action="append", default=[], metavar="PUB", help=key_help)
    add_policy_flag(p)


def add_policy_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--policy", metavar="FILE", default=None,
                   help=f"containers policy.json to obey (default: ${POLICY_ENV}, "
                        "~/.config/containers/policy.json, /etc/containers/policy.json)")


def policy_from_args(args: argparse.Namespace) -> Verification | None:
    """The keys of ``--verify-key`` and the ``--policy`` file; None: the policy file found."""
    if not args.verify_key and args.policy is None:
        return None  # what verification() answers, without loading its module (a plain pull)
    return policy_api.verification(args.verify_key, args.policy)


def register(command: CommandAdder) -> None:
    """Add ``sign``, ``verify-dir`` and ``verify`` (``attest`` is cli/evidence.py's)."""
    p = add_signing_key(command("sign", cmd_sign),
               "ECDSA P-256 private key: PEM, or a cosign key file (password in $COSIGN_PASSWORD)")
    p.add_argument("--form", choices=signing_api.SIGN_FORM_CHOICES, default="both",
                   help="classic (.sig tag), bundle (OCI 1.1 referrer), both (default), oms (OpenSSF "
                        "model signing: the file list, as a referrer) or all three")
    p.add_argument("-a", "--annotation", action="append", default=[], metavar="KEY=VALUE",
                   help="signed claim (repeatable)")
    p.add_argument("--oms-hash", choices=signing_api.OMS_HASHES, default="sha256",
                   help="OMS form: the file hash (default sha256: no weight byte is read; blake2b and blake3 "
                        "read every file)")
    p.add_argument("--oms-shard-size", type=int, metavar="BYTES", default=None,
                   help="OMS form: hash each file in shards of BYTES (the spec's default is 1000000000)")
    add_signed_name(p, "repository name to sign as (default: where REF is)")

    p = command("verify-dir", cmd_verify_dir)
    p.add_argument("dir", metavar="DIR", help="the model: a directory, or the one file of a single-file model")
    p.add_argument("--signature", metavar="FILE", help="the OMS signature (model_signing's model.sig; "
                   "default: DIR/model.sig, where pull puts it)")
    p.add_argument("--key", action="append", required=True, metavar="PUB", help="public key (PEM; repeatable)")
    p.add_argument("--ignore-paths", action="append", default=[], metavar="PATH",
                   help="leave this path of DIR out (relative to DIR, or absolute inside it; repeatable)")
    p.add_argument("--ignore-unsigned-files", action="store_true",
                   help="let files the signature does not list be (the listed ones are all still checked)")

    p = command("verify", cmd_verify)
    p.add_argument("ref", metavar="REF", help="artifact reference, or a file with --bundle")
    p.add_argument("--key", action="append", default=[], metavar="PUB", help="public key (PEM; repeatable)")
    p.add_argument("--certificate-identity", metavar="SAN", help="keyless: the signer's identity")
    p.add_argument("--certificate-oidc-issuer", metavar="URL", help="keyless: the identity's OIDC issuer")
    p.add_argument("--trusted-root", metavar="FILE", help="keyless: sigstore trusted_root.json (offline)")
    p.add_argument("-a", "--annotation", action="append", default=[], metavar="KEY=VALUE",
                   help="claim every accepted signature must carry (repeatable)")
    p.add_argument("--bundle", metavar="FILE", help="verify the file REF against this bundle file")
    p.add_argument("--files", action="store_true",
                   help="vouch for the model's files only, as 'pull --verify-key' into a directory does (an OMS "
                        "signature counts); by default the manifest, as copy, mirror and k8s need")
    p.add_argument("--attestation-type", metavar="TYPE",
                   help="verify a signed in-toto attestation of this predicate type (a URI, or cosign's "
                        "name: cyclonedx, slsaprovenance1, ...) instead of a signature; attestations never "
                        "count as signatures otherwise")
    add_transfer_flags(p)

    p = command("keygen", cmd_keygen)
    p.add_argument("prefix", metavar="PREFIX", nargs="?", default="cosign",
                   help="write PREFIX.key and PREFIX.pub (default: cosign, as cosign generate-key-pair)")
    p.add_argument("--password-stdin", action="store_true",
                   help=f"read the private key's password from stdin (else ${signing_api.PASSWORD_ENV}, "
                        "else a prompt on a terminal)")
    p.add_argument("--overwrite", "--force", action="store_true", help="replace existing key files")
    p.add_argument("--curve", choices=("p256", "p384", "p521"), default="p256",
                   help="p256 (default): cosign's key file, for every signature form; p384, p521: for --form oms "
                        "only, a PEM PKCS#8 key (encrypted with the password, none if it is empty) that "
                        "model_signing and openssl read too")


def cmd_sign(args: argparse.Namespace) -> int:
    claims = key_values(args.annotation)  # usage mistakes first, before any key or store is opened
    options = signing_api.SignOptions(key=args.key, identity=args.identity, claims=claims)
    result = signing_api.sign(args.ref, options, form=args.form, transfer=transfer_options(args),
                              oms_hash=args.oms_hash, oms_shard_size=args.oms_shard_size)
    where = ", ".join(f"{form}: {place}" for form, place in result.written.items())
    same = f" (already there: {', '.join(result.unchanged)})" if result.unchanged else ""
    skipped = "".join(f"\n  {form}: not written: {why}" for form, why in result.skipped.items())
    _emit(args, result.as_dict(), f"signed {args.ref} ({result.digest})\n  {where}{same}{skipped}")
    return 0




def cmd_keygen(args: argparse.Namespace) -> int:
    result = signing_api.keygen(args.prefix, password=_new_password(args), overwrite=args.overwrite,
                                curve=args.curve)
    _emit(args, result.as_dict(),
          f"Private key written to {result.private_key}\nPublic key written to {result.public_key}")
    return 0


def _new_password(args: argparse.Namespace) -> str | None:
    """The new key's password: stdin (``--password-stdin``), ``$COSIGN_PASSWORD`` (None: keygen
    reads it), or asked twice on a terminal as cosign asks; no terminal and none given: refused."""
    import os
    import sys

    if args.password_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    if os.environ.get(signing_api.PASSWORD_ENV) is not None:
        return None
    if not sys.stdin.isatty():
        raise OcibridgeError(f"no password for the private key: set ${signing_api.PASSWORD_ENV} "
                             "or pass --password-stdin")
    import getpass

    first = getpass.getpass("Enter password for private key: ")
    if getpass.getpass("Enter password for private key again: ") != first:
        raise OcibridgeError("the passwords do not match")
    return first


def cmd_verify(args: argparse.Namespace) -> int:
    options = signing_api.VerifyOptions(
        keys=args.key, certificate_identity=args.certificate_identity,
        certificate_oidc_issuer=args.certificate_oidc_issuer, trusted_root=args.trusted_root,
        claims=key_values(args.annotation), attestation_type=args.attestation_type, files=args.files)
    transfer = None if args.bundle else transfer_options(args)  # a file and a bundle: no registry
    result = signing_api.verify(args.ref, options, bundle=args.bundle or None, transfer=transfer)
    lines = [one_line(f"  {s.form} by {s.signer}" + (f" (claims: {_show(s.claims)})" if s.claims else ""))
             for s in result.signatures]
    what = f"attestation(s) of type {result.attestation_type}" if result.attestation_type else \
        "signature(s) of its files" if args.files else "signature(s)"
    _emit(args, result.as_dict(),
          f"verified {args.ref} ({result.digest}): {len(result.signatures)} {what}\n" + "\n".join(lines))
    return 0


def cmd_verify_dir(args: argparse.Namespace) -> int:
    result = signing_api.verify_dir(args.dir, args.key, signature=args.signature or None,
                                    ignore_paths=args.ignore_paths, ignore_unsigned_files=args.ignore_unsigned_files)
    _emit(args, result.as_dict(),
          f"verified {args.dir}: {result.files} file(s) signed by {result.signer} (OMS)")
    return 0


def _show(claims: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(claims.items()))


def _emit(args: argparse.Namespace, data: dict[str, Any], text: str) -> None:
    print(json.dumps(data, indent=2, sort_keys=True) if args.json else printable(text))
