"""The one walk over the members of a tar layer.

Every loop over a layer's entries (a pull into a directory, a mount, a ModelCar build or
scan, a conversion's repack, an archive export) takes its members from :func:`tar_members`,
so the entry cap holds everywhere with one error: a tar of a million empty entries costs
memory and time in tarfile's member list although it decompresses to almost nothing. What a
name means (confined to a mount, a safe relative path) stays the caller's rule.
"""

from __future__ import annotations

import tarfile
from collections.abc import Iterator

from ocibridge.errors import TooLarge

#: Entries one tar layer may hold.
MAX_TAR_ENTRIES = 1_000_000


def tar_members(tar: tarfile.TarFile, *, what: str = "tar layer",
                limit: int | None = None) -> Iterator[tarfile.TarInfo]:
    """The members of ``tar`` in order, refusing the one past ``limit`` (default
    :data:`MAX_TAR_ENTRIES`, read at each call)."""
    limit = MAX_TAR_ENTRIES if limit is None else limit
    for count, member in enumerate(tar, 1):
        if count > limit:
            raise TooLarge(f"{what} has too many entries (more than {limit}: bomb limit)")
        yield member
