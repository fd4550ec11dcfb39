"""OMS signatures travelling with files: beside a pull as ``model.sig``, and pushed with a model.

``pull --with-signatures`` writes the OMS signature of the pulled manifest where the
``model_signing`` CLI looks for it, so the directory verifies with OpenSSF tooling once it
has left the registry. The signature is chosen before any file is written: with a key policy,
one that verifies and signs exactly the manifest's files; without one, one whose statement
lists exactly the manifest's files (its key is the reader's to check, e.g. ``verify-dir``).

The files are checked against the statement before ``model.sig`` is written. Under whole-file
SHA-256 (the ``files`` method, what push and ``model_signing`` use by default) a file the pull
checked as it landed is not read again: a raw layer's file was checked against the layer's
digest, which is its SHA-256 (by that digest, or by the chunk table a manifest binds where a
verified signature of that manifest vouched for the table: ``api/pull_ops._table_may_check``),
and a tar entry was hashed as it was unpacked (:func:`landed_digests_wanted`); that digest is
compared with the statement's as a hash of the file would be. Every other file (kept as it was
with ``-k``, laid over by a changeset, any other OMS hash or shards) is hashed as before.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ocibridge.core import boundedjson
from ocibridge.core.fsutil import atomic_write_bytes
from ocibridge.errors import SignatureError
from ocibridge.oci.models import Descriptor
from ocibridge.signing.attach import attach_bundle, find_signatures
from ocibridge.signing.oms import (
    GIT_PATHS,
    OMS_PREDICATE_TYPE,
    SHA256_FILES,
    SIGNATURE_FILE,
    Hashing,
    OmsStatement,
    compare_files,
    is_ignored,
    parse_oms,
    split_resource,
)
from ocibridge.signing.omsdir import hash_files
from ocibridge.signing.omsfiles import ManifestListing
from ocibridge.signing.sigstorebundle import parse_bundle
from ocibridge.signing.verify import VerifyPolicy, is_oms, verify_oms_signature
from ocibridge.stores.base import Store, WritableStore


@dataclass
class OmsSignature:
    """An OMS bundle of a manifest and the statement it holds."""

    bundle: bytes
    statement: OmsStatement


def choose_oms_signature(store: Store, subject: Descriptor, policy: VerifyPolicy | None) -> OmsSignature:
    """The first OMS referrer of ``subject`` that signs exactly its files (and verifies under
    ``policy`` when there is one); raises when there is none."""
    reasons: list[str] = []
    listing = ManifestListing(store, subject)
    for _, data in find_signatures(store, subject).bundles:
        if not is_oms(data):
            continue
        try:
            statement = _statement(data, policy)
            compare_files(statement.files, listing.of(statement), f"manifest {subject.digest[:19]}")
        except SignatureError as e:
            reasons.append(str(e))
            continue
        return OmsSignature(data, statement)
    why = f": {'; '.join(dict.fromkeys(reasons))}" if reasons else ""
    raise SignatureError(f"{subject.digest} has no usable OMS signature (sign --form oms){why}")


def _statement(data: bytes, policy: VerifyPolicy | None) -> OmsStatement:
    if policy is not None:
        return verify_oms_signature(parse_bundle(data), policy, "referrer")[1]
    try:
        payload = base64.b64decode(boundedjson.loads(data)["dsseEnvelope"]["payload"], validate=True)
    except (ValueError, KeyError, TypeError):
        raise SignatureError("malformed OMS bundle") from None
    return parse_oms(payload)


def landed_digests_wanted(signature: OmsSignature) -> bool:
    """Whether the pull should hash each tar entry as it unpacks it: the statement lists whole
    files by SHA-256, so that hash stands in for a read of the file once it is in place."""
    return signature.statement.hashing == SHA256_FILES


def write_beside(signature: OmsSignature, directory: Path, fetched: list[str],
                 landed: Mapping[str, str] | None = None) -> Path:
    """Check the ``fetched`` files in ``directory`` against the statement (a partial pull
    checks what it fetched against the full signature; git's files and the paths the statement
    ignores are left out, as every OMS verifier leaves them out), then write ``model.sig``.
    ``landed``: path -> the digest the pull checked a file's bytes against as they landed
    (``PullResult.landed``): used for that file instead of reading it again."""
    statement = signature.statement
    signed_paths = statement.paths
    fetched = [rel for rel in fetched if not is_ignored(rel, (*GIT_PATHS, *statement.ignored))]
    present = [rel for rel in fetched if rel in signed_paths or (statement.hashing.shard_size is not None
                                                                  and not (directory / rel).stat().st_size)]
    unsigned = sorted(set(fetched) - set(present))
    if unsigned:
        raise SignatureError(f"{directory}: {', '.join(unsigned[:3])} not signed by the OMS signature")
    fetched_resources = {name: digest for name, digest in statement.files.items()
                         if split_resource(name, statement.hashing)[0] in present}
    compare_files(fetched_resources, _resources(directory, present, statement.hashing, landed or {}),
                  str(directory))
    target = directory / SIGNATURE_FILE
    atomic_write_bytes(target, signature.bundle)
    return target


def _resources(directory: Path, names: list[str], hashing: Hashing, landed: Mapping[str, str]) -> dict[str, str]:
    """The resources of the files ``names``: under whole-file SHA-256, a file's SHA-256 the pull
    proved as it landed is its resource as it is; every other file is read and hashed."""
    if hashing != SHA256_FILES:
        return hash_files(directory, names, hashing)
    proven = {rel: landed[rel].removeprefix("sha256:") for rel in names
              if landed.get(rel, "").startswith("sha256:")}
    unproven = [rel for rel in names if rel not in proven]
    return {**proven, **(hash_files(directory, unproven, hashing) if unproven else {})}


def directory_signature(directory: Path, signature: Path) -> OmsSignature:
    """``push DIR --signature FILE``, before anything is sent: the OMS signature (made by the
    ``model_signing`` tools on DIR) must sign exactly DIR's files. Its key is not checked here
    (``verify`` and ``--verify-key`` check it wherever the model goes)."""
    from ocibridge.signing.omsdir import check_directory, read_signature

    data = read_signature(signature)
    try:
        statement = _statement(data, None)
        check_directory(directory, statement, signature)
    except SignatureError as e:
        raise SignatureError(f"{signature}: refused: {e}") from None
    return OmsSignature(data, statement)


def attach_oms(store: WritableStore, subject: Descriptor, signature: OmsSignature) -> Descriptor:
    """Attach ``signature`` as a referrer of the pushed manifest ``subject``, once the
    manifest's files are checked to be exactly the signed ones."""
    statement = signature.statement
    compare_files(statement.files, ManifestListing(store, subject).of(statement), f"pushed manifest {subject.digest}")
    desc, _ = attach_bundle(store, subject, signature.bundle, OMS_PREDICATE_TYPE)
    return desc
