"""The one walk over the members of a tar layer.

Every loop over a layer's entries (a pull into a directory, a mount, a ModelCar build or
scan, a conversion's repack, an archive export) takes its members from :func:`tar_members`,
so the archive rule holds everywhere with one error each:

- at most :data:`MAX_TAR_ENTRIES` entries: a tar of a million empty entries costs memory and
  time in tarfile's member list although it decompresses to almost nothing;
- no sparse member (GNU ``S`` entries, PAX ``GNU.sparse.*`` of any version): tarfile hands out
  a sparse member's holes as zeros it makes up, so 9 KB of archive would be written as 8 GiB,
  past every bound on what the archive really holds (``isfile()`` is true for them);
- when the archive is a file of known size (``archive_size``: a bundle), no member whose data
  would end past it: each member is written from bytes its entry really holds, so what a whole
  archive writes is at most its own size. A compressed layer's members are bounded as they are
  decompressed (``layers/reader.py``: the bomb ratio over the compressed bytes consumed).

What a name means (confined to a mount, a safe relative path) stays the caller's rule.
"""

from __future__ import annotations

import tarfile
from collections.abc import Iterator

from ocibridge.core.terminal import one_line
from ocibridge.errors import TooLarge

#: Entries one tar layer may hold.
MAX_TAR_ENTRIES = 1_000_000


def tar_members(tar: tarfile.TarFile, *, what: str = "tar layer", limit: int | None = None,
                archive_size: int | None = None) -> Iterator[tarfile.TarInfo]:
    """The members of ``tar`` in order, refusing the one past ``limit`` (default
    :data:`MAX_TAR_ENTRIES`, read at each call), a sparse one, and (with ``archive_size``, the
    measured size of an uncompressed archive file) one whose data would end past the archive."""
    limit = MAX_TAR_ENTRIES if limit is None else limit
    for count, member in enumerate(tar, 1):
        if count > limit:
            raise TooLarge(f"{what} has too many entries (more than {limit}: bomb limit)")
        check_member(member, what, archive_size)
        yield member


def check_member(member: tarfile.TarInfo, what: str, archive_size: int | None = None) -> None:
    """The archive rule for one member (see the module's docstring)."""
    if member.issparse():
        raise TooLarge(f"{what}: {one_line(member.name)} is a sparse member ({member.size} bytes from "
                       "far fewer in the archive): refused, sparse members are not read")
    if archive_size is not None and member.size and member.offset_data + member.size > archive_size:
        raise TooLarge(f"{what}: {one_line(member.name)} claims {member.size} bytes, more than the "
                       f"{max(archive_size - member.offset_data, 0)} left in the archive: refused")
