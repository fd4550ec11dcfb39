"""What a Hub repo id and revision name in the sources ``serve`` was given.

- A **registry prefix** ``host[/path]``: repo id ``ORG/NAME`` is the repository
  ``path/org/name`` (lowercased: OCI repositories are); its tags are the revisions.
- A **layout** ``oci:DIR`` and the **local store** (``local``): repo id ``ORG/NAME`` is the models
  named ``org/name:TAG`` there (the local store's ``NAME:TAG`` names, written as the layout's
  ``org.opencontainers.image.ref.name``); repo id ``NAME`` the names ``name:TAG``.

A revision is ``main`` (the default tag, ``latest`` unless set), another tag, ``sha256:<hex>``,
or a 40-hex commit id: the first 40 hex digits of the digest a tag resolves to, mapped back
exactly (commits handed out are remembered; else the repository's tags are resolved), an
unknown or ambiguous one being not found. Sources are searched in order: the first where the
revision resolves answers.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ocibridge.errors import InvalidReference, NotFound, OcibridgeError, RegistryError, UsageError
from ocibridge.oci.models import Descriptor, Manifest
from ocibridge.oci.reference import LayoutReference, RegistryReference, check_tag
from ocibridge.stores.base import close_store

if TYPE_CHECKING:
    from ocibridge.signing.containers_policy import UsePolicy
    from ocibridge.signing.verify import VerifyPolicy
    from ocibridge.stores.base import Store
    from ocibridge.stores.registry.options import RegistryOptions
    from ocibridge.stores.registry.store import RegistryStore

#: the annotation a manifest's creation time is in
CREATED = "org.opencontainers.image.created"
#: what ``main`` means unless ``--default-tag`` says otherwise
DEFAULT_TAG = "latest"
COMMIT = re.compile(r"[0-9a-f]{40}")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
#: one part of a repo id, as the Hub and OCI (lowercased) both take it
_PART = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")
#: characters of one part of a repo id: the Hub's limit (huggingface_hub's validate_repo_id)
PART_MAX = 96
#: characters of a registry repository with its host: what registries take (distribution's limit)
REPOSITORY_MAX = 255
#: tags resolved at most to map a commit id back to its digest
MAX_TAGS_SCANNED = 1000
#: resolved revisions kept in memory (manifests are content-addressed: a digest's never changes)
MEMO = 512
#: resolutions kept for reuse (:meth:`Catalog.resolve`'s ``reuse_for``): past it, all are forgotten
RECENT = 1024


class RepoNotFound(OcibridgeError):
    """No source holds the repository."""


class RevisionNotFound(OcibridgeError):
    """A source holds the repository, none the revision."""


class Refused(OcibridgeError):
    """The model is there but may not be served: the containers policy file rejects it, or
    (``--verify-key``) no signature verifies."""


def repo_parts(repo_id: str) -> list[str] | None:
    """The repo id's parts, lowercased; None when no source could hold it."""
    parts = repo_id.lower().split("/")
    if not 1 <= len(parts) <= 2 or not all(len(p) <= PART_MAX and _PART.fullmatch(p) for p in parts):
        return None
    return parts


def revision_named(revision: str) -> bool:
    """Whether a revision is one a source could hold (``main``, a tag, a commit id, a digest):
    anything else is not found without a source being asked."""
    if revision == "main" or COMMIT.fullmatch(revision) or _DIGEST.fullmatch(revision):
        return True
    try:
        check_tag(revision)
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

    def repository(self, parts: list[str]) -> Repository | None:
        raise NotImplementedError

    def repo_ids(self) -> list[str]:
        """Every repo id the source holds (as far as it can tell)."""
        raise NotImplementedError

    def ready(self) -> None:
        """Raises when the source cannot be read now."""

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

    def _store(self, repository: str) -> RegistryStore:
        with self._lock:
            store = self._stores.get(repository)
            if store is None:
                from ocibridge.stores.registry.store import open_repository

                store = open_repository(RegistryReference(self.host, repository), self.options)
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
        """The registry's catalog under the prefix; None when the registry does not allow it."""
        from urllib.parse import urljoin

        client = self._store(self.path or "library")
        client_send = client.client.send
        found: set[str] = set()
        url: str | None = "/v2/_catalog"
        params: dict[str, str] | None = {"n": "1000"}
        head = f"{self.path}/" if self.path else ""
        for _ in range(100):  # at most 100,000 repositories
            if url is None:
                break
            response = client_send("GET", url, scopes=("registry:catalog:*",), params=params)
            if response.status_code != 200:
                return None
            try:
                names = response.json().get("repositories") or []
            except (ValueError, AttributeError):
                return None
            for name in names:
                if isinstance(name, str) and name.startswith(head):
                    rest = name[len(head):]
                    if repo_parts(rest) is not None:
                        found.add(rest)
            link = response.headers.get("link", "")
            match = re.search(r"<([^>]+)>\s*;\s*rel=\"?next\"?", link)
            url = urljoin(str(response.url), match.group(1)) if match else None
            params = None
        return found

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

    def __init__(self, path: Path, shown: str):
        self.root = path
        self.shown = shown

    def _store(self) -> Store:
        from ocibridge.stores.layout import LayoutStore

        if not (self.root / "oci-layout").is_file():
            raise NotFound(f"{self.shown}: no OCI layout at {self.root}")
        return LayoutStore(self.root)

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
        self._store()


