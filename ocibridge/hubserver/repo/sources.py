"""What a Hub repo id and revision name in the sources ``serve`` was given.

- A **registry prefix** ``host[/path]``: repo id ``ORG/NAME`` is the repository
  ``path/org/name`` (lowercased: OCI repositories are); its tags are the revisions.
- A **layout** ``oci:DIR`` and the **local store** (``local``): repo id ``ORG/NAME`` is the models
  named ``org/name:TAG`` there (the local store's ``NAME:TAG`` names, written as the layout's
  ``org.opencontainers.image.ref.name``); repo id ``NAME`` the names ``name:TAG``.

A revision is ``main`` (the default tag, ``latest`` unless set), another tag, ``sha256:<hex>``,
or a 40-hex commit id: the first 40 hex digits of the digest a tag resolves to, mapped back
exactly (commits handed out are remembered; else the repository's tags are resolved), an
unknown or ambiguous one being not found; or its first 7 to 39 hex digits, as git abbreviates
one, unless the repository has a tag of that name (a tag first, as git prefers a ref). Sources
are searched in order: the first where the revision resolves answers.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ocibridge.errors import InvalidReference, NotFound, OcibridgeError, RegistryError, UsageError
from ocibridge.hubserver.repo.refrules import hub_ref_name
from ocibridge.kinds.hf.repotype import DATASETS_PART, model_id_allowed
from ocibridge.oci.bookkeeping import LEASE_REPO, SHORT_MIN
from ocibridge.oci.reference import LayoutReference, RegistryReference, path_like
from ocibridge.stores.base import close_store

if TYPE_CHECKING:
    from ocibridge.stores.base import Store
    from ocibridge.stores.registry.options import RegistryOptions
    from ocibridge.stores.registry.store import RegistryStore

#: the annotation a manifest's creation time is in
CREATED = "org.opencontainers.image.created"
#: what ``main`` means unless ``--default-tag`` says otherwise
DEFAULT_TAG = "latest"
COMMIT = re.compile(r"[0-9a-f]{40}")
#: an abbreviated commit id (git's: its first 7 or more hex digits), unless a tag of that name exists
SHORT_COMMIT = re.compile(rf"[0-9a-f]{{{SHORT_MIN},39}}")
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
#: one part of a repo id, as the Hub and OCI (lowercased) both take it
_PART = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")
#: characters of one part of a repo id: the Hub's limit (huggingface_hub's validate_repo_id)
PART_MAX = 96
#: characters of a registry repository with its host: what registries take (distribution's limit)
REPOSITORY_MAX = 255
#: pages of a registry's ``_catalog`` read (:data:`CATALOG_PAGE` names each): past them the listing says it is cut short
CATALOG_PAGES = 100
CATALOG_PAGE = 1000

log = logging.getLogger("ocibridge.hubserver")


class RepoNotFound(OcibridgeError):
    """No source holds the repository."""


class RepoMoved(RepoNotFound):
    """A repository ``move_repo`` moved: gone from here, its reads redirected to ``moved_to``."""

    def __init__(self, repo_id: str, moved_to: str):
        super().__init__(f"{repo_id}: moved to {moved_to}")
        self.repo_id, self.moved_to = repo_id, moved_to


class RevisionNotFound(OcibridgeError):
    """A source holds the repository, none the revision."""


class Refused(OcibridgeError):
    """The model is there but may not be served: the containers policy file rejects it, or
    (``--verify-key``) no signature verifies; ``rule`` says which (repo/rules.py)."""

    def __init__(self, message: str, rule: str = ""):
        super().__init__(message)
        self.rule = rule


class UpstreamRefused(Refused):
    """A rule at the door keeps the repository or one of its files out: the Hub's 403, the rule
    named; nothing fetched past the metadata the rule needs. Here, below the proxy, so that the
    rooms the proxy asks (its quotas) can refuse in its terms."""

    lasting = True  # the commit is refused for good (its fetch not tried again): not a quota's, which may pass later


def repo_parts(repo_id: str) -> list[str] | None:
    """The parts of a repository's key (:mod:`.reponames`: a model's repo id, or ``datasets/`` and a
    dataset's), lowercased; None when no source could hold it (a model id whose first part the
    Hub reserves is none: :func:`ocibridge.kinds.hf.repotype.model_id_allowed`)."""
    parts = repo_id.lower().split("/")
    named = parts[1:] if parts[0] == DATASETS_PART else parts
    if not 1 <= len(named) <= 2 or not model_id_allowed(named) \
            or not all(len(p) <= PART_MAX and _PART.fullmatch(p) for p in named):
        return None
    return parts


def revision_named(revision: str) -> bool:
    """Whether a revision is one a source could hold (``main``, a tag, a commit id, a digest):
    anything else is not found without a source being asked."""
    if revision == "main" or COMMIT.fullmatch(revision) or DIGEST.fullmatch(revision):
        return True
    try:
        hub_ref_name(revision)  # a registry tag, or a ref at a reserved one (refnames.py)
    except InvalidReference:
        return False
    return True


@dataclass
class Repository:
    """Where one repo id lives in one source: a store, and the prefix of its tags there."""

    store: Store
    shown: str  # for messages: reg.example/models/org/name, oci:DIR org/name
    prefix: str = ""  # a layout's names: "org/name:"; a registry repository: ""
    base: RegistryReference | LayoutReference | None = None  # where the containers policy looks it up

    def reference(self, tag: str) -> str:
        return self.prefix + tag

    def located(self, tag: str | None, digest: str) -> RegistryReference | LayoutReference | None:
        """The revision as the locator the containers policy is looked up by (signing/use.py
        scope_of): a registry repository's tag (else digest), a layout."""
        if isinstance(self.base, RegistryReference):
            return RegistryReference(self.base.registry, self.base.repository, tag, None if tag else digest)
        if isinstance(self.base, LayoutReference):
            return LayoutReference(self.base.path, self.reference(tag) if tag else None, None if tag else digest)
        return None

    def tags(self) -> list[str]:
        return [t[len(self.prefix):] for t in self.store.tags() if t.startswith(self.prefix)]


