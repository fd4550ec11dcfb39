"""OpenSSF model signing (OMS): the in-toto statement of the OMS specification v1.0, read and written.

An OMS signature is a sigstore bundle v0.3 whose DSSE payload is an in-toto statement v1 with
predicate type ``https://model_signing/signature/v1.0`` (a verifier takes any ``v1.<minor>``:
minor versions only add optional fields). Its predicate lists the model (``resources``): one
entry per file (``files``: POSIX path relative to the model root) or per byte range of each
file (``shards``: ``PATH:START:END``, END exclusive, ranges of ``shard_size`` bytes, an empty
file none), each with the hex digest of the ``hash_type`` the serialization names (sha256,
blake2b or blake3), sorted by name; its one
subject names the model and carries the SHA-256 of the concatenated raw digests in that order.
``serialization`` says how a verifier re-hashes a model: method, hash, no symlinks, the root
paths ignored (the signature file ``model.sig`` and git's files by default).

A single-file model is listed under its file name, or under ``.`` as ``model_signing`` 1.x
writes it. The statement is signed over digests only, so it survives the model leaving the
registry: a pulled directory, a cache or a copy made by other tools verifies against it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ocibridge.core import boundedjson
from ocibridge.core.fsutil import safe_relpath
from ocibridge.errors import SignatureError, UnsafePath
from ocibridge.signing.sigstorebundle import STATEMENT_V1

OMS_PREDICATE_TYPE = "https://model_signing/signature/v1.0"
_OMS_V1 = re.compile(r"https://model_signing/signature/v1\.[0-9]{1,6}")
#: Where the ``model_signing`` CLI reads and writes a model's signature by default.
SIGNATURE_FILE = "model.sig"
#: Root paths the library leaves out of a signature by default (``ignore_git_paths``).
GIT_PATHS = (".git", ".gitattributes", ".github", ".gitignore")
DEFAULT_IGNORED = (SIGNATURE_FILE, *GIT_PATHS)
#: The file hashes of the OMS algorithm registry, by the hex length of their digests.
HASH_TYPES = {"sha256": 64, "blake2b": 128, "blake3": 64}
#: The shard size the specification recommends (1 GB) when shards are asked for without one.
DEFAULT_SHARD_SIZE = 1_000_000_000
#: The name ``model_signing`` gives the one file of a single-file model.
SINGLE_FILE = "."
_SHARD = re.compile(r"(.*):([0-9]{1,20}):([0-9]{1,20})", re.S)


def is_oms_predicate(value: object) -> bool:
    """Whether ``value`` is an OMS predicate type this verifier reads (v1.0, v1.1, ...)."""
    return isinstance(value, str) and _OMS_V1.fullmatch(value) is not None


@dataclass(frozen=True)
class Hashing:
    """How a model is hashed into resources: ``hash_type`` over whole files (``shard_size``
    None: the ``files`` method) or over byte ranges of ``shard_size`` bytes (``shards``)."""

    hash_type: str = "sha256"
    shard_size: int | None = None

    def __post_init__(self) -> None:
        if self.hash_type not in HASH_TYPES:
            raise SignatureError(f"OMS hash {self.hash_type[:20]!r} is not one of {', '.join(HASH_TYPES)}")
        if self.shard_size is not None and self.shard_size < 1:
            raise SignatureError("OMS shard size must be a positive number of bytes")

    @property
    def method(self) -> str:
        return "files" if self.shard_size is None else "shards"

    def describe(self) -> str:
        shards = "" if self.shard_size is None else f" of {self.shard_size} bytes"
        return f"{self.method}{shards}/{self.hash_type}"

    def serialization(self, ignored: Iterable[str]) -> dict[str, Any]:
        doc: dict[str, Any] = {"method": self.method, "hash_type": self.hash_type}
        if self.shard_size is not None:
            doc["shard_size"] = self.shard_size
        doc.update(allow_symlinks=False, ignore_paths=list(ignored))
        return doc


SHA256_FILES = Hashing()


def shard_name(path: str, start: int, end: int) -> str:
    return f"{path}:{start}:{end}"


def split_resource(name: str, hashing: Hashing) -> tuple[str, int]:
    """(file path, start offset) of a resource name: a shard's suffix is the last two
    colon-separated numbers (a file name may hold colons); raises for a malformed one."""
    if hashing.shard_size is None:
        return name, 0
    match = _SHARD.fullmatch(name)
    if match is None or int(match[2]) >= int(match[3]) or int(match[3]) - int(match[2]) > hashing.shard_size:
        raise SignatureError(f"OMS statement has a malformed shard name {name[:80]!r}")
    return match[1], int(match[2])


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


def oms_statement(name: str, resources: Mapping[str, str], hashing: Hashing = SHA256_FILES,
                  ignored: Iterable[str] = DEFAULT_IGNORED) -> bytes:
    """The statement signing ``resources`` (resource name -> hex digest, hashed as ``hashing``
    says) as the model ``name``, leaving ``ignored`` root paths out. Resources are sorted by
    name in code point order, as the specification says (``model_signing`` sorts by path
    components, then shard start; verifiers take either: the subject digest follows the list)."""
    ordered = sorted(resources.items())
    doc = {
        "_type": STATEMENT_V1,
        "subject": [{"name": name, "digest": {"sha256": root_digest(ordered)}}],
        "predicateType": OMS_PREDICATE_TYPE,
        "predicate": {
            "serialization": hashing.serialization(ignored),
            "resources": [{"name": path, "algorithm": hashing.hash_type, "digest": hexdigest}
                          for path, hexdigest in ordered],
        },
    }
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass
class OmsStatement:
    """What a (verified) OMS statement signs: the model name, its resources (name -> hex
    digest: files, or shards of files), the paths it ignores, how it hashed them."""

    name: str
    files: dict[str, str]
    ignored: tuple[str, ...]
    hashing: Hashing = SHA256_FILES

    @property
    def paths(self) -> set[str]:
        """The file paths the resources are of."""
        return {split_resource(name, self.hashing)[0] for name in self.files}


def predicate_type_of(payload: bytes) -> object:
    """The statement's predicate type, or None when it is not a JSON object (checked later)."""
    try:
        doc = boundedjson.loads(payload)
    except ValueError:
        return None
    return doc.get("predicateType") if isinstance(doc, dict) else None


