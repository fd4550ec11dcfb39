"""Files uploaded to serve and not yet committed (the Hub's write API: LFS and Xet uploads land
here, a commit takes them from here), named by their SHA-256 and kept only once verified.

    $OCIBRIDGE_CACHE/serve/staging/sha256/<hex>     a verified upload, read-only
    $OCIBRIDGE_CACHE/serve/staging/tmp/             uploads in progress (removed when abandoned)

Every way in (an LFS PUT, a file reassembled from Xet xorbs and shards) writes into a temporary
file of ``tmp/`` and hands it to :meth:`Staging.commit_file`, which hashes it and moves it into
place only when it is the SHA-256 it claims: nothing unverified is ever offered to a commit.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from ocibridge.core.environment import cache_root
from ocibridge.errors import DigestMismatch

_HEX64 = re.compile(r"[0-9a-f]{64}")

#: an upload in tmp/ untouched this long is abandoned and removed by :meth:`Staging.clean`
ABANDONED_SECONDS = 3600.0


class Staging:
    """The staging area of one serve (its cache root by default)."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root if root is not None else cache_root() / "serve" / "staging"
        self.files = self.root / "sha256"
        self.tmp = self.root / "tmp"

    def path_for(self, sha256: str) -> Path | None:
        """The verified file of ``sha256`` (64 lowercase hex), or None when it was not uploaded."""
        if not _HEX64.fullmatch(sha256):
            return None
        path = self.files / sha256
        return path if path.is_file() and not path.is_symlink() else None

    def has(self, sha256: str) -> bool:
        return self.path_for(sha256) is not None

    @contextlib.contextmanager
    def new_file(self) -> Iterator[tuple[Path, int]]:
        """A temporary file of ``tmp/`` to write an upload into: ``(path, fd)``; removed on leaving
        unless :meth:`commit_file` took it."""
        self.tmp.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=self.tmp, prefix="upload-")
        path = Path(name)
        try:
            yield path, fd
        finally:
            with contextlib.suppress(OSError):
                os.close(fd)
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    def commit_file(self, path: Path, sha256: str) -> Path:
        """Move the finished upload ``path`` into place as ``sha256``, once its bytes hash to it
        (:class:`ocibridge.errors.DigestMismatch` otherwise: the file is removed)."""
        if not _HEX64.fullmatch(sha256):
            raise DigestMismatch(f"upload: {sha256!r} is not a SHA-256 (64 lowercase hex digits)")
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            while block := f.read(1 << 20):
                digest.update(block)
        if digest.hexdigest() != sha256:
            path.unlink(missing_ok=True)
            raise DigestMismatch(f"upload: the bytes sent hash to sha256:{digest.hexdigest()}, not sha256:{sha256}")
        self.files.mkdir(parents=True, exist_ok=True)
        path.chmod(0o444)
        target = self.files / sha256
        os.replace(path, target)
        return target

    def clean(self, now: float | None = None) -> int:
        """Remove uploads in progress untouched for :data:`ABANDONED_SECONDS`; how many went."""
        now = time.time() if now is None else now
        removed = 0
        if not self.tmp.is_dir():
            return 0
        for entry in self.tmp.iterdir():
            with contextlib.suppress(OSError):
                if now - entry.lstat().st_mtime > ABANDONED_SECONDS:
                    entry.unlink()
                    removed += 1
        return removed
