"""The ``sign`` and ``verify`` commands, and the ``--verify-key`` flag of commands that read.

Registered on the main parser by :func:`register`, as every command group is (cli/parser.py).
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ocibridge.cli.args import key_values
from ocibridge.cli.common import CommandAdder, add_transfer_flags, transfer_options
from ocibridge.core import environment
from ocibridge.core.limits import read_at_most
from ocibridge.core.terminal import one_line, printable
from ocibridge.errors import SignatureError, TooLarge, UsageError

if TYPE_CHECKING:  # imported when a command runs: ``cryptography`` costs every other command time
    from ocibridge.signing.containers_policy import UsePolicy
    from ocibridge.signing.verify import Verified, VerifyPolicy

FORMS = ("classic", "bundle")
ALL_FORMS = ("classic", "bundle", "oms")


def add_verify_flags(p: argparse.ArgumentParser) -> None:
    """``--verify-key``: refuse the source unless a signature verifies with one of these keys;
    ``--policy``: the containers policy file to obey (else the one found, docs/signing.md)."""
    p.add_argument("--verify-key", action="append", default=[], metavar="PUB",
                   help="refuse the source unless signed by this public key (repeatable)")
    add_policy_flag(p)


def add_policy_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--policy", metavar="FILE", default=None,
                   help=f"containers policy.json to obey (default: ${environment.POLICY}, "
                        "~/.config/containers/policy.json, /etc/containers/policy.json)")


def policy_from_args(args: argparse.Namespace) -> VerifyPolicy | UsePolicy | None:
    """The keys of ``--verify-key`` and the ``--policy`` file; None: the policy file found."""
    paths = args.verify_key
    keys = None
    if paths:  # without, cryptography stays unloaded (~35 ms at start)
        from ocibridge.signing.verify import VerifyPolicy

        keys = VerifyPolicy.from_files(paths)
    policy = args.policy
    if policy is None:
        return keys
    from ocibridge.signing.containers_policy import UsePolicy

    return UsePolicy(keys=keys, file=policy)


def _open(args: argparse.Namespace, located: Any = None, write: bool = False) -> Any:
    from ocibridge.kinds.locate import Role, locate
    from ocibridge.kinds.targets import open_store_target

    return open_store_target(located or locate(args.ref, Role.MODEL), for_write=write,
                             options=transfer_options(args).registry_options())


def _keyed(p: argparse.ArgumentParser, key_help: str) -> argparse.ArgumentParser:
    """REF and the private key of a command that signs (sign, attest)."""
    p.add_argument("ref", metavar="REF")
    p.add_argument("--key", required=True, metavar="KEY", help=key_help)
    return p


def _named_as(p: argparse.ArgumentParser, identity_help: str) -> None:
    """The repository a signing command names (``--identity``), then the registry flags."""
    p.add_argument("--identity", metavar="REPOSITORY", help=identity_help)
    add_transfer_flags(p)


def register(command: CommandAdder) -> None:
    """Add ``sign``, ``verify-dir`` and ``verify`` (``attest`` is cli/evidence.py's)."""
    p = _keyed(command("sign", cmd_sign),
               "ECDSA P-256 private key: PEM, or a cosign key file (password in $COSIGN_PASSWORD)")
    p.add_argument("--form", choices=[*ALL_FORMS, "both", "all"], default="both",
                   help="classic (.sig tag), bundle (OCI 1.1 referrer), both (default), oms (OpenSSF "
                        "model signing: the file list, as a referrer) or all three")
    p.add_argument("-a", "--annotation", action="append", default=[], metavar="KEY=VALUE",
                   help="signed claim (repeatable)")
    _named_as(p, "repository name to sign as (default: where REF is)")

    p = command("verify-dir", cmd_verify_dir)
    p.add_argument("dir", metavar="DIR")
    p.add_argument("--signature", metavar="FILE", help="the OMS signature (model_signing's model.sig; "
                   "default: DIR/model.sig, where pull puts it)")
    p.add_argument("--key", action="append", required=True, metavar="PUB", help="public key (PEM; repeatable)")

    p = command("verify", cmd_verify)
    p.add_argument("ref", metavar="REF", help="artifact reference, or a file with --bundle")
    p.add_argument("--key", action="append", default=[], metavar="PUB", help="public key (PEM; repeatable)")
    p.add_argument("--certificate-identity", metavar="SAN", help="keyless: the signer's identity")
    p.add_argument("--certificate-oidc-issuer", metavar="URL", help="keyless: the identity's OIDC issuer")
    p.add_argument("--trusted-root", metavar="FILE", help="keyless: sigstore trusted_root.json (offline)")
    p.add_argument("-a", "--annotation", action="append", default=[], metavar="KEY=VALUE",
                   help="claim every accepted signature must carry (repeatable)")
    p.add_argument("--bundle", metavar="FILE", help="verify the file REF against this bundle file")
    p.add_argument("--attestation-type", metavar="TYPE",
                   help="verify a signed in-toto attestation of this predicate type (a URI, or cosign's "
                        "name: cyclonedx, slsaprovenance1, ...) instead of a signature; attestations never "
                        "count as signatures otherwise")
    add_transfer_flags(p)


def cmd_sign(args: argparse.Namespace) -> int:
    from ocibridge.signing import keys
    from ocibridge.signing.sign import SignOptions, sign_artifact

    claims = key_values(args.annotation)  # usage mistakes first, before any key or store is opened
    key = keys.load_private_key(args.key)
    target = _open(args)
    subject = target.store.resolve(target.reference)
    forms: Any = {"both": FORMS, "all": ALL_FORMS}.get(args.form, (args.form,))
    options = SignOptions(identity=args.identity or target.store.describe(), claims=claims, forms=forms)
    result = sign_artifact(target.store, subject, key, options)
    where = ", ".join(f"{form}: {place}" for form, place in result.written.items())
    same = f" (already there: {', '.join(result.unchanged)})" if result.unchanged else ""
    _emit(args, result.as_dict(), f"signed {args.ref} ({subject.digest})\n  {where}{same}")
    return 0


def _policy(args: argparse.Namespace) -> VerifyPolicy:
    from ocibridge.signing.bundle import SIGN_PREDICATE_TYPE
    from ocibridge.signing.verify import VerifyPolicy

    if args.attestation_type:
        from ocibridge.signing.attest import predicate_type_of

        args.attestation_type = predicate_type_of(args.attestation_type)
    return VerifyPolicy.from_files(args.key, identity=args.certificate_identity,
                                   issuer=args.certificate_oidc_issuer, trusted_root=args.trusted_root,
                                   claims=key_values(args.annotation),
                                   predicate_type=args.attestation_type or SIGN_PREDICATE_TYPE)


def cmd_verify(args: argparse.Namespace) -> int:
    from ocibridge.signing.policy import Trusted, verify_before_use

    policy = _policy(args)
    if args.bundle:
        blob, digest = verify_blob(Path(args.ref), Path(args.bundle), policy)
        verified = [blob]
    else:
        target = _open(args)
        subject = target.store.resolve(target.reference)
        trusts = Trusted.STATEMENT if policy.attestation else Trusted.MANIFEST
        verified = verify_before_use(target.store, subject, policy, name=args.ref, trusts=trusts)
        digest = subject.digest
    lines = [one_line(f"  {v.form} by {v.signer}" + (f" (claims: {_show(v.claims)})" if v.claims else ""))
             for v in verified]
    _emit(args, {"verified": True, "digest": digest, "signatures": [v.as_dict() for v in verified]},
          f"verified {args.ref} ({digest}): {len(verified)} {_what(policy)}\n" + "\n".join(lines))
    return 0


def _what(policy: VerifyPolicy) -> str:
    return f"attestation(s) of type {policy.predicate_type}" if policy.attestation else "signature(s)"


def cmd_verify_dir(args: argparse.Namespace) -> int:
    from ocibridge.signing.oms import SIGNATURE_FILE
    from ocibridge.signing.omsdir import verify_directory
    from ocibridge.signing.verify import VerifyPolicy

    policy = VerifyPolicy.from_files(args.key)
    signature = Path(args.signature) if args.signature else Path(args.dir) / SIGNATURE_FILE
    if not args.signature and not signature.is_file():
        raise UsageError(f"{args.dir} holds no {SIGNATURE_FILE}: pass --signature FILE")
    verified, statement = verify_directory(Path(args.dir), signature, policy)
    _emit(args, {"verified": True, "signer": verified.signer, "model": statement.name,
                 "files": len(statement.files)},
          f"verified {args.dir}: {len(statement.files)} file(s) signed by {verified.signer} (OMS)")
    return 0


def verify_blob(path: Path, bundle_path: Path, policy: VerifyPolicy) -> tuple[Verified, str]:
    """A file against a bundle file (cosign verify-blob --bundle): keyless or key; with the
    file's digest. The file is hashed as it streams, the bundle read up to MAX_BUNDLE_BYTES."""
    from ocibridge.signing.bundle import parse_bundle
    from ocibridge.signing.keyless import verify_keyless
    from ocibridge.signing.verify import Verified, verify_key_bundle

    try:
        bundle = read_at_most(bundle_path, MAX_BUNDLE_BYTES)
        if len(bundle) > MAX_BUNDLE_BYTES:
            raise TooLarge(f"{bundle_path}: larger than {MAX_BUNDLE_BYTES} bytes, not a bundle")
        sha = _sha256_of_file(path)  # streamed: the file to verify may be any size
    except OSError as e:
        raise SignatureError(f"{e.filename}: {e.strerror}") from None
    digest = "sha256:" + sha.hex()
    content = parse_bundle(bundle)
    try:
        if content.has_certificate:
            if policy.identity is None:
                raise SignatureError("keyless bundle: pass --certificate-identity, --certificate-oidc-issuer "
                                     "and --trusted-root")
            claims = verify_keyless(bundle, policy.identity, dsse=content.envelope is not None, digest=digest,
                                    artifact_sha256=sha, predicate_type=policy.predicate_type)
            return Verified("bundle", policy.identity.identity, claims, str(bundle_path)), digest
        return verify_key_bundle(content, digest, None, policy, str(bundle_path), signed_sha256=sha), digest
    except SignatureError as e:
        raise SignatureError(f"{path}: refused: {e}") from None


#: A sigstore bundle is a few KiB (a certificate chain, a signature, a log entry).
MAX_BUNDLE_BYTES = 4 << 20


def _sha256_of_file(path: Path) -> bytes:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.digest()


def _show(claims: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(claims.items()))


def _emit(args: argparse.Namespace, data: dict[str, Any], text: str) -> None:
    print(json.dumps(data, indent=2, sort_keys=True) if args.json else printable(text))
