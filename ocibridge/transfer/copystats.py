"""What a copy did (:class:`CopyStats`): the counts every ``--json`` summary of a transfer is made
of, kept apart from the copy itself so results and hooks can name it without the copy's machinery."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from ocibridge.oci.models import Descriptor


@dataclass
class CopyStats:
    """What a copy did; the basis of every ``--json`` summary."""

    root: Descriptor | None = None
    blobs_copied: int = 0
    blobs_skipped: int = 0
    blobs_mounted: int = 0
    bytes_copied: int = 0
    manifests_copied: int = 0
    referrers: list[str] = field(default_factory=list)
    signatures: list[str] = field(default_factory=list)  # .sig/.att/.sbom tags and bundle referrers
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, blobs_copied: int = 0, blobs_skipped: int = 0, blobs_mounted: int = 0,
            bytes_copied: int = 0, manifests_copied: int = 0) -> None:
        with self._lock:
            self.blobs_copied += blobs_copied
            self.blobs_skipped += blobs_skipped
            self.blobs_mounted += blobs_mounted
            self.bytes_copied += bytes_copied
            self.manifests_copied += manifests_copied

    def absorb(self, other: CopyStats) -> None:
        """Add the counts of a write made on this copy's behalf (a merged signature manifest)."""
        self.add(other.blobs_copied, other.blobs_skipped, other.blobs_mounted, other.bytes_copied,
                 other.manifests_copied)

    def as_dict(self) -> dict[str, Any]:
        return {
            "digest": self.root.digest if self.root else None,
            "mediaType": self.root.mediaType if self.root else None,
            "size": self.root.size if self.root else None,
            "blobsCopied": self.blobs_copied,
            "blobsSkipped": self.blobs_skipped,
            "blobsMounted": self.blobs_mounted,
            "bytesCopied": self.bytes_copied,
            "manifestsCopied": self.manifests_copied,
            "referrers": self.referrers,
            "signatures": self.signatures,
        }
