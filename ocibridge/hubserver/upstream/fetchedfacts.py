"""What the tee learnt of each fetched file, used once more rather than learnt again:

- :func:`vouch`: the snapshot's files as the build takes them, each with the SHA-256 its bytes
  hashed to as the tee wrote them, so ``push hf:``'s build names them unread and the upload to
  the registry sends them unhashed (the same layers, config and manifest: a layer's digest is its
  file's SHA-256, whoever hashed it; the registry checks each upload's digest itself);
- :func:`into_model_cache`: each file linked into serve's model cache under that digest, as a
  blob the read path (reading/blobs.py) answers from, so the next load is a warm read with no
  registry round-trip of the bytes (the Hub cache that held them is emptied once the commit landed).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from ocibridge.oci.digest import VerifyingReader

if TYPE_CHECKING:
    from ocibridge.cache.modelcache import ModelCache
    from ocibridge.hubserver.upstream.tee import FileFlight
    from ocibridge.model.package import ModelPackage

log = logging.getLogger("ocibridge.hubserver")
#: blobs are read-only in the model cache (reading/blobs.py)
READ_ONLY = 0o444


class HashedAsWritten:
    """The hasher of a file hashed already as it was written (the tee's): it takes no bytes and
    says what they hashed to, so a reader over the file counts them and checks their number only."""

    def __init__(self, hexdigest: str):
        self._hex = hexdigest

    def update(self, data: bytes | bytearray | memoryview, /) -> None:
        return None

    def hexdigest(self) -> str:
        return self._hex


def checked_files(files: Mapping[str, FileFlight]) -> dict[str, FileFlight]:
    """The files the tee checked, by their real path on disk."""
    return {os.path.realpath(f.final): f for f in files.values() if f.checked and f.sha256 is not None}


def vouch(package: ModelPackage, files: Mapping[str, FileFlight]) -> int:
    """Each file of ``package`` the tee wrote and checked (the same file on disk, the same size)
    given its SHA-256 and a reader that hashes nothing; the number of files vouched for."""
    by_path = checked_files(files)
    vouched = 0
    for f in package.files:
        flight = by_path.get(str(f.source_path)) if f.source_path is not None else None
        if flight is None or flight.size != f.size or flight.sha256 is None:
            continue
        f.digest, f.checked = f"sha256:{flight.sha256}", True
        f.opener = _opener(Path(flight.final), f.digest, f.size, f.path, flight.sha256)
        vouched += 1
    return vouched


def _opener(path: Path, digest: str, size: int, what: str, sha256: str) -> Callable[[], BinaryIO]:
    def opened() -> BinaryIO:
        return VerifyingReader(open(path, "rb"), digest, size, what, hasher=HashedAsWritten(sha256))  # type: ignore[return-value]  # a read()-stream where ModelFile names BinaryIO

    return opened


def into_model_cache(cache: ModelCache, files: Mapping[str, FileFlight]) -> int:
    """Each checked file hard-linked into ``cache`` as the blob of its SHA-256 (one a blob already
    holds is left); a file that cannot be linked (another file system) is left to the read path,
    which fetches it from the registry. The number of blobs added."""
    from ocibridge.cache.locks import flocked
    from ocibridge.core.fsutil import TEMP_PREFIX

    added = 0
    for real, flight in checked_files(files).items():
        assert flight.sha256 is not None
        final = cache.blobs.blob_path(f"sha256:{flight.sha256}")
        with flocked(cache.locks / f"{flight.sha256}.lock"):  # the read path's lock of the blob
            if final.is_file() and final.stat().st_size == flight.size:
                continue
            final.parent.mkdir(parents=True, exist_ok=True)
            staged = final.with_name(f"{TEMP_PREFIX}{final.name}-{os.getpid()}")  # ours: under the blob's lock
            try:
                staged.unlink(missing_ok=True)  # what a killed run left
                os.link(real, staged)
                os.chmod(staged, READ_ONLY)
                os.replace(staged, final)
            except OSError as e:
                with contextlib.suppress(OSError):
                    staged.unlink()
                log.info("upstream: %s not kept in the model cache (read from the registry instead): %s",
                         flight.path, e)
                continue
            added += 1
    return added
