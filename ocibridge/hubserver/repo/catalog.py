"""The catalog: the sources, searched in order, and what was resolved in them (a revision's
manifest, a commit id mapped back, a repository's refs): the one place a revision is resolved,
which also keeps Xet's short reuse of a commit. What a repo id and a revision name in each
source is :mod:`.sources`'; what the sources lack, an upstream it holds is asked for
(:class:`.arriving.Upstream`, serve ``--upstream``)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, overload

from ocibridge.errors import DigestMismatch, InvalidReference, NotFound, RegistryError
from ocibridge.hubserver.repo.hubrefs import Refs, named_upstream
from ocibridge.hubserver.repo.modelconfig import config_of, created_of
from ocibridge.hubserver.repo.recreated import own_commit
from ocibridge.hubserver.repo.refnames import HEADS, TAGS, aside_tag, held_by, registry_tag, split_revision
from ocibridge.hubserver.repo.refsrecord import read_record
from ocibridge.hubserver.repo.repostates import RepoStates
from ocibridge.hubserver.repo.resolved import Resolved as Resolved  # where every route imports it from
from ocibridge.hubserver.repo.sources import (
    COMMIT,
    DEFAULT_TAG,
    DIGEST,
    SHORT_COMMIT,
    Refused,
    RegistrySource,
    RepoMoved,
    RepoNotFound,
    Repository,
    RevisionNotFound,
    Source,
    commit_of,
    repo_parts,
    revision_named,
)
from ocibridge.hubserver.repo.tombstone import is_tombstone
from ocibridge.hubserver.repo.upstreamids import by_upstream_id, upstream_commit, upstream_ids
from ocibridge.model.cardmeta import card_data
from ocibridge.oci.bookkeeping import PREFIX, commit_tag, is_bookkeeping, is_hidden
from ocibridge.oci.models import Descriptor, Manifest
from ocibridge.oci.reference import check_tag
from ocibridge.stores.registry.commitscan import AmbiguousCommit, find_commit

if TYPE_CHECKING:
    from ocibridge.hubserver.repo.arriving import Arriving, Upstream, UpstreamFor
    from ocibridge.signing.containers_policy import UsePolicy
    from ocibridge.signing.verify import VerifyPolicy
    from ocibridge.stores.base import Store

#: tags resolved at most to map a commit id back to its digest
MAX_TAGS_SCANNED = 1000
#: resolved revisions kept in memory (manifests are content-addressed: a digest's never changes)
MEMO = 512
#: resolutions kept for reuse (:meth:`Catalog.resolve`'s ``reuse_for``): past it, all are forgotten
RECENT = 1024


class Catalog:
    """The sources, searched in order, and what was resolved in them."""

    def __init__(self, sources: Sequence[Source], *, default_tag: str = DEFAULT_TAG,
                 verify: VerifyPolicy | UsePolicy | None = None, upstream: UpstreamFor | None = None):
        self.sources = list(sources)
        self.default_tag = check_tag(default_tag)
        self.verify = verify
        self._lock = threading.Lock()
        self._commits: dict[tuple[int, str, str], str] = {}  # (source, repo id, commit) -> digest
        self._manifests: OrderedDict[str, tuple[Descriptor, Manifest, str | None, Mapping[str, Any]]] = OrderedDict()
        self._verified: set[tuple[str, str | None, str]] = set()  # (repository, tag, digest) accepted
        self._recent: dict[tuple[str, str], tuple[float, Resolved]] = {}  # (repo id, revision) -> when, what
        self._upstream_ids: dict[str, str | None] = {}  # digest -> the upstream's commit id (None: not fetched)
        self.states = RepoStates(self.sources)  # private, deleted: the refs records, kept a few seconds
        #: serve --upstream: asked for what the sources lack, built for this catalog (upstream/proxy.py)
        self.upstream: Upstream | None = upstream(self) if upstream is not None else None

    def close(self) -> None:
        if self.upstream is not None:
            self.upstream.close()
        for source in self.sources:
            source.close()

    def forget(self, repo_id: str, *, record: bool = True) -> None:
        """What this serve knows of ``repo_id``'s commits and state (``record``: its refs record too):
        it changed (a delete, a move, its visibility, a commit landed), so the next request asks the registry."""
        parts = repo_parts(repo_id)
        key = "/".join(parts) if parts is not None else repo_id
        with self._lock:
            self._commits = {k: v for k, v in self._commits.items() if k[1] != key}
            self._recent = {k: v for k, v in self._recent.items() if k[0].lower() != repo_id.lower()}
        if record:
            self.states.forget(repo_id)

    @overload
    def resolve(self, repo_id: str, revision: str | None, *, reuse_for: float = 0, ref: bool = False,
                kind: str | None = None, arriving: Literal[False] = False) -> Resolved: ...

    @overload
    def resolve(self, repo_id: str, revision: str | None, *, reuse_for: float = 0, ref: bool = False,
                kind: str | None = None, arriving: bool) -> Resolved | Arriving: ...

    def resolve(self, repo_id: str, revision: str | None, *, reuse_for: float = 0, ref: bool = False,
                kind: str | None = None, arriving: bool = False) -> Resolved | Arriving:
        """The revision, as :meth:`resolve_here` finds it in the sources, or, with an upstream,
        as the upstream answers it (fetched when the sources lack it; ``arriving``: a commit whose
        fetch is under way handed out as it arrives, the read routes'). A write's (``ref``,
        ``kind``) is never the upstream's: it resolves the sources as they are."""
        if self.upstream is None or ref or kind is not None:
            return self.resolve_here(repo_id, revision, reuse_for=reuse_for, ref=ref, kind=kind)
        return self.upstream.resolve(repo_id, revision or "main", reuse_for, arriving=arriving)

    def resolve_here(self, repo_id: str, revision: str | None, *, reuse_for: float = 0, ref: bool = False,
                     kind: str | None = None) -> Resolved:
        """The revision (``main`` when None) of ``repo_id``; :class:`RepoNotFound` or
        :class:`RevisionNotFound` as the Hub answers; :class:`Refused` when a policy refuses it.
        ``reuse_for``: a resolution made with ``reuse_for`` less than that many seconds ago is
        given again, the source not asked (the Xet routes: a file is many requests for one commit).
        ``ref``: the revision is a branch's or tag's name, never an abbreviated commit id (the
        writes: a branch ``abc1234`` that does not exist is not the commit ``abc1234...``), and its
        registry tag is looked up in the refs record as it is now, not as kept a few seconds.
        ``kind``: the revision is the name of a branch (:data:`.refnames.HEADS`) or a Hub tag
        (:data:`.refnames.TAGS`), as ``refs/heads/NAME`` and ``refs/tags/NAME`` say (the writes)."""
        revision = revision or "main"
        if reuse_for <= 0 or ref or kind is not None:
            return self._find(repo_id, revision, ref or kind is not None, kind)
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

    def _find(self, repo_id: str, revision: str, ref: bool = False, kind: str | None = None) -> Resolved:
        """The revision in the first source where it resolves, checked."""
        parts = repo_parts(repo_id)
        if parts is None:
            raise RepoNotFound(f"{repo_id}: not a repository any source can hold")
        fresh = ref  # a write's: the refs record as it is now
        if kind is None:
            kind, name = split_revision(revision)
            ref = ref or kind is not None
        else:
            name = revision
        if is_bookkeeping(name) or not revision_named(name):
            repos = (source.repository(parts) for source in self.sources)
            if not any(repo is not None and self._holds(repo) for repo in repos):
                raise self._absent(repo_id)  # answered as for any revision: a bad name tells nothing more
            if is_bookkeeping(name):
                raise RevisionNotFound(f"Invalid rev id: {revision}: names starting with '{PREFIX}' are serve's "
                                       "own bookkeeping tags (a commit's own tag, the refs record), never a revision")
            raise RevisionNotFound(f"{repo_id}: no revision {revision}")
        key = "/".join(parts)
        held = False
        for number, source in enumerate(self.sources):
            repo = source.repository(parts)
            if repo is None:
                continue
            try:
                top, tag = self._resolve(number, key, repo, name, ref, kind, fresh)
                if is_tombstone(top.digest):  # a ref serve deleted
                    raise NotFound(f"{repo.shown}: {revision} was deleted")
                if tag is None:  # an id or a digest: a deleted repository's manifests wait for GC
                    self._not_deleted(repo_id, repo, top)
            except AmbiguousCommit as e:  # refused here, not looked for in the next source
                raise RevisionNotFound(str(e)) from None
            except (NotFound, InvalidReference):
                held = held or self._holds(repo)
                continue
            if isinstance(source, RegistrySource):
                source.seen.add(key)
            model, manifest, created, card = self._manifest(repo.store, top)
            commit = self._upstream_id(repo, top, manifest) or commit_of(top.digest)
            with self._lock:
                self._commits[(number, key, commit_of(top.digest))] = top.digest
                self._commits[(number, key, commit)] = top.digest
            self._check(repo, top, tag)
            return Resolved(repo_id, revision, commit, top, model, manifest, repo, source, created, card, tag)
        if held:
            raise RevisionNotFound(self._no_revision(repo_id, parts, revision))
        raise self._absent(repo_id)

    def _absent(self, repo_id: str) -> RepoNotFound:
        """What a repository no source holds is answered: moved (its reads redirect, as the Hub's
        do: move_repo), else :meth:`missing`."""
        moved = self.states.of(repo_id).moved
        return RepoMoved(repo_id, moved) if moved else self.missing(repo_id)

    def missing(self, repo_id: str) -> RepoNotFound:
        """What a repository no source holds is answered as; one a token may not read is
        answered the same (access.py), so that its existence does not leak."""
        if repo_parts(repo_id) is None:
            return RepoNotFound(f"{repo_id}: not a repository any source can hold")
        return RepoNotFound(f"{repo_id}: no such repository in {', '.join(s.shown for s in self.sources)}")

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
                    tags.update(tag for tag in repo.tags() if not is_hidden(tag))
        shown = ", ".join(sorted(tags)[:10]) + (", ..." if len(tags) > 10 else "")
        return (f"{repo_id}: no revision main (the tag {self.default_tag}); its tags: {shown or 'none'}: "
                "ask for one (revision='TAG'), or run serve with --default-tag TAG")

    def _resolve(self, number: int, key: str, repo: Repository, revision: str, ref: bool = False,
                 kind: str | None = None, fresh: bool = False) -> tuple[Descriptor, str | None]:
        """The manifest ``revision`` (a ref of ``kind`` when given) names in ``repo``, and the
        registry tag it named (None: a digest or a commit id): a ref's, as :mod:`.refnames` says.
        7 to 39 hex digits are a ref when the repository has it (git prefers a ref to an
        abbreviated id too), else (unless ``ref``) an abbreviated commit id."""
        store = repo.store
        scans = not isinstance(self.sources[number], RegistrySource)
        if kind is None and DIGEST.fullmatch(revision):
            if scans and not self._named_here(repo, revision):
                raise NotFound(f"{repo.shown}: no revision {revision}")
            return store.resolve(revision), None
        if kind is None and COMMIT.fullmatch(revision):
            with self._lock:
                known = self._commits.get((number, key, revision))
            if known is not None:
                return store.resolve(known), None
            return self._commit(repo, revision, scans), None
        tag = check_tag(self._tag_of(key, repo, revision, fresh, kind))
        if ref or not SHORT_COMMIT.fullmatch(revision):
            return store.resolve(repo.reference(tag)), tag
        with contextlib.suppress(NotFound):
            found = store.resolve(repo.reference(tag))
            if not is_tombstone(found.digest):  # a deleted tag shadows no commit
                return found, tag
        return self._commit(repo, revision, scans), None

    def _tag_of(self, key: str, repo: Repository, name: str, fresh: bool, kind: str | None) -> str:
        """The registry tag of the ref ``name`` (:mod:`.refnames`): the refs record as it is now
        for a write (``fresh``), as kept a few seconds for a read; :class:`NotFound` when no ref
        of ``kind`` has that name."""
        if name == "main" and kind != TAGS:
            return self.default_tag
        record = read_record(repo) if fresh else self.states.of(key)
        tag = registry_tag(record, kind, name, self.default_tag)
        if tag is None:
            raise NotFound(f"{repo.shown}: no {'branch' if kind == HEADS else 'tag'} {name}")
        return tag

    def _commit(self, repo: Repository, commit: str, scans: bool) -> Descriptor:
        """The manifest of a commit id, whole or abbreviated: its bookkeeping tag (one HEAD;
        every commit serve writes has one, landing.py), else (``scans``: a layout; the registry
        store scans by itself) the one commit among the repository's tags whose id starts with
        ``commit`` (commitscan.py: :class:`AmbiguousCommit` when several do)."""
        lookup = commit_tag(commit)
        try:
            found = repo.store.resolve(repo.reference(lookup))
        except DigestMismatch as e:  # the registry store's check of a commit tag: a tag moved by hand
            raise NotFound(str(e)) from None
        except NotFound:
            with contextlib.suppress(NotFound, InvalidReference):  # an upstream's id (repo/upstreamids.py)
                return by_upstream_id(repo, commit)
            if not scans:
                raise
            named = find_commit(commit, [t for t in repo.tags() if t != lookup],
                                lambda tag: repo.store.resolve(repo.reference(tag)), f"{repo.shown}@{commit}")
            if named is None:
                raise NotFound(f"{repo.shown}: no one manifest has the commit id {commit}") from None
            found = repo.store.resolve(named if named.startswith("sha256:") else repo.reference(named))
        if not commit_of(found.digest).startswith(commit):  # a tag moved by hand: not this commit
            raise NotFound(f"{repo.shown}: its tag {commit_tag(commit)} names another manifest")
        return found

    def _upstream_id(self, repo: Repository, top: Descriptor, manifest: Manifest) -> str | None:
        """The upstream Hub's id of a commit serve's ``--upstream`` fetched (repo/upstreamids.py):
        the id it answers as; looked up once per manifest."""
        with self._lock:
            if top.digest in self._upstream_ids:
                return self._upstream_ids[top.digest]
        found = upstream_commit(repo, top, manifest)
        with self._lock:
            if len(self._upstream_ids) > MEMO:
                self._upstream_ids.clear()
            self._upstream_ids[top.digest] = found
        return found

    def _not_deleted(self, repo_id: str, repo: Repository, top: Descriptor) -> None:
        """:class:`NotFound` for a manifest named by digest or commit id that a deleted
        repository of this name held: the repository is deleted, or was made again (reborn.py)."""
        state = self.states.of(repo_id)
        if state.deleted:
            raise NotFound(f"{repo.shown}: the repository was deleted")
        if state.recreated and not own_commit(repo, top):
            raise NotFound(f"{repo.shown}: {top.digest} is no commit of it (a deleted repository of its name had it)")

    @staticmethod
    def _named_here(repo: Repository, digest: str) -> bool:
        """Whether one of ``repo``'s own names in a layout (a tag, a ref's, a commit's
        bookkeeping tag) names the manifest ``digest``. A layout keeps every
        repository's manifests in one index: the digest alone says nothing of whose it is, and
        answering it through any repo id would give a private or gated repository's files to
        whoever reads another one, or one that does not exist. (A registry keeps each
        repository's manifests apart: it answers only its own.)"""
        for name in repo.store.tags():
            if name.startswith(repo.prefix):
                with contextlib.suppress(NotFound):
                    if repo.store.resolve(name).digest == digest:
                        return True
        return False

    @staticmethod
    def _holds(repo: Repository) -> bool:
        """Whether the repository exists: it has tags, and ``delete_repo`` did not delete it."""
        try:
            if not repo.tags():
                return False
        except (NotFound, RegistryError):
            return False
        return not read_record(repo).deleted

    def _manifest(self, store: Store, top: Descriptor) -> tuple[Descriptor, Manifest, str | None, Mapping[str, Any]]:
        """The model manifest ``top`` leads to, its date (:func:`created_of`) and card metadata
        (:func:`ocibridge.model.cardmeta.card_data`): read once per digest (a digest's content
        never changes)."""
        with self._lock:
            known = self._manifests.get(top.digest)
            if known is not None:
                self._manifests.move_to_end(top.digest)
                return known
        from ocibridge.model.extract import fetch_manifest

        model, manifest = fetch_manifest(store, top.digest)
        config = config_of(store, manifest)
        found = (model, manifest, created_of(config, manifest), card_data(config, manifest.annotations or {}))
        with self._lock:
            self._manifests[top.digest] = found
            while len(self._manifests) > MEMO:
                self._manifests.popitem(last=False)
        return found

    def refs(self, repo_id: str) -> Refs:
        """The repository's refs in the first source that holds it: ``main`` when the default
        tag is there, and every tag (at most :data:`MAX_TAGS_SCANNED`), each with its commit."""
        taken = self.upstream.taken_back(repo_id) if self.upstream is not None else None
        if taken is not None:
            raise taken
        parts = repo_parts(repo_id)
        if parts is None:
            raise RepoNotFound(f"{repo_id}: not a repository any source can hold")
        key = "/".join(parts)
        for number, source in enumerate(self.sources):
            repo = source.repository(parts)
            if repo is None:
                continue
            try:
                every = repo.tags()
            except (NotFound, RegistryError):
                continue
            names = [tag for tag in every if not is_hidden(tag)]  # ours, cosign's
            tags = []
            for tag in sorted(names)[:MAX_TAGS_SCANNED]:
                commit = self._commit_of_tag(number, key, repo, tag)
                if commit is not None:
                    tags.append((tag, commit))
            if tags:
                return named_upstream(self._refs(number, key, repo, repo_id, tags), upstream_ids(repo, every))
        raise self.missing(repo_id)

    def _refs(self, number: int, key: str, repo: Repository, repo_id: str, tags: list[tuple[str, str]]) -> Refs:
        """The branches and Hub tags of ``repo``, whose plain tags are ``tags``: each plain tag
        the ref it holds (:func:`.refnames.held_by`), then the refs the record puts aside."""
        record = read_record(repo)
        found: dict[str, list[tuple[str, str]]] = {HEADS: [], TAGS: []}
        for tag, commit in tags:
            held = held_by(record, tag, self.default_tag)
            if held is not None and held[1] != "main":
                found[held[0]].append((held[1], commit))
        for kind, names in ((HEADS, record.branches_aside), (TAGS, record.tags_aside)):
            for name in sorted(names):
                aside = self._commit_of_tag(number, key, repo, aside_tag(kind, name))
                if aside is not None:
                    found[kind].append((name, aside))
        main = next((commit for tag, commit in tags if tag == self.default_tag), None)
        return Refs(repo_id, main, tuple(tags), tuple(sorted(found[HEADS])), tuple(sorted(found[TAGS])),
                    self.default_tag)

    def _commit_of_tag(self, number: int, key: str, repo: Repository, tag: str) -> str | None:
        """The commit a registry tag names (remembered for its id); None when it has none or was deleted."""
        try:
            digest = repo.store.resolve(repo.reference(check_tag(tag))).digest
        except (NotFound, InvalidReference):
            return None
        if is_tombstone(digest):  # deleted
            return None
        with self._lock:
            self._commits[(number, key, commit_of(digest))] = digest
        return commit_of(digest)

    def _check(self, repo: Repository, top: Descriptor, tag: str | None) -> None:
        """Check then serve, as pull checks: the containers policy file that applies to the
        repository (and tag) and the ``--verify-key`` keys; once accepted, remembered."""
        key = (repo.shown, tag, top.digest)
        if key in self._verified:
            return
        from ocibridge.errors import SignatureError
        from ocibridge.scanning.policy import require_clean_scan
        from ocibridge.signing.coverage import Trusted  # not .policy: it loads cryptography (verify, keys)
        from ocibridge.signing.use import check_before_use

        located = repo.located(tag, top.digest)
        try:
            check_before_use(repo.store, top, located, self.verify, repo.shown, clean_scan=require_clean_scan,
                             trusts=Trusted.FILES)
        except SignatureError as e:
            from ocibridge.hubserver.repo.rules import refusing_rule

            raise Refused(str(e), refusing_rule(repo.store, top, located, self.verify, repo.shown)) from None
        with self._lock:
            self._verified.add(key)

    def repo_ids(self) -> Iterator[tuple[str, Source]]:
        """Every repo id the sources hold, the first source's first; but those the upstream took
        back (upstream/revocation.py): never listed."""
        seen: set[str] = set()
        for source in self.sources:
            for repo_id in source.repo_ids():
                if repo_id not in seen and (self.upstream is None or self.upstream.taken_back(repo_id) is None):
                    seen.add(repo_id)
                    yield repo_id, source