def parse_sources(items: Sequence[str | RegistryReference | LayoutReference],
                  options: RegistryOptions | None = None) -> list[Source]:
    """The sources named (the command line's, or typed references), each located once
    (:func:`ocibridge.kinds.locate.locate`): ``local``, ``oci:DIR`` (a layout), or a registry
    prefix ``host[/path]`` (a registry reference without a tag or digest)."""
    sources = [_source(item, options) for item in items]
    if not sources:
        raise UsageError("serve needs at least one SOURCE (a registry prefix, oci:DIR or local)")
    return sources


def _source(item: str | RegistryReference | LayoutReference, options: RegistryOptions | None) -> Source:
    from ocibridge.places.locate import Role, locate

    if item == "local":
        from ocibridge.places.targets import default_store_path

        return LayoutSource(default_store_path(), "local")
    if isinstance(item, LayoutReference) or isinstance(item, str) and item.startswith("oci:"):
        located = locate(item, Role.LAYOUT)
        assert isinstance(located, LayoutReference)
        if located.tag or located.digest:
            raise UsageError(f"{located.text}: a source is a whole layout (oci:DIR), not one model in it")
        return LayoutSource(Path(located.path).expanduser(), located.text)
    if isinstance(item, str) and "/" not in item:  # a registry alone: every repository of it
        located = locate(f"{item}/x", Role.REGISTRY)
        assert isinstance(located, RegistryReference)
        return RegistrySource(located.registry, "", options)
    located = locate(item, Role.REGISTRY)
    assert isinstance(located, RegistryReference)
    if located.names_version and (isinstance(item, str) or located.tag or located.digest):
        raise UsageError(f"{located.text}: a source is a registry prefix (host/path), without a tag or digest")
    return RegistrySource(located.registry, located.repository, options)


@dataclass(frozen=True)
class Resolved:
    """A revision of a repo id, resolved: the manifest it names and the model manifest."""

    repo_id: str
    revision: str
    commit: str  # the first 40 hex digits of ``top``'s digest
    top: Descriptor  # what the revision resolves to (an index, or the model manifest)
    model: Descriptor  # the model manifest
    manifest: Manifest
    repo: Repository
    source: Source
    created: str | None = None  # when the model was made (:func:`created_of`), as the artifact says


@dataclass(frozen=True)
class Refs:
    """A repository's revisions as the Hub lists its refs: ``main`` (the default tag) and every tag."""

    repo_id: str
    main: str | None  # the commit of the default tag; None when the repository lacks it
    tags: tuple[tuple[str, str], ...]  # (tag, commit), sorted by tag


#: bytes of a config read for its date (a ModelPack config is a few KiB)
CONFIG_MAX = 4 * 1024 * 1024


def created_of(store: Store, manifest: Manifest) -> str | None:
    """When the model was made, as the artifact says it: the config's ``descriptor.createdAt``
    (ModelPack's), else the manifest's ``org.opencontainers.image.created`` annotation; None
    when neither says (never the time of the request: a date that moves tells a client the
    model changed)."""
    import json

    config = manifest.config
    if config.size <= CONFIG_MAX:
        try:
            data = json.loads(store.fetch_bytes(config))
        except (OcibridgeError, ValueError, RecursionError):
            data = None
        descriptor = data.get("descriptor") if isinstance(data, dict) else None
        created = descriptor.get("createdAt") if isinstance(descriptor, dict) else None
        if isinstance(created, str) and created:
            return created
    annotated = (manifest.annotations or {}).get(CREATED)
    return annotated if isinstance(annotated, str) and annotated else None