class Source:
    """A place repositories are found; :meth:`repository` None: it cannot hold that repo id."""

    shown: str
    #: why the last listing of :meth:`repo_ids` is incomplete ("" when it is whole): shown on the page
    cut_short: str = ""

    def repository(self, parts: list[str]) -> Repository | None:
        raise NotImplementedError

    def repo_ids(self) -> list[str]:
        """Every repo id the source holds (as far as it can tell)."""
        raise NotImplementedError

    def ready(self) -> None:
        """Raises when the source cannot be read now, saying why without naming the source:
        the caller does (serve's warning, ``/readyz``)."""

    def close(self) -> None:
        pass


class RegistrySource(Source):
    """Repositories under ``host/path`` of a registry."""

    def __init__(self, host: str, path: str, options: RegistryOptions | None):
        self.host, self.path, self.options = host, path.strip("/"), options
        self.shown = f"{host}/{self.path}" if self.path else host
        self._stores: dict[str, RegistryStore] = {}
        self._lock = threading.Lock()
        self.seen: set[str] = set()  # repo ids found here (listed when the catalog is refused)
        self.catalog_refused = ""  # why the last read of the catalog failed ("": it did not)

    def _store(self, repository: str) -> RegistryStore:
        with self._lock:
            store = self._stores.get(repository)
            if store is None:
                from ocibridge.hubserver.repo.heldmanifests import ServedRegistryStore
                from ocibridge.stores.registry.store import open_repository

                # held for the process: what one request read of it answers the next
                store = open_repository(RegistryReference(self.host, repository), self.options,
                                        kind=ServedRegistryStore)
                self._stores[repository] = store
            return store

    def repository(self, parts: list[str]) -> Repository | None:
        repository = "/".join([self.path, *parts] if self.path else parts)
        if self.host == "docker.io" and len(parts) == 1 and not self.path:
            repository = f"library/{repository}"
        if len(self.host) + 1 + len(repository) > REPOSITORY_MAX:
            return None  # no registry holds it: not found, without asking one
        return Repository(self._store(repository), f"{self.host}/{repository}",
                          base=RegistryReference(self.host, repository))

    def repo_ids(self) -> list[str]:
        listed = self._catalog()
        return sorted(self.seen if listed is None else listed)

    def _catalog(self) -> set[str] | None:
        """The registry's catalog under the prefix (the store's one pager,
        stores/registry/v2catalog.py); None when the registry does not allow it."""
        from ocibridge.stores.registry.v2catalog import catalog_pages

        found: set[str] = set()
        head, more = len(f"{self.path}/") if self.path else 0, False
        pages = catalog_pages(self._store(self.path or "library").client, self.path, page_size=CATALOG_PAGE,
                              what=f"{self.shown}: the registry's catalog")
        try:
            for count, page in enumerate(pages, 1):
                rests = (name[head:] for name in page.names)
                found.update(rest for rest in rests  # less serve's own (writer lease)
                             if repo_parts(rest) is not None and rest != LEASE_REPO)
                if page.stopped is not None:  # a next page elsewhere: what was read is what is listed
                    log.warning("%s", page.stopped)
                more = page.following is not None and count >= CATALOG_PAGES
                if more:
                    break
        except RegistryError as e:
            self.catalog_refused = str(e)
            return None
        self.catalog_refused = ""
        self._cut_short(more, len(found))
        return found

    def _cut_short(self, more: bool, listed: int) -> None:
        """Say (the log, the catalog page) that the registry had more names than were read."""
        if not more:
            self.cut_short = ""
            return
        self.cut_short = (f"{self.shown}: the registry's catalog was read for {CATALOG_PAGES} pages "
                          f"({CATALOG_PAGES * CATALOG_PAGE} names, {listed} under this prefix) and has more; "
                          "the rest are not listed, though each can still be opened by its name")
        log.warning("%s", self.cut_short)

    def ready(self) -> None:
        """The registry answers its base route, after the credentials (or the anonymous token
        a challenge offers) are tried: a 401 then means every read would be refused."""
        store = self._store(self.path or "library")
        response = store.client.send("GET", "/v2/")
        if response.status_code == 401:
            sent = "the credentials were refused" if store.client.auth.credentials else "no credentials were sent"
            raise RegistryError(f"registry {self.host} answers 401 (unauthorized): {sent}; "
                                "log in with 'ocibridge login HOST' (or -u/-p) before serving it")
        if response.status_code != 200:
            raise RegistryError(f"registry {self.host}: /v2/ answered {response.status_code}")

    def close(self) -> None:
        with self._lock:
            stores, self._stores = list(self._stores.values()), {}
        for store in stores:
            close_store(store)


