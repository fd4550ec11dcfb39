"""The catalog's rows: every repository the sources hold, filtered and cut into pages, each
row read once and kept (:class:`Listing`).

Only the rows a page shows are read, each at most once per :data:`FRESH` seconds, and a
model's config once per digest: a catalog of thousands of repositories costs its listing (the
registry's ``_catalog``, kept :data:`LIST_FRESH` seconds) and the rows of one page.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ocibridge.core.freshcache import FreshCache
from ocibridge.errors import NotFound, OcibridgeError, RegistryError
from ocibridge.hubserver.repo.catalog import Catalog, Resolved
from ocibridge.hubserver.repo.reponames import type_of
from ocibridge.hubserver.repo.repostates import listed_only
from ocibridge.hubserver.repo.rules import rules_in_force
from ocibridge.hubserver.repo.sources import Refused, repo_parts
from ocibridge.hubserver.web import facts
from ocibridge.oci.bookkeeping import version_order, version_tags

#: seconds the list of repositories is kept before the sources are asked again
LIST_FRESH = 10.0
#: seconds a row is shown as read before it is read again (a tag moved, a signature was added)
FRESH = 30.0
#: configs kept by model digest (a digest's config never changes)
CONFIGS = 4096
#: rows of a page read at once
READERS = 8


@dataclass(frozen=True)
class Row:
    """One model of the catalog, at its default tag (else its last tag by name)."""

    repo_id: str
    tag: str | None = None
    digest: str | None = None
    size: int | None = None
    format: str = ""
    param_size: str = ""
    license: str = ""
    signatures: int = 0
    attestations: int = 0  # signed attestations and unsigned evidence (SBOM, provenance)
    policy: str = "unknown"  # passes | refused | none (no rule in force) | unknown (the row could not be read)
    problem: str = ""  # why refused, or why unreadable
    rules: str = ""  # the rules passed, or the one that refused (repo/rules.py)
    main: bool = True  # the tag shown is the default tag (else the model page shows this tag, saying so)


@dataclass(frozen=True)
class CatalogPage:
    rows: tuple[Row, ...]
    number: int
    pages: int
    total: int
    cut_short: tuple[str, ...] = ()  # sources whose listing is incomplete, and why


class Listing:
    def __init__(self, catalog: Catalog):
        self.rules = rules_in_force(catalog.verify)  # none: no "passes" badge, nothing was checked
        self.catalog = catalog
        self._lock = threading.Lock()
        self._ids: tuple[float, int, list[str]] | None = None
        self._rows: FreshCache[str, Row] = FreshCache(FRESH, 100_000)
        self._configs: OrderedDict[str, dict[str, Any]] = OrderedDict()

    def repo_ids(self) -> list[str]:
        """Every repo id, read again after :data:`LIST_FRESH` seconds or once this serve changed a
        repository (created, deleted, moved: :meth:`..repo.repostates.RepoStates.forget`)."""
        changes = self.catalog.states.changes
        with self._lock:
            known = self._ids
        if known is not None and time.monotonic() - known[0] < LIST_FRESH and known[1] == changes:
            return known[2]
        ids = [r for r, _ in self.catalog.repo_ids()]
        with self._lock:
            self._ids = (time.monotonic(), changes, ids)
        return ids

    def page(self, search: str, number: int, size: int,
             visible: Callable[[str], bool] = lambda repo_id: True, repo_type: str | None = None) -> CatalogPage:
        """Page ``number`` of the repositories whose id holds ``search`` and that the visitor
        may read (``visible``: :func:`.access.reads`; the others are not counted either). A
        repository deleted or moved through serve (its refs record says so) is neither listed nor
        counted, as ``list_models`` leaves it out: its tags name only the tombstone. ``repo_type``:
        repositories of that type only (None: models and datasets)."""
        wanted = search.lower()
        listed = listed_only(visible)  # one whose refs record was not read: left out (states.py)
        states = self.catalog.states  # (deleted or moved: neither listed nor counted)
        chosen = [r for r in self.repo_ids() if wanted in r.lower() and (repo_type in (None, type_of(r)))
                  and listed(r) and not states.of(r).deleted]
        pages = max((len(chosen) + size - 1) // size, 1)
        number = min(number, pages)
        shown = chosen[(number - 1) * size:number * size]
        with ThreadPoolExecutor(READERS) as pool:
            rows = tuple(pool.map(self.row, shown))
        cut = tuple(source.cut_short for source in self.catalog.sources if source.cut_short)
        return CatalogPage(rows, number, pages, len(chosen), cut)

    def row(self, repo_id: str) -> Row:
        return self._rows.get(repo_id, lambda: self._read(repo_id))

    def config(self, resolved: Resolved) -> dict[str, Any]:
        """The model's config document, read once per model digest."""
        digest = resolved.model.digest
        with self._lock:
            known = self._configs.get(digest)
        if known is not None:
            return known
        doc = facts.config_of(resolved.repo.store, resolved.manifest)
        with self._lock:
            self._configs[digest] = doc
            while len(self._configs) > CONFIGS:
                self._configs.popitem(last=False)
        return doc

    def tag_of(self, repo_id: str) -> str | None:
        """The tag a row shows: the default tag where the repository has it, else its newest by
        version order (``v10`` after ``v9``); never serve's own tags nor cosign's ``sha256-HEX.sig``
        (they name no version)."""
        parts = repo_parts(repo_id) or []
        for source in self.catalog.sources:
            repo = source.repository(parts)
            if repo is None:
                continue
            tags: list[str] = []
            with contextlib.suppress(NotFound, RegistryError):
                tags = version_tags(repo.tags())
            if tags:
                return self.catalog.default_tag if self.catalog.default_tag in tags else max(tags, key=version_order)
        return None

    def _read(self, repo_id: str) -> Row:
        try:
            tag = self.tag_of(repo_id)
            if tag is None:
                return Row(repo_id, problem="no tags")
            main = tag == self.catalog.default_tag
            try:
                resolved = self.catalog.resolve(repo_id, tag)
            except Refused as e:
                return Row(repo_id, tag, policy="refused", problem=str(e), rules=e.rule, main=main)
            doc = self.config(resolved)
            found = facts.classify(resolved.repo.store.referrers(resolved.top))
            classic = facts.classic_signature(resolved.repo.store, resolved.top) is not None
        except OcibridgeError as e:
            return Row(repo_id, problem=str(e))
        config = facts.section(doc, "config")
        return Row(repo_id, tag, resolved.top.digest, sum(x.size for x in resolved.manifest.layers),
                   facts.shown(config.get("format")), facts.shown(config.get("paramSize")),
                   facts.license_of(doc, resolved.manifest),
                   sum(e.kind == "signature" for e in found) + classic,
                   sum(e.kind not in ("signature", "other") for e in found),
                   "passes" if self.rules else "none", rules=" and ".join(self.rules), main=main)

