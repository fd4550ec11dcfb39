"""Which LFS uploads serve offers in parts (:mod:`.multipart`), apart from the routes so that
the settings load no web framework."""

from __future__ import annotations

from dataclasses import dataclass

#: files from this size are offered in parts: S3's largest single PUT (5 GiB), past which the
#: Hub's own storage takes parts, so every client already sends them so (serve's --lfs-multipart-min)
MULTIPART_MIN = 5 * 1024 ** 3
#: the size of each part but the last (serve's --lfs-part-size)
PART_SIZE = 512 * 1024 ** 2
#: the most parts one upload is offered in (S3's limit): a larger file gets larger parts
MAX_PARTS = 10_000


@dataclass(frozen=True)
class PartPolicy:
    """Which LFS uploads are offered in parts, and of what size (None ``min_size``: none)."""

    min_size: int | None = MULTIPART_MIN
    part_size: int = PART_SIZE

    def part_size_for(self, size: int) -> int | None:
        """The part size to offer a file of ``size`` bytes, or None: one PUT."""
        if self.min_size is None or size < self.min_size or size == 0:
            return None
        return max(self.part_size, -(-size // MAX_PARTS))