class LayoutSource(Source):
    """Models of an OCI layout named ``NAME:TAG`` (the local store is one)."""

    def __init__(self, path: Path, shown: str, *, made_by_first_write: bool = False):
        self.root = path
        self.shown = shown
        #: the local store: made by the first push or pull, so until then it is empty, not broken
        self.made_by_first_write = made_by_first_write

    def _store(self) -> Store:
        from ocibridge.hubserver.repo.layoutindex import ServedLayout

        if not (self.root / "oci-layout").is_file():
            # the source is named by whoever shows this; an oci:DIR's name says where, local's does not
            raise NotFound(f"no OCI layout at {self.root}" if self.made_by_first_write else "no OCI layout there")
        return ServedLayout(self.root)  # index.json parsed once per change, not per call

    def repository(self, parts: list[str]) -> Repository | None:
        try:
            store = self._store()
        except NotFound:
            return None
        name = "/".join(parts)
        return Repository(store, f"{self.shown} {name}", prefix=f"{name}:", base=LayoutReference(str(self.root)))

    def repo_ids(self) -> list[str]:
        try:
            names = self._store().tags()
        except NotFound:
            return []
        found = {n.rpartition(":")[0] for n in names if ":" in n}
        return sorted(n for n in found if repo_parts(n) is not None)

    def ready(self) -> None:
        if self.made_by_first_write and self._not_made_yet():
            return
        self._store()

    def _not_made_yet(self) -> bool:
        """No directory at the root, or an empty one (a directory with other files is no store;
        the writer lease's lock file, replicas/layoutlease.py, is none of them)."""
        try:
            return not any(p.name != ".ocibridge-writer" for p in self.root.iterdir())
        except FileNotFoundError:
            return True
        except OSError:
            return False


def parse_sources(items: Sequence[str | RegistryReference | LayoutReference],
                  options: RegistryOptions | None = None) -> list[Source]:
    """The sources named (the command line's, or typed references), each located once
    (:func:`ocibridge.places.locate.locate`): ``local``, ``oci:DIR`` (a layout), or a registry
    prefix ``host[/path]`` (a registry reference without a tag or digest)."""
    sources = [_source(item, options) for item in items]
    if not sources:
        raise UsageError("serve needs at least one SOURCE (a registry prefix, oci:DIR or local)")
    return sources


def _source(item: str | RegistryReference | LayoutReference, options: RegistryOptions | None) -> Source:
    from ocibridge.places.locate import Role, locate

    if item == "local":
        from ocibridge.places.targets import default_store_path

        return LayoutSource(default_store_path(), "local", made_by_first_write=True)
    if isinstance(item, LayoutReference) or isinstance(item, str) and item.startswith("oci:"):
        located = locate(item, Role.LAYOUT)
        assert isinstance(located, LayoutReference)
        if located.tag or located.digest:
            raise UsageError(f"{located.text}: a source is a whole layout (oci:DIR), not one model in it")
        return LayoutSource(Path(located.path).expanduser(), located.text)
    if isinstance(item, str) and not item.strip():  # (read as a registry, "" became the path "/x")
        raise UsageError("an empty SOURCE (an unset shell variable?)")
    if isinstance(item, str) and path_like(item):  # a model directory: read as a registry, "invalid host '.'"
        raise UsageError(f"{item} is a local path: a SOURCE is a registry prefix (host/path), oci:DIR (a layout) "
                         f"or local; push the model first (ocibridge push {item} oci:DIR:ORG/NAME:latest, or to a "
                         "registry)")
    if isinstance(item, str) and "/" not in item:  # a registry alone: every repository of it
        located = locate(f"{item}/x", Role.REGISTRY)
        assert isinstance(located, RegistryReference)
        return RegistrySource(located.registry, "", options)
    located = locate(item, Role.REGISTRY)
    assert isinstance(located, RegistryReference)
    if located.names_version and (isinstance(item, str) or located.tag or located.digest):
        raise UsageError(f"{located.text}: a source is a registry prefix (host/path), without a tag or digest")
    return RegistrySource(located.registry, located.repository, options)


def commit_of(digest: str) -> str:
    return digest.split(":", 1)[1][:40]
