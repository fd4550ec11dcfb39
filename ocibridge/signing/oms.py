"""OpenSSF model signing (OMS): the in-toto statement ``model_signing`` 1.x signs, read and written.

An OMS signature is a sigstore bundle v0.3 whose DSSE payload is an in-toto statement v1 with
predicate type ``https://model_signing/signature/v1.0``. Its predicate lists every file of the
model (``resources``: POSIX path relative to the model root, ``sha256``, hex digest) sorted as
``pathlib.PurePosixPath`` sorts; its one subject names the model and carries the SHA-256 of the
concatenated raw file digests in that order. ``serialization`` says how a verifier re-hashes a
directory: by whole files with SHA-256, no symlinks, some root paths ignored (the signature file
``model.sig`` and git's files, which the library ignores by default).

The statement is signed over file digests only, so it survives the model leaving the registry:
a pulled directory, a cache or a copy made by other tools verifies against it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ocibridge.core.fsutil import safe_relpath
from ocibridge.errors import SignatureError, UnsafePath
from ocibridge.signing.bundle import STATEMENT_V1

OMS_PREDICATE_TYPE = "https://model_signing/signature/v1.0"
#: Where the ``model_signing`` CLI reads and writes a model's signature by default.
SIGNATURE_FILE = "model.sig"
#: Root paths the library leaves out of a signature by default (``ignore_git_paths``).
GIT_PATHS = (".git", ".gitattributes", ".github", ".gitignore")
DEFAULT_IGNORED = (SIGNATURE_FILE, *GIT_PATHS)
_HEX64 = re.compile(r"[0-9a-f]{64}")


def path_key(name: str) -> list[str]:
    """The order ``PurePosixPath`` sorts in (by components: ``a/b`` before ``a.txt``)."""
    return name.split("/")


def is_ignored(rel: str, ignored: Iterable[str]) -> bool:
    """Whether ``rel`` is one of ``ignored`` or inside one (the library's ``is_relative_to``)."""
    return any(rel == p or rel.startswith(p + "/") for p in ignored)


def root_digest(files: Iterable[tuple[str, str]]) -> str:
    """The subject digest: SHA-256 over the raw file digests, in the order given."""
    h = hashlib.sha256()
    for _, hexdigest in files:
        h.update(bytes.fromhex(hexdigest))
    return h.hexdigest()


def model_name(identity: str) -> str:
    """An informative model name: the last component of a repository or layout reference."""
    return re.split(r"[/:]", identity.rstrip("/"))[-1] or "model"


def oms_statement(name: str, files: Mapping[str, str]) -> bytes:
    """The statement signing ``files`` (path -> sha256 hex) as the model ``name``."""
    ordered = sorted(files.items(), key=lambda item: path_key(item[0]))
    doc = {
        "_type": STATEMENT_V1,
        "subject": [{"name": name, "digest": {"sha256": root_digest(ordered)}}],
        "predicateType": OMS_PREDICATE_TYPE,
        "predicate": {
            "serialization": {"method": "files", "hash_type": "sha256", "allow_symlinks": False,
                              "ignore_paths": list(DEFAULT_IGNORED)},
            "resources": [{"name": path, "algorithm": "sha256", "digest": hexdigest}
                          for path, hexdigest in ordered],
        },
    }
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass
class OmsStatement:
    """What a (verified) OMS statement signs: the model name, its files, the paths it ignores."""

    name: str
    files: dict[str, str]
    ignored: tuple[str, ...]


def predicate_type_of(payload: bytes) -> object:
    """The statement's predicate type, or None when it is not a JSON object (checked later)."""
    try:
        doc = json.loads(payload)
    except ValueError:
        return None
    return doc.get("predicateType") if isinstance(doc, dict) else None


def parse_oms(payload: bytes) -> OmsStatement:
    """Read a signed OMS statement, refusing anything this verifier cannot check exactly:
    another predicate, shards or other hashes, unsafe names, a subject that is not the digest
    of the listed files."""
    try:
        doc = json.loads(payload)
        kind, subjects, predicate = doc["_type"], doc["subject"], doc["predicate"]
        serialization, resources = predicate["serialization"], predicate["resources"]
        method, hash_type = serialization["method"], serialization["hash_type"]
        ignore = serialization.get("ignore_paths") or []
    except (ValueError, KeyError, TypeError):
        raise SignatureError("OMS statement is malformed") from None
    if kind != STATEMENT_V1:
        raise SignatureError(f"OMS statement has type {str(kind)[:80]!r}")
    if doc.get("predicateType") != OMS_PREDICATE_TYPE:
        raise SignatureError(f"statement is not an OMS signature ({OMS_PREDICATE_TYPE})")
    if method != "files" or hash_type != "sha256":
        raise SignatureError(f"OMS serialization {str(method)[:20]}/{str(hash_type)[:20]} is not verified "
                             "here (files/sha256 only)")
    if not isinstance(subjects, list) or len(subjects) != 1 or not isinstance(subjects[0], dict):
        raise SignatureError("OMS statement must have exactly one subject")
    subject = subjects[0]
    expected = (subject.get("digest") or {}).get("sha256") if isinstance(subject.get("digest"), dict) else None
    files = _resources(resources)
    if not isinstance(expected, str) or root_digest(files) != expected:
        raise SignatureError("OMS statement subject is not the digest of the files it lists")
    if not isinstance(ignore, list) or not all(isinstance(p, str) for p in ignore):
        raise SignatureError("OMS statement ignore_paths is malformed")
    try:
        ignored = tuple(safe_relpath(p, "OMS ignore path") for p in ignore)
    except UnsafePath as e:
        raise SignatureError(str(e)) from None
    listed = dict(files)
    if any(is_ignored(path, ignored) for path in listed):
        raise SignatureError("OMS statement lists a file under a path it ignores")
    return OmsStatement(str(subject.get("name", "")), listed, ignored)


def _resources(resources: Any) -> list[tuple[str, str]]:
    if not isinstance(resources, list) or not resources:
        raise SignatureError("OMS statement lists no files")
    files: list[tuple[str, str]] = []
    seen: set[str] = set()
    for item in resources:
        if not isinstance(item, dict) or item.get("algorithm") != "sha256":
            raise SignatureError("OMS statement has a resource that is not a sha256 file digest")
        name, hexdigest = item.get("name"), item.get("digest")
        if not isinstance(name, str) or not isinstance(hexdigest, str) or not _HEX64.fullmatch(hexdigest):
            raise SignatureError("OMS statement has a malformed resource")
        try:
            path = safe_relpath(name, "OMS file name")
        except UnsafePath as e:
            raise SignatureError(str(e)) from None
        if path != name or path in seen:
            raise SignatureError(f"OMS statement names {name[:80]!r} twice or not in normal form")
        seen.add(path)
        files.append((path, hexdigest))
    return files


def compare_files(signed: Mapping[str, str], actual: Mapping[str, str], what: str) -> None:
    """Raise unless ``actual`` (path -> sha256 hex) is exactly the signed file list."""
    extra = sorted(set(actual) - set(signed), key=path_key)
    missing = sorted(set(signed) - set(actual), key=path_key)
    changed = sorted((p for p in set(signed) & set(actual) if signed[p] != actual[p]), key=path_key)
    problems = []
    if extra:
        problems.append(f"not signed: {_few(extra)}")
    if missing:
        problems.append(f"missing: {_few(missing)}")
    if changed:
        problems.append(f"content differs: {_few(changed)}")
    if problems:
        raise SignatureError(f"{what} is not what the OMS signature signs ({'; '.join(problems)})")


def _few(paths: list[str]) -> str:
    shown = ", ".join(p[:80] for p in paths[:3])
    return shown + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
