"""A directory against an OMS signature: a pull, a model cache, a Hugging Face snapshot.

The signature is checked first (key, statement); then the directory's file names are compared
with the signed list (an extra or a missing file fails before any byte is hashed); then every
file is hashed, streaming, several at once. Symlinks and special files are refused, as the
OMS tools refuse them by default; the paths the statement ignores (and git's files, which the
``model_signing`` verifier always ignores) are left out.
"""

from __future__ import annotations

import contextlib
import os
import stat
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ocibridge.core.limits import read_small_file
from ocibridge.errors import SignatureError
from ocibridge.oci.digest import sha256_file as digest_file
from ocibridge.signing.bundle import parse_bundle
from ocibridge.signing.oms import GIT_PATHS, OmsStatement, compare_files, is_ignored, path_key
from ocibridge.signing.verify import Verified, VerifyPolicy, verify_oms_signature

#: A sigstore bundle of a large model lists many files; it is still far from this.
MAX_OMS_SIGNATURE_BYTES = 64 << 20
CHUNK = 1 << 20


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


def sha256_hex(path: Path) -> str:
    """A file's SHA-256 in hex, as OMS lists it."""
    return digest_file(path)[0].removeprefix("sha256:")


def hash_files(root: Path, names: list[str], workers: int | None = None) -> dict[str, str]:
    """path -> sha256 hex of each of ``names``, hashed in a pool (hashlib releases the GIL)."""
    workers = workers or min(8, (os.cpu_count() or 1) * 2)
    try:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return dict(zip(names, pool.map(lambda rel: sha256_hex(root / rel), names), strict=True))
    except OSError as e:
        raise SignatureError(f"{e.filename}: {e.strerror}") from None


def directory_ignores(root: Path, statement: OmsStatement, signature: Path) -> tuple[str, ...]:
    """What a directory's check leaves out: the statement's ignored paths, git's files and the
    signature file itself when it lies inside the directory."""
    ignored = [*statement.ignored, *GIT_PATHS]
    with contextlib.suppress(ValueError):
        ignored.append(signature.resolve().relative_to(root.resolve()).as_posix())
    return tuple(ignored)


def check_directory(root: Path, statement: OmsStatement, signature: Path,
                    only: set[str] | None = None) -> dict[str, str]:
    """Raise unless ``root`` holds exactly the signed files (or, with ``only``, the signed
    files of that subset, and no others); the hashed files on success."""
    if not root.is_dir():
        raise SignatureError(f"{root}: not a directory")
    names = list_files(root, directory_ignores(root, statement, signature))
    signed = statement.files if only is None else {p: d for p, d in statement.files.items() if p in only}
    if only is not None:
        unknown = sorted(only - set(statement.files), key=path_key)
        if unknown:
            raise SignatureError(f"{root}: {', '.join(unknown[:3])} not signed by the OMS signature")
    if set(names) != set(signed):  # names first: an extra or missing file fails before any hashing
        compare_files(signed, {name: signed.get(name, "") for name in names}, str(root))
    actual = hash_files(root, names)
    compare_files(signed, actual, str(root))
    return actual


def verify_directory(root: Path, signature: Path, policy: VerifyPolicy) -> tuple[Verified, OmsStatement]:
    """Verify the directory ``root`` against the OMS signature file ``signature``."""
    try:
        data = read_signature(signature)
        verified, statement = verify_oms_signature(parse_bundle(data), policy, str(signature))
        check_directory(root, statement, signature)
    except SignatureError as e:
        raise SignatureError(f"{root}: refused: {e}") from None
    return verified, statement