def commit_of(digest: str) -> str:
    return digest.split(":", 1)[1][:40]


class Catalog:
    """The sources, searched in order, and what was resolved in them."""

    def __init__(self, sources: Sequence[Source], *, default_tag: str = DEFAULT_TAG,
                 verify: VerifyPolicy | UsePolicy | None = None):
        self.sources = list(sources)
        self.default_tag = check_tag(default_tag)
        self.verify = verify
        self._lock = threading.Lock()
        self._commits: dict[tuple[int, str, str], str] = {}  # (source, repo id, commit) -> digest
        self._manifests: OrderedDict[str, tuple[Descriptor, Manifest, str | None]] = OrderedDict()
        self._verified: set[tuple[str, str | None, str]] = set()  # (repository, tag, digest) accepted
        self._recent: dict[tuple[str, str], tuple[float, Resolved]] = {}  # (repo id, revision) -> when, what

    def close(self) -> None:
        for source in self.sources:
            source.close()

    def resolve(self, repo_id: str, revision: str | None, *, reuse_for: float = 0) -> Resolved:
        """The revision (``main`` when None) of ``repo_id``; :class:`RepoNotFound` or
        :class:`RevisionNotFound` as the Hub answers; :class:`Refused` when a policy refuses it.
        ``reuse_for``: a resolution made with ``reuse_for`` less than that many seconds ago is
        given again, the source not asked (the Xet routes: a file is many requests for one commit)."""
        revision = revision or "main"
        if reuse_for <= 0:
            return self._find(repo_id, revision)
        key = (repo_id, revision)
        with self._lock:
            known = self._recent.get(key)
        if known is not None and time.monotonic() - known[0] < reuse_for:
            return known[1]
        resolved = self._find(repo_id, revision)
        with self._lock:
            if len(self._recent) > RECENT:
                self._recent.clear()
            self._recent[key] = (time.monotonic(), resolved)
        return resolved

    def _find(self, repo_id: str, revision: str) -> Resolved:
        """The revision in the first source where it resolves, checked."""
        parts = repo_parts(repo_id)
        if parts is None:
            raise RepoNotFound(f"{repo_id}: not a repository any source can hold")
        if not revision_named(revision):
            raise RevisionNotFound(f"{repo_id}: no revision {revision}")
        key = "/".join(parts)
        held = False
        for number, source in enumerate(self.sources):
            repo = source.repository(parts)
            if repo is None:
                continue
            try:
                top = self._resolve(number, key, repo, revision)
            except (NotFound, InvalidReference):
                held = held or self._holds(repo)
                continue
            if isinstance(source, RegistrySource):
                source.seen.add(key)
            with self._lock:
                self._commits[(number, key, commit_of(top.digest))] = top.digest
            model, manifest, created = self._manifest(repo.store, top)
            self._check(repo, top, self._tag_of(revision))
            return Resolved(repo_id, revision, commit_of(top.digest), top, model, manifest, repo, source, created)
        if held:
            raise RevisionNotFound(self._no_revision(repo_id, parts, revision))
        raise RepoNotFound(f"{repo_id}: no such repository in {', '.join(s.shown for s in self.sources)}")

    def _no_revision(self, repo_id: str, parts: list[str], revision: str) -> str:
        """Why a revision of a repository that exists is not found; for ``main``, which tags
        there are and how to name one (the README's ``from_pretrained("a")`` of a repo with only ``:v1``)."""
        if revision != "main":
            return f"{repo_id}: no revision {revision}"
        tags: set[str] = set()
        for source in self.sources:
            repo = source.repository(parts)
            if repo is not None:
                with contextlib.suppress(NotFound, RegistryError):
                    tags.update(repo.tags())
        shown = ", ".join(sorted(tags)[:10]) + (", ..." if len(tags) > 10 else "")
        return (f"{repo_id}: no revision main (the tag {self.default_tag}); its tags: {shown or 'none'}: "
                "ask for one (revision='TAG'), or run serve with --default-tag TAG")

    def _resolve(self, number: int, key: str, repo: Repository, revision: str) -> Descriptor:
        store = repo.store
        if _DIGEST.fullmatch(revision):
            return store.resolve(revision)
        if COMMIT.fullmatch(revision):
            with self._lock:
                known = self._commits.get((number, key, revision))
            if known is not None:
                return store.resolve(known)
            return store.resolve(self._commit_digest(repo, revision))
        tag = self.default_tag if revision == "main" else check_tag(revision)
        return store.resolve(repo.reference(tag))

    def _commit_digest(self, repo: Repository, commit: str) -> str:
        """The one digest a commit id abbreviates among the repository's tags."""
        found = set()
        for tag in repo.tags()[:MAX_TAGS_SCANNED]:
            try:
                digest = repo.store.resolve(repo.reference(tag)).digest
            except (NotFound, InvalidReference):
                continue
            if commit_of(digest) == commit:
                found.add(digest)
        if len(found) != 1:
            raise NotFound(f"{repo.shown}: no one manifest has the commit id {commit}")
        return found.pop()

    @staticmethod
    def _holds(repo: Repository) -> bool:
        try:
            return bool(repo.tags())
        except (NotFound, RegistryError):
            return False

    def _manifest(self, store: Store, top: Descriptor) -> tuple[Descriptor, Manifest, str | None]:
        """The model manifest ``top`` leads to, and its date (:func:`created_of`): read once
        per digest (a digest's content never changes)."""
        with self._lock:
            known = self._manifests.get(top.digest)
            if known is not None:
                self._manifests.move_to_end(top.digest)
                return known
        from ocibridge.model.extract import fetch_manifest

        model, manifest = fetch_manifest(store, top.digest)
        found = (model, manifest, created_of(store, manifest))
        with self._lock:
            self._manifests[top.digest] = found
            while len(self._manifests) > MEMO:
                self._manifests.popitem(last=False)
        return found

    def refs(self, repo_id: str) -> Refs:
        """The repository's refs in the first source that holds it: ``main`` when the default
        tag is there, and every tag (at most :data:`MAX_TAGS_SCANNED`), each with its commit."""
        parts = repo_parts(repo_id)
        if parts is None:
            raise RepoNotFound(f"{repo_id}: not a repository any source can hold")
        key = "/".join(parts)
        for number, source in enumerate(self.sources):
            repo = source.repository(parts)
            if repo is None:
                continue
            try:
                names = repo.tags()
            except (NotFound, RegistryError):
                continue
            tags = []
            for tag in sorted(names)[:MAX_TAGS_SCANNED]:
                try:
                    digest = repo.store.resolve(repo.reference(check_tag(tag))).digest
                except (NotFound, InvalidReference):
                    continue
                with self._lock:
                    self._commits[(number, key, commit_of(digest))] = digest
                tags.append((tag, commit_of(digest)))
            if tags:
                main = next((commit for tag, commit in tags if tag == self.default_tag), None)
                return Refs(repo_id, main, tuple(tags))
        raise RepoNotFound(f"{repo_id}: no such repository in {', '.join(s.shown for s in self.sources)}")

    def _tag_of(self, revision: str) -> str | None:
        """The tag a revision names (None: a digest or commit id), as the policy's scopes see it."""
        if _DIGEST.fullmatch(revision) or COMMIT.fullmatch(revision):
            return None
        return self.default_tag if revision == "main" else revision

    def _check(self, repo: Repository, top: Descriptor, tag: str | None) -> None:
        """Check then serve, as pull checks: the containers policy file that applies to the
        repository (and tag) and the ``--verify-key`` keys; once accepted, remembered."""
        key = (repo.shown, tag, top.digest)
        if key in self._verified:
            return
        from ocibridge.errors import SignatureError
        from ocibridge.signing.policy import Trusted
        from ocibridge.signing.use import check_before_use

        try:
            check_before_use(repo.store, top, repo.located(tag, top.digest), self.verify, repo.shown,
                             trusts=Trusted.FILES)
        except SignatureError as e:
            raise Refused(str(e)) from None
        with self._lock:
            self._verified.add(key)

    def repo_ids(self) -> Iterator[tuple[str, Source]]:
        """Every repo id the sources hold, the first source's first."""
        seen: set[str] = set()
        for source in self.sources:
            for repo_id in source.repo_ids():
                if repo_id not in seen:
                    seen.add(repo_id)
                    yield repo_id, source

