"""A cache archive from a registry, unpacked as untrusted input: the blob is read whole into a
temporary file and checked against its digest first, then unpacked into a staging directory
inside DIR (regular files and directories only, each name a safe relative path, at most
as many bytes as the archive holds), and only then moved into place: a refusal leaves DIR
as it was."""

from __future__ import annotations

import contextlib
import os
import shutil
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ocibridge.core import environment
from ocibridge.core.fsutil import safe_relpath
from ocibridge.core.limits import env_limit, over_limit
from ocibridge.core.terminal import one_line
from ocibridge.errors import TooLarge, UnsafePath
from ocibridge.layers.tarwalk import tar_members
from ocibridge.oci.digest import CHUNK, verified
from ocibridge.oci.models import Descriptor
from ocibridge.stores.base import ReadableStore

#: the largest cache blob fetched (bytes), and the most entries one archive may hold
MAX_CACHE_ENV = environment.MAX_WARM_CACHE
MAX_CACHE = 64 << 30
MAX_ENTRIES = 1_000_000
STAGING_PREFIX = ".ocibridge-warm-"


@dataclass
class Restored:
    """What was put in place: relative paths of the files and their bytes."""

    files: list[str] = field(default_factory=list)
    bytes_written: int = 0


@contextlib.contextmanager
def fetched_blob(store: ReadableStore, layer: Descriptor) -> Iterator[Path]:
    """The layer in a temporary file, read to its end and checked against its digest (raises
    :class:`DigestMismatch` otherwise, before the caller reads a byte of it)."""
    limit = env_limit(MAX_CACHE_ENV, MAX_CACHE)
    if layer.size > limit:
        raise TooLarge(over_limit(f"compile cache {layer.digest}", limit, MAX_CACHE_ENV))
    fd, name = tempfile.mkstemp(prefix="ocibridge-warm-", suffix=".blob")
    try:
        with os.fdopen(fd, "wb") as out, store.open_blob(layer) as raw:
            reader = verified(raw, layer.digest, layer.size, f"compile cache {layer.digest}")
            while data := reader.read(CHUNK):
                out.write(data)
        yield Path(name)
    finally:
        os.unlink(name)


def _staged(archive: Path, staging: Path, done: Restored) -> None:
    size = archive.stat().st_size
    with tarfile.open(archive, "r:") as tar:
        for member in tar_members(tar, what="compile cache archive", limit=MAX_ENTRIES, archive_size=size):
            rel = safe_relpath(member.name, "compile cache path")
            if not (member.isdir() or member.isreg()):
                raise UnsafePath(f"compile cache archive: {one_line(rel)} is not a regular file or directory "
                                 "(a link or a device): refused")
            target = staging / rel
            for parent in reversed(target.relative_to(staging).parents):
                here = staging / parent
                if here.is_symlink() or (here.exists() and not here.is_dir()):
                    raise UnsafePath(f"compile cache archive: {one_line(rel)} lies under a file")
                here.mkdir(exist_ok=True)
            if member.isdir():
                target.mkdir(exist_ok=True)
                continue
            if target.exists() or target.is_symlink():
                raise UnsafePath(f"compile cache archive: {one_line(rel)} twice")
            src = tar.extractfile(member)
            assert src is not None
            with src, open(target, "xb") as out:
                shutil.copyfileobj(src, out, CHUNK)
            os.chmod(target, 0o755 if member.mode & 0o111 else 0o644)
            done.files.append(rel)
            done.bytes_written += member.size


def _no_link_under(root: Path, rel: str) -> None:
    """No directory between ``root`` and ``rel``'s file is a link (a restore writes inside ``root`` only)."""
    here = root
    for part in rel.split("/")[:-1]:
        here = here / part
        if here.is_symlink():
            raise UnsafePath(f"{here}: a link inside the cache directory; nothing restored")


def restore_archive(archive: Path, dest: Path) -> Restored:
    """Unpack the verified ``archive`` into ``dest`` (created if need be): staged whole, then
    each file moved into place, replacing a file of the same path."""
    dest.mkdir(parents=True, exist_ok=True)
    done = Restored()
    staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=dest))
    try:
        _staged(archive, staging, done)
        for rel in done.files:
            _no_link_under(dest, rel)
            target = dest / rel
            if target.is_dir() and not target.is_symlink():
                raise UnsafePath(f"{target}: a directory where the cache has a file; nothing more restored")
        for rel in done.files:
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(staging / rel, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return done
