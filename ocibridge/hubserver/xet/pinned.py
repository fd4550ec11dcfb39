"""Commits resolved for xorb requests, kept a while with what each request of them looks up.

Why: hf_xet reads a GiB as 64 xorb requests; each resolved the commit and listed its files (two
worker-thread calls), searched the list for the file and asked for its chunk table (one more call,
and ``isinstance`` against a runtime protocol, ~35 µs each, several a request): about a fifth of
serve's ~1.1 ms of CPU a xorb request (docs/benchmarks.md). A commit names one manifest, so what it
resolves to is kept for as long as the catalog would reuse it anyway (``reuse_for``); who may read
the repository is still asked at every request (:meth:`.Gate.still_reads`).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ocibridge.hubserver.reading.blobs import TableOf
    from ocibridge.hubserver.repo.catalog import Resolved
    from ocibridge.hubserver.repo.files import HubFile, ModelFiles
    from ocibridge.oci.models import Descriptor

#: commits kept at once (the oldest forgotten first)
KEPT = 256


@dataclass
class Pinned:
    """A commit as xorb requests need it: its files over Xet by content, its layers' tables."""

    resolved: Resolved
    by_content: dict[tuple[str, int], HubFile]  # (sha256, size): the file offered over Xet
    at: float
    tables: dict[str, TableOf | None] = field(default_factory=dict)  # by layer digest, as asked

    def table(self, layer: Descriptor, table_of: Callable[[Resolved, Descriptor], TableOf | None]) -> TableOf | None:
        """The chunk table the manifest binds for ``layer`` (asked once)."""
        if layer.digest not in self.tables:
            self.tables[layer.digest] = table_of(self.resolved, layer)
        return self.tables[layer.digest]


class PinnedCommits:
    """Commits resolved for xorb requests, each kept ``seconds``."""

    def __init__(self, seconds: float, offered: Callable[[Resolved, HubFile], bool]):
        self.seconds = seconds
        self.offered = offered  # whether a file of the commit is offered over Xet
        self._kept: OrderedDict[tuple[str, str], Pinned] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, repo_id: str, commit: str) -> Pinned | None:
        with self._lock:
            found = self._kept.get((repo_id, commit))
            if found is None or time.monotonic() - found.at >= self.seconds:
                return None
            return found

    def put(self, repo_id: str, commit: str, resolved: Resolved, files: ModelFiles) -> Pinned:
        """Keep ``resolved`` (made at most ``seconds`` ago) and its files."""
        by_content: dict[tuple[str, int], HubFile] = {}
        for f in files.files.values():
            # the same bytes may be a regular file too (never in Xet) under another path: the one in git-lfs
            if self.offered(resolved, f):
                by_content.setdefault((f.sha256, f.size), f)
        pinned = Pinned(resolved, by_content, time.monotonic())
        with self._lock:
            self._kept[(repo_id, commit)] = pinned
            self._kept.move_to_end((repo_id, commit))
            while len(self._kept) > KEPT:
                self._kept.popitem(last=False)
        return pinned
