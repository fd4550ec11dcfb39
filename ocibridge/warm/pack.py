"""A compile cache directory as one reproducible tar (the same files give the same digest):
entries in byte order of their paths, fixed metadata (model/packing.py), regular files and
directories only. A link is refused rather than followed or kept: a cache needs none, and one
packed could point anywhere on the node that restores it."""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ocibridge.core.fsutil import is_utf8_name
from ocibridge.errors import UsageError
from ocibridge.model.package import ModelFile
from ocibridge.model.packing import tar_chunks
from ocibridge.oci.mediatypes import Kind


@dataclass(frozen=True)
class Packed:
    """The tar written to ``path`` (a temporary file the caller removes): its digest, size, files."""

    path: Path
    digest: str
    size: int
    files: int


def _opener(path: Path) -> Callable[[], BinaryIO]:
    return lambda: path.open("rb")


def cache_files(root: Path) -> list[ModelFile]:
    """The regular files under ``root``, by their relative paths; a link or a special file is an error."""
    if not root.is_dir():
        raise UsageError(f"{root}: not a directory")
    found: list[ModelFile] = []
    for here, dirs, names in os.walk(root):
        for name in sorted(dirs + names):
            path = Path(here) / name
            if not is_utf8_name(name):  # a tar member's name here is text
                raise UsageError(f"{path}: its name is not UTF-8; a compile cache is packed from text names only")
            info = path.lstat()
            rel = path.relative_to(root).as_posix()
            if stat.S_ISDIR(info.st_mode):
                continue
            if not stat.S_ISREG(info.st_mode):
                kind = "a link" if stat.S_ISLNK(info.st_mode) else "not a regular file"
                raise UsageError(f"{path}: {kind}; a compile cache is packed from regular files only")
            found.append(ModelFile(rel, Kind.CODE, info.st_size, opener=_opener(path),
                                   mode=info.st_mode & 0o777))
    if not found:
        raise UsageError(f"{root}: no file in it to pack")
    return found


def pack_directory(root: Path) -> Packed:
    """``root``'s files as a tar in a temporary file, hashed as it is written."""
    files = cache_files(root)
    digest = hashlib.sha256()
    size = 0
    fd, name = tempfile.mkstemp(prefix="ocibridge-warm-", suffix=".tar")
    try:
        with os.fdopen(fd, "wb") as out:
            for chunk in tar_chunks(files):
                out.write(chunk)
                digest.update(chunk)
                size += len(chunk)
    except BaseException:
        os.unlink(name)
        raise
    return Packed(Path(name), "sha256:" + digest.hexdigest(), size, len(files))
