"""The store a snapshot is built from: blobs come from the cache, fetched into it once.

A blob the cache lacks is downloaded into it under a lock of its own (another process
resolving a model that shares it waits, then finds it there), by the layout's resumable,
ranged download where the source allows. Each blob is then handed to the directory writer as a
:class:`~ocibridge.stores.base.VerifiedFile`, so the snapshot's file is a hard link to it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import BinaryIO, cast

from ocibridge.cache.locks import flocked
from ocibridge.core.closing import ClosesOnExit
from ocibridge.errors import OcibridgeError
from ocibridge.oci.digest import split_digest
from ocibridge.oci.models import Descriptor
from ocibridge.stores.base import OneManifest, Store
from ocibridge.stores.layout import LayoutStore
from ocibridge.stores.ranged import RangedBlobSource
from ocibridge.transfer.writer import reading, write_blob

#: Blobs and snapshot files are never written after they are made.
READ_ONLY = 0o444


class OfflineMiss(OcibridgeError):
    """What an offline resolution needs is not in the cache."""


class LinkedBlob(ClosesOnExit):
    """A verified blob of the cache: linked where it is wanted (copied where links fail)."""

    def __init__(self, path: Path):
        self._path = path
        self._file = open(path, "rb")  # noqa: SIM115 - closed by close()

    def read(self, n: int = -1, /) -> bytes:
        return self._file.read(n)

    def link_to(self, target: Path, mode: int) -> int:
        """A link shares the blob's mode (read-only, not executable): a file the model marks
        executable (a script) is copied instead, so it keeps its mode as a pull gives it."""
        if mode & 0o111:
            return self._copy_to(target, mode)
        try:
            os.link(self._path, target)  # the blob keeps its read-only mode
        except OSError:  # another file system, or no hard links
            return self._copy_to(target, mode)
        return target.stat().st_size

    def _copy_to(self, target: Path, mode: int) -> int:
        shutil.copyfile(self._path, target)
        os.chmod(target, mode & ~0o222)
        return target.stat().st_size

    def close(self) -> None:
        self._file.close()


class CacheSource(OneManifest):
    """A read-only store over ``blobs`` (the cache's layout) that fills it from ``remote``
    (None: offline, nothing is fetched). The model manifest ``desc`` is answered from the
    cache too, so a snapshot builds the same way online and offline."""

    def __init__(self, blobs: LayoutStore, locks: Path, remote: Store | None, desc: Descriptor):
        self._blobs = blobs
        self._locks = locks
        self._remote = remote
        self._desc = desc
        self.fetched: list[str] = []  # digests this build downloaded

    def describe(self) -> str:
        return self._remote.describe() if self._remote is not None else f"model cache {self._blobs.root}"

    def exists(self, desc: Descriptor) -> bool:
        return self._blobs.exists(desc) or (self._remote is not None and self._remote.exists(desc))

    def held_manifest(self) -> Descriptor:
        return self._desc

    def fetch_bytes(self, desc: Descriptor) -> bytes:
        self.ensure(desc)
        return self._blobs.fetch_bytes(desc)

    def open_blob(self, desc: Descriptor) -> BinaryIO:
        self.ensure(desc)
        return cast(BinaryIO, LinkedBlob(self._blobs.blob_path(desc.digest)))

    def ensure(self, desc: Descriptor) -> None:
        """The blob is in the cache, verified, when this returns (fetched now if need be)."""
        if self._blobs.exists(desc):
            return
        if self._remote is None:
            raise OfflineMiss(f"offline: blob {desc.digest} is not in the model cache")
        with flocked(self._locks / f"{split_digest(desc.digest)[1]}.lock"):
            if self._blobs.exists(desc):  # another process fetched it while we waited
                return
            remote = self._remote
            if isinstance(remote, RangedBlobSource) and desc.size > 0:
                self._blobs.download_blob(desc, remote)
            else:
                write_blob(self._blobs, reading(remote, desc))
            os.chmod(self._blobs.blob_path(desc.digest), READ_ONLY)
            self.fetched.append(desc.digest)
