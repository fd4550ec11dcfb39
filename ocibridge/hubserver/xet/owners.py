"""Whose kept xorbs are whose: a xorb is its uploader's repository's until committed,
as a staged LFS file is (:meth:`.staging.Staging.pinned`).

One copy of a xorb is kept whichever repository sent it (``xorbs/<hash>``), so without this a
writer of one repository who learnt the hash of a xorb another repository's writer sent, and
never committed, could name it in a shard and commit bytes it never held. A shard of a
repository is rebuilt only from xorbs that repository's writers sent whole (each checked against
its hash when it came); a xorb another repository sent is taken again, and checked, before it
is this repository's too. Marks are files, so serves sharing the cache volume see each other's:

    $OCIBRIDGE_CACHE/serve/staging/xorb-owners/<xorb>/<SHA-256 of the repository id>
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
from pathlib import Path

from ocibridge.hubserver.xet import merkle


def _key(repo_id: str) -> str:
    """A repository id as one file name that says nothing of it (Hub ids are case-insensitive)."""
    return hashlib.sha256(repo_id.lower().encode()).hexdigest()


class XorbOwners:
    """The repositories each kept xorb was sent for."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _marks(self, xorb: bytes) -> Path:
        return self.root / merkle.hex_of(xorb)

    def own(self, xorb: bytes, repo_id: str) -> None:
        """Note that a writer of ``repo_id`` sent the whole of ``xorb`` (checked)."""
        marks = self._marks(xorb)
        marks.mkdir(parents=True, exist_ok=True)
        (marks / _key(repo_id)).touch()

    def owns(self, xorb: bytes, repo_id: str) -> bool:
        """Whether a writer of ``repo_id`` sent ``xorb``: a shard of ``repo_id`` may name it."""
        return (self._marks(xorb) / _key(repo_id)).is_file()

    def forget(self, name: str) -> None:
        """The xorb of hash text ``name`` is no longer kept: nobody's."""
        with contextlib.suppress(OSError):
            shutil.rmtree(self.root / name)
