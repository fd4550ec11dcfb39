"""Files written into a pull's staging directory (:mod:`.extract`): streamed in, never through a
staged symlink, a file-system refusal named by the artifact's path, not the staging folder's.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path

from ocibridge.core.fsutil import (
    process_umask,
    write_sliced,
)
from ocibridge.core.streams import Reader
from ocibridge.errors import OcibridgeError, UnsafePath
from ocibridge.oci.digest import CHUNK, Hasher


def write_stream(src: Reader, dest: Path, mode: int, remaining: int | None = None,
                 hasher: Hasher | None = None) -> int:
    """Write ``src`` (up to ``remaining`` bytes) to the new file ``dest``; ``hasher`` sees every
    byte written (a tar entry's SHA-256 for model.sig's check, taken as it lands: no second read)."""
    total = 0
    with open(dest, "xb") as out:
        while True:
            want = CHUNK if remaining is None else min(CHUNK, remaining - total)
            if want <= 0:
                break
            data = src.read(want)
            if not data:
                break
            write_sliced(out, data)
            if hasher is not None:
                hasher.update(data)
            total += len(data)
    os.chmod(dest, mode & ~process_umask())
    return total


def prepare_parent(staging: Path, rel: str) -> Path:
    """The staged path for ``rel``, refusing to go through a staged symlink."""
    target = staging / rel
    parent = target.parent
    refuse_file_parents(staging, rel)
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        # A concurrent raw layer may have written a file at a parent between the walk and the
        # mkdir: walk again so the path named is the parent's, whichever layer landed first.
        refuse_file_parents(staging, rel)
        with named_as_in_the_artifact(rel):
            raise
    return target


def refuse_file_parents(staging: Path, rel: str) -> None:
    """No parent of ``rel`` may be a symlink (it could redirect writes out of DIR) or a file."""
    current = staging
    for part in Path(rel).parent.parts:
        current = current / part
        if current.is_symlink():
            raise UnsafePath(f"{rel}: a parent directory is a symlink in the artifact")
        if current.exists() and not current.is_dir():
            conflict = current.relative_to(staging).as_posix()
            raise OcibridgeError(f"the artifact holds {conflict} as a file and as a directory")


@contextlib.contextmanager
def named_as_in_the_artifact(rel: str) -> Iterator[None]:
    """A file-system refusal while staging names the artifact's path, not the staging folder's."""
    try:
        yield
    except OSError as error:
        if error.errno in (errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
            raise OcibridgeError(f"the artifact holds {rel} as a file and as a directory") from None
        if error.errno == errno.ENAMETOOLONG:
            raise OcibridgeError(f"{rel[:80]}…: name too long for this file system") from None
        raise
