"""A directory against an OMS signature: a pull, a model cache, a Hugging Face snapshot, or the
one file of a single-file model.

The signature is checked first (key, statement); then the directory's file names are compared
with the signed list (an extra or a missing file fails before any byte is hashed); then every
file is hashed, streaming, several at once, whole or shard by shard with the statement's hash.
Symlinks and special files are refused, as the OMS tools refuse them by default; the paths the
statement ignores (and git's files, which the ``model_signing`` verifier always ignores) are
left out.
"""

from __future__ import annotations

import contextlib
import os
import stat
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ocibridge.core.capacity import cpu_workers
from ocibridge.core.limits import read_small_file
from ocibridge.errors import SignatureError
from ocibridge.oci.digest import sha256_file as digest_file
from ocibridge.signing.oms import (
    GIT_PATHS,
    SHA256_FILES,
    SINGLE_FILE,
    Hashing,
    OmsStatement,
    compare_files,
    is_ignored,
    path_key,
)
from ocibridge.signing.omshash import hash_stream, hasher_factory
from ocibridge.signing.sigstorebundle import parse_bundle
from ocibridge.signing.verify import Verified, VerifyPolicy, verify_oms_signature

#: A sigstore bundle of a large model lists many files; it is still far from this.
MAX_OMS_SIGNATURE_BYTES = 64 << 20
#: files hashed at once at most (fewer where this process has fewer CPUs)
HASHING_AT_ONCE = 8


def read_signature(path: Path) -> bytes:
    """The signature file, refused when it cannot be a signature (too large, unreadable)."""
    return read_small_file(path, MAX_OMS_SIGNATURE_BYTES, "signature", SignatureError)


def list_files(root: Path, ignored: tuple[str, ...]) -> list[str]:
    """Every regular file under ``root`` (POSIX paths relative to it), ignored paths left out."""
    found: list[str] = []
    for top, dirs, names in os.walk(root, onerror=_raise):
        rel_top = Path(top).relative_to(root).as_posix()
        prefix = "" if rel_top == "." else rel_top + "/"
        for name in list(dirs):
            rel = prefix + name
            if is_ignored(rel, ignored):
                dirs.remove(name)
            elif os.path.islink(os.path.join(top, name)):
                raise SignatureError(f"{root}: {rel} is a symlink; OMS signatures cover regular files only")
        for name in names:
            rel = prefix + name
            if is_ignored(rel, ignored):
                continue
            mode = os.lstat(os.path.join(top, name)).st_mode
            if not stat.S_ISREG(mode):
                kind = "a symlink" if stat.S_ISLNK(mode) else "not a regular file"
                raise SignatureError(f"{root}: {rel} is {kind}; OMS signatures cover regular files only")
            found.append(rel)
    return sorted(found, key=path_key)


def _raise(error: OSError) -> None:
    raise SignatureError(f"{error.filename}: {error.strerror}")


def hash_files(root: Path, names: list[str], hashing: Hashing = SHA256_FILES,
               workers: int | None = None) -> dict[str, str]:
    """The resources (name -> hex digest, as ``hashing`` says) of the files ``names`` under
    ``root``, hashed in a pool (hashlib and blake3 release the GIL) of a thread per CPU this
    process may use: more only take turns on the same cores."""
    hasher_factory(hashing.hash_type)  # a missing blake3 is one line, before any file is opened
    workers = workers or cpu_workers(HASHING_AT_ONCE)
    try:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            parts = pool.map(lambda rel: _hash_one(root / rel, rel, hashing), names)
            return {name: digest for part in parts for name, digest in part.items()}
    except OSError as e:
        raise SignatureError(f"{e.filename}: {e.strerror}") from None


def _hash_one(path: Path, label: str, hashing: Hashing) -> dict[str, str]:
    if hashing == SHA256_FILES:
        return {label: digest_file(path)[0].removeprefix("sha256:")}
    with open(path, "rb") as f:
        return hash_stream(f.read, label, hashing)


def directory_ignores(root: Path, statement: OmsStatement, signature: Path,
                      extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    """What a directory's check leaves out: the statement's ignored paths, git's files, the
    ``extra`` paths the verifier names (``--ignore-paths``) and the signature file itself
    when it lies inside the directory."""
    ignored = [*statement.ignored, *GIT_PATHS, *extra]
    with contextlib.suppress(ValueError):
        ignored.append(signature.resolve().relative_to(root.resolve()).as_posix())
    return tuple(ignored)


@dataclass(frozen=True)
class DirectoryCheck:
    """What a directory is checked against besides the statement: root paths the verifier
    leaves out (``--ignore-paths``), and whether files the signature does not list are let
    be (``--ignore-unsigned-files``: the listed ones are still all checked)."""

    ignore_paths: tuple[str, ...] = ()
    ignore_unsigned: bool = False


def check_directory(root: Path, statement: OmsStatement, signature: Path,
                    check: DirectoryCheck = DirectoryCheck()) -> dict[str, str]:
    """Raise unless ``root`` (a directory, or the one file of a single-file model) holds
    exactly the signed files with the signed digests; the hashed resources on success."""
    if root.is_file() and not root.is_symlink():
        return _check_single_file(root, statement)
    if not root.is_dir():
        raise SignatureError(f"{root}: not a directory or a file")
    names = list_files(root, directory_ignores(root, statement, signature, check.ignore_paths))
    if check.ignore_unsigned:
        names = [name for name in names if name in statement.paths]
    listed = [name for name in names if statement.hashing.shard_size is None or (root / name).stat().st_size]
    if set(listed) != statement.paths:  # names first: an extra or missing file fails before any hashing
        compare_files(dict.fromkeys(statement.paths, ""), dict.fromkeys(listed, ""), str(root))
    _same_shard_count(root, listed, statement)
    actual = hash_files(root, listed, statement.hashing)
    compare_files(statement.files, actual, str(root))
    return actual


def _same_shard_count(root: Path, names: list[str], statement: OmsStatement) -> None:
    """Shards: the files' sizes must make as many shards as the statement lists, checked before
    any hashing (a tiny shard size in a statement not yet trusted cannot make hashing grow)."""
    size = statement.hashing.shard_size
    if size is None:
        return
    shards = sum(-(-(root / name).stat().st_size // size) for name in names)
    if shards != len(statement.files):
        raise SignatureError(f"{root} is not what the OMS signature signs (its files make {shards} shards of "
                             f"{size} bytes; the signature lists {len(statement.files)})")


def _check_single_file(path: Path, statement: OmsStatement) -> dict[str, str]:
    """A single-file model: its one file listed under its name, or under ``.`` as
    ``model_signing`` lists it."""
    label = SINGLE_FILE if statement.paths == {SINGLE_FILE} else path.name
    try:
        actual = _hash_one(path, label, statement.hashing)
    except OSError as e:
        raise SignatureError(f"{e.filename}: {e.strerror}") from None
    if statement.hashing.shard_size is not None and not actual:
        raise SignatureError(f"{path}: an empty file; a sharded OMS signature lists no empty file")
    compare_files(statement.files, actual, str(path))
    return actual


def verify_directory(root: Path, signature: Path, policy: VerifyPolicy,
                     check: DirectoryCheck = DirectoryCheck()) -> tuple[Verified, OmsStatement]:
    """Verify the directory (or single file) ``root`` against the OMS signature file ``signature``."""
    try:
        data = read_signature(signature)
        verified, statement = verify_oms_signature(parse_bundle(data), policy, str(signature))
        check_directory(root, statement, signature, check)
    except SignatureError as e:
        raise SignatureError(f"{root}: refused: {e}") from None
    return verified, statement
