"""Writing a model into the Hub cache layout (see :mod:`.hubcache`), from a snapshot of the
model cache: each file becomes a blob named by its etag, hard-linked where the file system
allows (one copy on disk serves both caches), and the snapshot folder of relative symlinks is
built aside and renamed into place whole; ``refs/main`` is written last.

One etag rule with ``ocibridge serve`` (hubserver/app.py answers every file's ``ETag`` with its
SHA-256): a snapshot huggingface_hub downloaded through serve and one ``pull hf:`` writes name
the same bytes the same way. A snapshot already there with the same files, byte for byte, is
left as it is (huggingface_hub 2.x's links into its shared store of Xet files included): only
the ref is written, so nothing it held is orphaned.
"""

from __future__ import annotations

import contextlib
import filecmp
import hashlib
import os
import secrets
import shutil
import stat
import tempfile
from pathlib import Path

from ocibridge.core.fsutil import atomic_write_bytes
from ocibridge.errors import SourceError
from ocibridge.kinds.hf.hubcache import SHARED_ENTRY, shared_blobs

#: huggingface_hub's files are plain rw-r--r--; the model cache's blobs are read-only.
_BLOB_MODE = 0o644


def etag_of(rel: str, path: Path) -> str:
    """The name a file's blob gets: its SHA-256, the ``ETag`` serve answers for every file."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _cached_file(link: Path, folder: Path) -> Path | None:
    """The regular file a name of the repo ``folder`` leads to, when it stays in the cache (the
    repo's own folder, or the shared store's entries); None for anything else."""
    real = os.path.realpath(link)
    inside = os.path.realpath(folder) + os.sep
    shared = os.path.realpath(shared_blobs(folder)) + os.sep
    in_shared = real.startswith(shared) and SHARED_ENTRY.fullmatch(real[len(shared):]) is not None
    if not (real.startswith(inside) or in_shared):
        return None
    try:
        return Path(real) if stat.S_ISREG(os.stat(real).st_mode) else None
    except OSError:
        return None


def _same_bytes(src: Path, held: Path | None) -> bool:
    """Whether ``held`` (a file of the cache, or None) has ``src``'s bytes: compared, not
    trusted by its name (the Hub cache is shared)."""
    if held is None:
        return False
    try:
        return os.path.getsize(held) == os.path.getsize(src) and filecmp.cmp(src, held, shallow=False)
    except OSError:
        return False


def _place_blob(src: Path, blob: Path, folder: Path) -> None:
    """``blob`` holds ``src``'s bytes (whose etag was just computed from them): linked, or copied
    (then made like huggingface_hub's). A file already under that name is not trusted by it (the
    Hub cache is shared: anyone who can write it could have put another file, or a link, there):
    unless it is ``src``'s own inode, or leads within the cache to the same bytes (a link into
    huggingface_hub's shared store), it is replaced."""
    try:
        here, there = os.lstat(blob), os.stat(src)
        if stat.S_ISREG(here.st_mode) and (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino):
            return
    except FileNotFoundError:
        pass
    if (blob.exists() or blob.is_symlink()) and _same_bytes(src, _cached_file(blob, folder)):
        return
    tmp = blob.with_name(f".{blob.name}.{secrets.token_hex(8)}.incomplete")  # a name nobody planted
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    try:
        os.link(src, tmp)
    except OSError:
        shutil.copyfile(src, tmp)
        os.chmod(tmp, _BLOB_MODE)
    os.replace(tmp, blob)


def _tree(root: Path) -> list[str]:
    """The files (and links) of a tree, relative, sorted."""
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_symlink() or not p.is_dir())


def _same_snapshot(files: Path, snapshot: Path, folder: Path) -> bool:
    """Whether the snapshot already there holds exactly ``files``, byte for byte."""
    if not snapshot.is_dir() or snapshot.is_symlink():
        return False
    names = _tree(files)
    if names != _tree(snapshot):
        return False
    return all(_same_bytes(files / rel, _cached_file(snapshot / rel, folder)) for rel in names)


def write_hub_snapshot(files: Path, folder: Path, revision: str, ref: str = "main") -> list[str]:
    """Put the tree ``files`` into the repo ``folder`` of a Hub cache as commit ``revision``,
    and point ``refs/<ref>`` at it. The files written, sorted."""
    blobs, snapshots = folder / "blobs", folder / "snapshots"
    for directory in (folder, blobs, snapshots, folder / "refs"):
        directory.mkdir(parents=True, exist_ok=True)
        if directory.is_symlink():  # written through, the blobs would land wherever it points
            raise SourceError(f"{directory}: a symbolic link in the Hugging Face cache: refused (remove it)")
    if _same_snapshot(files, snapshots / revision, folder):  # the same bytes: left as they are
        _write_ref(folder, ref, revision)
        return _tree(files)
    staging = Path(tempfile.mkdtemp(prefix=".tmp-ocibridge-", dir=snapshots))
    os.chmod(staging, 0o755)
    written: list[str] = []
    try:
        for path in sorted(files.rglob("*")):
            if path.is_dir() and not path.is_symlink():
                continue
            rel = path.relative_to(files).as_posix()
            etag = etag_of(rel, path)
            _place_blob(path, blobs / etag, folder)
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
    _write_ref(folder, ref, revision)
    return written


def _write_ref(folder: Path, ref: str, revision: str) -> None:
    path = folder / "refs" / ref
    with contextlib.suppress(OSError):
        if path.read_bytes() == revision.encode():
            return  # as it is: not even its time changes
    path.parent.mkdir(parents=True, exist_ok=True)  # refs/pr/1, as the Hub names PRs
    atomic_write_bytes(path, revision.encode())
