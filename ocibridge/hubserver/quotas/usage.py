"""How much of the registry each namespace takes: what counts against a quota.

A namespace's bytes are the sizes of the unique blobs (configs and layers) of every manifest a
tag of its repositories names, the bookkeeping tags included (``ocibridge-commit-*``: every
commit serve keeps, which the registry's GC keeps too), a blob two of its repositories share
counted once; its repositories are those whose repo id starts with it (``acme/x``,
``datasets/acme/x``). What the registry holds, not what clients sent: a file that deduplicates
against one already there costs nothing. A repository the proxy filled (it holds an upstream
tag) counts against the operator's ingest namespace instead, when one is named.

Read from the registry once per repository (its tags' manifests, each manifest once: they never
change) and kept: a commit adds its manifest's blobs (:meth:`Usage.landed`); a repository
deleted, squashed or fetched anew is read again when next asked (:meth:`Usage.forget`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from ocibridge.errors import NotFound, OcibridgeError
from ocibridge.hubserver.repo.reponames import hub_id
from ocibridge.hubserver.repo.sources import Repository, Source, repo_parts
from ocibridge.oci.bookkeeping import UPSTREAM_TAG_PREFIX
from ocibridge.oci.models import Index, Manifest, parse_manifest_bytes
from ocibridge.stores.base import read_parsed

log = logging.getLogger("ocibridge.hubserver")


@dataclass(frozen=True)
class Used:
    """What a namespace takes now."""

    bytes: int = 0
    repos: int = 0


def namespace_of(key: str) -> str:
    """The namespace of a repository's key: its repo id's first part, lower-cased."""
    return hub_id(key).split("/", 1)[0].lower()


class Usage:
    """Each repository's blobs in ``source`` (the registry serve writes to), read once and kept.
    ``ingests``: the namespace the proxy's repositories count against (None: their own)."""

    def __init__(self, source: Source, ingests: Callable[[], str | None] = lambda: None):
        self.source = source
        self.ingests = ingests
        self._lock = threading.RLock()
        self._keys: set[str] | None = None  # every repository of the source, once listed
        self._blobs: dict[str, dict[str, int]] = {}  # repository key -> blob digest -> size
        self._proxied: dict[str, bool] = {}  # repository key -> filled from the upstream
        self._manifests: dict[str, dict[str, int]] = {}  # manifest digest -> its blobs (never changes)

    # -- what changes it -------------------------------------------------------------------------
    def landed(self, key: str, digest: str) -> None:
        """A commit of ``key`` landed as the manifest ``digest``: its blobs are the repository's too."""
        with self._lock:
            if self._keys is not None:
                self._keys.add(key.lower())
            held = self._blobs.get(key.lower())
            if held is None:
                return  # not read yet: read whole when asked
            repo = self._repository(key)
            if repo is not None:
                held.update(self._manifest_blobs(repo, digest))

    def forget(self, key: str | None = None) -> None:
        """What is kept of ``key`` dropped (None: of every repository, as a delete, squash or move
        leaves it), and the registry's list of repositories: read again when asked (the manifests
        read are kept: they never change)."""
        with self._lock:
            if key is None:
                self._blobs.clear()
                self._proxied.clear()
            else:
                self._blobs.pop(key.lower(), None)
                self._proxied.pop(key.lower(), None)
            self._keys = None

    def exists(self, key: str) -> bool:
        """Whether the repository ``key`` holds a tag (a repository whose tags all went is none)."""
        with self._lock:
            return key.lower() in self._listed() and bool(self._repo_blobs(key))

    # -- what it says ----------------------------------------------------------------------------
    def of(self, namespace: str) -> Used:
        """What ``namespace`` takes (read from the registry the first time)."""
        blobs, repos = self._held(namespace.lower())
        return Used(sum(blobs.values()), repos)

    def holds(self, namespace: str) -> dict[str, int]:
        """Every blob ``namespace``'s repositories hold: digest -> size."""
        return self._held(namespace.lower())[0]

    def namespaces(self) -> dict[str, Used]:
        """Every namespace the registry holds a repository of, and what it takes."""
        with self._lock:
            names = {self.owner(key) for key in self._listed()}
        return {name: self.of(name) for name in sorted(names)}

    def owner(self, key: str) -> str:
        """The namespace ``key`` counts against."""
        ingests = self.ingests()
        if ingests is not None and self._is_proxied(key):
            return ingests
        return namespace_of(key)

    # -- reading the registry ----------------------------------------------------------------------
    def _held(self, namespace: str) -> tuple[dict[str, int], int]:
        with self._lock:
            blobs: dict[str, int] = {}
            repos = 0
            for key in self._listed():
                if namespace_of(key) != namespace and self.ingests() != namespace:
                    continue
                if self.owner(key) != namespace:
                    continue
                held = self._repo_blobs(key)
                repos += 1 if held else 0  # a repository whose tags all went (deleted) is none
                blobs.update(held)
            return blobs, repos

    def _listed(self) -> set[str]:
        if self._keys is None:
            self._keys = {key.lower() for key in self.source.repo_ids()}
        return set(self._keys)

    def _repository(self, key: str) -> Repository | None:
        parts = repo_parts(key)
        return None if parts is None else self.source.repository(parts)

    def _is_proxied(self, key: str) -> bool:
        known = self._proxied.get(key.lower())
        if known is None:
            repo = self._repository(key)
            try:
                tags = repo.tags() if repo is not None else []
            except OcibridgeError:
                tags = []
            known = any(t.startswith(UPSTREAM_TAG_PREFIX) for t in tags)
            if tags:  # one with no tag yet may be a fetch under way: asked again
                self._proxied[key.lower()] = known
        return known

    def _repo_blobs(self, key: str) -> dict[str, int]:
        held = self._blobs.get(key.lower())
        if held is not None:
            return held
        held = {}
        repo = self._repository(key)
        try:
            tags = repo.tags() if repo is not None else []
        except (NotFound, OcibridgeError):
            tags = []
        for tag in tags:
            assert repo is not None
            held.update(self._manifest_blobs(repo, repo.reference(tag)))
        if held:  # none: no tag yet (a fetch under way, a create), or deleted: read again when asked
            self._blobs[key.lower()] = held
        return held

    def _manifest_blobs(self, repo: Repository, reference: str, depth: int = 0) -> dict[str, int]:
        """The blobs of the manifest ``reference`` names (an index's: its manifests' too)."""
        known = self._manifests.get(reference)  # a digest's (a tag's is read: it moves)
        if known is not None:
            return known
        try:
            desc, data, parsed = read_parsed(repo.store, reference)
        except OcibridgeError as e:  # a tag moved or removed meanwhile: nothing counted for it
            log.debug("quotas: %s %s not read: %s", repo.shown, reference, e)
            return {}
        known = self._manifests.get(desc.digest)
        if known is not None:
            return known
        manifest = parsed if parsed is not None else parse_manifest_bytes(data, desc.mediaType)
        blobs: dict[str, int] = {}
        if isinstance(manifest, Manifest):
            blobs = {d.digest: d.size for d in (manifest.config, *manifest.layers)}
        elif isinstance(manifest, Index) and depth < 2:
            for child in manifest.manifests:
                blobs.update(self._manifest_blobs(repo, child.digest, depth + 1))
        self._manifests[desc.digest] = blobs
        return blobs
