"""Writing a model into the Hub cache layout (see :mod:`.hubcache`), from a snapshot of the
model cache: each file becomes a blob named by its etag, hard-linked where the file system
allows (one copy on disk serves both caches), and the snapshot folder of relative symlinks is
built aside and renamed into place whole; ``refs/main`` is written last."""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import shutil
import stat
import tempfile
from pathlib import Path

from ocibridge.core.fsutil import atomic_write_bytes
from ocibridge.errors import SourceError
from ocibridge.kinds.hf.hubcache import git_blob_sha1, is_lfs

#: huggingface_hub's files are plain rw-r--r--; the model cache's blobs are read-only.
_BLOB_MODE = 0o644


def etag_of(rel: str, path: Path) -> str:
    """The name the Hub gives a file's blob: its sha256 for an LFS file, else its git sha1."""
    if not is_lfs(rel, path.stat().st_size):
        return git_blob_sha1(path)
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _place_blob(src: Path, blob: Path) -> None:
    """``blob`` holds ``src``'s bytes (whose etag was just computed from them): linked, or copied
    (then made like huggingface_hub's). A file already under that name is not trusted by it (the
    Hub cache is shared: anyone who can write it could have put another file, or a link, there):
    unless it is ``src``'s own inode it is replaced, which costs a link, not a hash."""
    try:
        here, there = os.lstat(blob), os.stat(src)
        if stat.S_ISREG(here.st_mode) and (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino):
            return
    except FileNotFoundError:
        pass
    tmp = blob.with_name(f".{blob.name}.{secrets.token_hex(8)}.incomplete")  # a name nobody planted
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    try:
        os.link(src, tmp)
    except OSError:
        shutil.copyfile(src, tmp)
        os.chmod(tmp, _BLOB_MODE)
    os.replace(tmp, blob)


def write_hub_snapshot(files: Path, folder: Path, revision: str, ref: str = "main") -> list[str]:
    """Put the tree ``files`` into the repo ``folder`` of a Hub cache as commit ``revision``,
    and point ``refs/<ref>`` at it. The files written, sorted."""
    blobs, snapshots = folder / "blobs", folder / "snapshots"
    for directory in (folder, blobs, snapshots, folder / "refs"):
        directory.mkdir(parents=True, exist_ok=True)
        if directory.is_symlink():  # written through, the blobs would land wherever it points
            raise SourceError(f"{directory}: a symbolic link in the Hugging Face cache: refused (remove it)")
    staging = Path(tempfile.mkdtemp(prefix=".tmp-ocibridge-", dir=snapshots))
    os.chmod(staging, 0o755)
    written: list[str] = []
    try:
        for path in sorted(files.rglob("*")):
            if path.is_dir() and not path.is_symlink():
                continue
            rel = path.relative_to(files).as_posix()
            etag = etag_of(rel, path)
            _place_blob(path, blobs / etag)
            link = staging / rel
            link.parent.mkdir(parents=True, exist_ok=True)
            up = "../" * (rel.count("/") + 2)
            os.symlink(f"{up}blobs/{etag}", link)
            written.append(rel)
        final = snapshots / revision
        if final.exists():  # the same commit written again: the new tree replaces the old whole
            old = Path(tempfile.mkdtemp(prefix=".tmp-ocibridge-old-", dir=snapshots))
            os.replace(final, old / "tree")
            os.replace(staging, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    (folder / "refs" / ref).parent.mkdir(parents=True, exist_ok=True)  # refs/pr/1, as the Hub names PRs
    atomic_write_bytes(folder / "refs" / ref, revision.encode())
    return written
