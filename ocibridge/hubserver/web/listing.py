"""The catalog's rows: every repository the sources hold, filtered and cut into pages, each
row read once per model and kept (:class:`Listing`).

Only the rows a page shows are read, and each at most once per :data:`FRESH` seconds: a
catalog of thousands of repositories costs its listing (the registry's ``_catalog``, kept
:data:`LIST_FRESH` seconds) and the rows of one page.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from ocibridge.hubserver.sources import Catalog

#: seconds the list of repositories is kept before the sources are asked again
LIST_FRESH = 10.0


@dataclass(frozen=True)
class Row:
    repo_id: str


@dataclass(frozen=True)
class CatalogPage:
    rows: tuple[Row, ...]
    number: int
    pages: int
    total: int


class Listing:
    def __init__(self, catalog: Catalog):
        self.catalog = catalog
        self._lock = threading.Lock()
        self._ids: tuple[float, list[str]] | None = None

    def repo_ids(self) -> list[str]:
        with self._lock:
            known = self._ids
        if known is not None and time.monotonic() - known[0] < LIST_FRESH:
            return known[1]
        ids = [r for r, _ in self.catalog.repo_ids()]
        with self._lock:
            self._ids = (time.monotonic(), ids)
        return ids

    def page(self, search: str, number: int, size: int) -> CatalogPage:
        wanted = search.lower()
        chosen = [r for r in self.repo_ids() if wanted in r.lower()]
        pages = max((len(chosen) + size - 1) // size, 1)
        number = min(number, pages)
        shown = chosen[(number - 1) * size:number * size]
        return CatalogPage(tuple(Row(r) for r in shown), number, pages, len(chosen))
