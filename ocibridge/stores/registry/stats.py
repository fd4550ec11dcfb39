"""What went over the wire, counted: tests, summaries and ``--json`` output read these."""

from __future__ import annotations

import threading
from dataclasses import dataclass


@dataclass
class TransferStats:
    """Counters a store exposes so tests and summaries can see what went over the wire."""

    requests: int = 0
    retries: int = 0
    bytes_uploaded: int = 0
    bytes_downloaded: int = 0
    blobs_uploaded: int = 0
    blobs_mounted: int = 0
    blobs_skipped: int = 0
    download_resumes: int = 0
    upload_resumes: int = 0
    upload_restarts: int = 0
    #: bytes an earlier run had sent that an upload continued from (not sent again)
    bytes_resumed: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    def add(self, **counts: int) -> None:
        with self._lock:
            for name, value in counts.items():
                setattr(self, name, getattr(self, name) + value)

    def as_dict(self) -> dict[str, int]:
        return {k: v for k, v in vars(self).items() if not k.startswith("_")}