def parse_oms(payload: bytes) -> OmsStatement:
    """Read a signed OMS statement, refusing anything this verifier cannot check exactly:
    another predicate, an unknown method or hash, unsafe names, symlinks followed, a subject
    that is not the digest of the listed resources."""
    try:
        doc = boundedjson.loads(payload)
        kind, subjects, predicate = doc["_type"], doc["subject"], doc["predicate"]
        serialization, resources = predicate["serialization"], predicate["resources"]
        method, hash_type = serialization["method"], serialization["hash_type"]
        ignore = serialization.get("ignore_paths") or []
    except (ValueError, KeyError, TypeError):
        raise SignatureError("OMS statement is malformed") from None
    if kind != STATEMENT_V1:
        raise SignatureError(f"OMS statement has type {str(kind)[:80]!r}")
    if not is_oms_predicate(doc.get("predicateType")):
        raise SignatureError(f"statement is not an OMS signature ({OMS_PREDICATE_TYPE} or another v1.*)")
    hashing = _hashing(method, hash_type, serialization)
    if serialization.get("allow_symlinks") not in (False, None, "false"):
        raise SignatureError("OMS statement was made following symlinks (allow_symlinks); not verified here")
    if not isinstance(subjects, list) or len(subjects) != 1 or not isinstance(subjects[0], dict):
        raise SignatureError("OMS statement must have exactly one subject")
    subject = subjects[0]
    expected = (subject.get("digest") or {}).get("sha256") if isinstance(subject.get("digest"), dict) else None
    files = _resources(resources, hashing)
    if not isinstance(expected, str) or root_digest(files) != expected:
        raise SignatureError("OMS statement subject is not the digest of the files it lists")
    if not isinstance(ignore, list) or not all(isinstance(p, str) for p in ignore):
        raise SignatureError("OMS statement ignore_paths is malformed")
    try:
        ignored = tuple(safe_relpath(p, "OMS ignore path") for p in ignore)
    except UnsafePath as e:
        raise SignatureError(str(e)) from None
    statement = OmsStatement(str(subject.get("name", "")), dict(files), ignored, hashing)
    if any(is_ignored(path, ignored) for path in statement.paths):
        raise SignatureError("OMS statement lists a file under a path it ignores")
    if SINGLE_FILE in statement.paths and len(statement.paths) > 1:
        raise SignatureError("OMS statement lists '.' (a single-file model) among other files")
    return statement


def _hashing(method: object, hash_type: object, serialization: dict[str, Any]) -> Hashing:
    if method not in ("files", "shards") or hash_type not in HASH_TYPES:
        raise SignatureError(f"OMS serialization {str(method)[:20]}/{str(hash_type)[:20]} is not one the "
                             f"specification defines (files or shards; {', '.join(HASH_TYPES)})")
    size = serialization.get("shard_size")
    if method == "files":
        if size is not None:
            raise SignatureError("OMS statement gives a shard_size to the files method")
        return Hashing(str(hash_type))
    # model_signing 1.x writes it as a JSON float (protobuf Struct numbers): 1000.0 is 1000 bytes
    if isinstance(size, float) and size.is_integer() and 0 < size < 1 << 62:
        size = int(size)
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise SignatureError("OMS shards statement has no positive shard_size")
    return Hashing(str(hash_type), size)


def _resources(resources: Any, hashing: Hashing) -> list[tuple[str, str]]:
    if not isinstance(resources, list) or not resources:
        raise SignatureError("OMS statement lists no files")
    hex_digest = re.compile(f"[0-9a-f]{{{HASH_TYPES[hashing.hash_type]}}}")
    algorithms = {hashing.hash_type}
    if hashing.shard_size is not None:  # model_signing 1.x names a shard's hash so; the spec, by hash_type
        algorithms.add(f"{hashing.hash_type}-sharded-{hashing.shard_size}")
    files: list[tuple[str, str]] = []
    seen: set[str] = set()
    for item in resources:
        if not isinstance(item, dict) or item.get("algorithm") not in algorithms:
            raise SignatureError(f"OMS statement has a resource that is not a {hashing.hash_type} digest")
        name, hexdigest = item.get("name"), item.get("digest")
        if not isinstance(name, str) or not isinstance(hexdigest, str) or not hex_digest.fullmatch(hexdigest):
            raise SignatureError("OMS statement has a malformed resource")
        path, _ = split_resource(name, hashing)
        if path != SINGLE_FILE:
            try:
                normal = safe_relpath(path, "OMS file name")
            except UnsafePath as e:
                raise SignatureError(str(e)) from None
            if normal != path:
                raise SignatureError(f"OMS statement names {name[:80]!r} not in normal form")
        if name in seen:
            raise SignatureError(f"OMS statement names {name[:80]!r} twice")
        seen.add(name)
        files.append((name, hexdigest))
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
