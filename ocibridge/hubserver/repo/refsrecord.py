"""A repository's refs record: which of its plain tags are branches and which are Hub tags, kept
in the registry itself (so every serve process, with no state of its own, lists them alike).

The record is an OCI manifest under the bookkeeping tag ``ocibridge-refs`` (oci/bookkeeping.py),
``artifactType`` :data:`~ocibridge.oci.bookkeeping.REFS_ARTIFACT_TYPE`, the empty config, and one
JSON layer of that media type: ``{"branches": ["dev"], "tags": ["v1"]}`` (Hub names: ``main`` is
always the default tag's branch and is not listed), with ``"branchesAside"`` and ``"tagsAside"``
the names whose ref is not at the registry tag of its own name, because the other kind had it
first (:mod:`.refnames` says where each lives), ``"private": true`` for a private
repository (:mod:`..visibility`), ``"gated": "auto"`` or ``"manual"`` for a gated one (its files
go to its authorized list only: :mod:`..access`) and ``"deleted": true`` for one ``delete_repo`` deleted (its
tags name serve's tombstone, :mod:`.tombstone`), ``"recreated": true`` for one made again over a
deleted one of its name (a commit named by digest or id is then its own only when its commit tag
names it: :mod:`.recreated`), ``"upstream": true`` for one a proxy recorded gated or private before
the upstream's first commit of it landed (it is the upstream's to fill: upstream/keptaccess.py),
``"accessRequests"`` a gated one's access requests (who asked, the owners' decision: :mod:`.accessrequests`).
A plain tag the record does not name is a Hub tag. :mod:`ocibridge.hubserver.repo.refsrecord` writes it.

Fail closed: only a registry that says the tag is not there (not found) means "no
record" (a public, ungated repository whose tags are Hub tags). A record serve cannot read (the
registry answered 503 or 429, or did not answer) or cannot make sense of (too large, not a refs
record, not JSON: serve cannot tell what it said, private and gated included) raises
:class:`RecordUnread`, which every request that needs it is refused with (the Hub's 503 with
``Retry-After``, :mod:`..failures`): never read as public, ungated, not deleted, and never the
start of a write that would rewrite it without what it said. A malformed record therefore keeps
its repository refused until it is fixed by hand (written again, or its tag deleted).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass

from ocibridge.core import boundedjson
from ocibridge.errors import InvalidReference, NotFound, OcibridgeError
from ocibridge.hubserver.repo.commits import BadCommit
from ocibridge.hubserver.repo.recordlayer import record_layer
from ocibridge.hubserver.repo.refrules import hub_ref_name, is_tag
from ocibridge.hubserver.repo.sources import Repository, repo_parts
from ocibridge.oci.bookkeeping import REFS_ARTIFACT_TYPE, REFS_LAYER_TYPE, REFS_TAG, is_bookkeeping
from ocibridge.oci.empty import empty_descriptor
from ocibridge.oci.mediatypes import OCI_MANIFEST
from ocibridge.oci.models import Descriptor, Manifest
from ocibridge.stores.base import WritableStore

log = logging.getLogger("ocibridge.hubserver")

#: bytes of the record's manifest and layer read at most
RECORD_MAX = 1024 * 1024
#: the Hub's gates (how access requests are accepted: at once, by hand: accessrequests.py); the
#: authorized list is those accepted and the token file's owners (access.py, ``Gate.may_fetch``)
GATES = ("auto", "manual")
#: seconds a request refused for a record not read is told to wait (Retry-After): huggingface_hub's
#: downloads ask again after it, 5 times, so a blip of the registry shorter than this is ridden out
RETRY_AFTER = 5


#: the states of an access request, as the Hub names them
ASK_STATES = ("pending", "accepted", "rejected")
#: access requests a record keeps at most (the record stays far below :data:`RECORD_MAX`)
ASKS_MAX = 2000


@dataclass(frozen=True)
class AccessAsk:
    """One caller's access request to a gated repository: the token name that asked (or was
    granted), its state, and when it was last changed (ISO 8601, UTC)."""

    user: str
    status: str
    timestamp: str


@dataclass(frozen=True)
class RefsRecord:
    """The branch names (besides ``main``) and the Hub tag names serve made, as recorded."""

    branches: frozenset[str] = frozenset()
    tags: frozenset[str] = frozenset()
    private: bool = False
    deleted: bool = False
    moved: str = ""  # the repo id ``move_repo`` moved a deleted repository to (its reads redirect there)
    branches_aside: frozenset[str] = frozenset()  # branches at ``ocibridge-branch-NAME`` (a tag had NAME)
    tags_aside: frozenset[str] = frozenset()  # Hub tags at ``ocibridge-tag-NAME`` (a branch had NAME)
    gated: str = ""  # "auto" or "manual" (GATES): who may fetch its files (access.py); "": not gated
    recreated: bool = False  # made again over a deleted repository of its name (reborn.py)
    upstream: bool = False  # recorded by a proxy before the upstream's first commit landed (keptaccess.py)
    asks: tuple[AccessAsk, ...] = ()  # a gated one's access requests, oldest first (accessrequests.py)

    def with_ref(self, name: str, branch: bool, aside: bool = False) -> RefsRecord:
        """The record with ``name`` added as a branch (``branch``) or a tag, at the registry tag
        of its own name or (``aside``) at its reserved one; the other kind's ``name`` is kept."""
        if branch:
            return dataclasses.replace(self, branches=self.branches | {name},
                                       branches_aside=_toggled(self.branches_aside, name, aside))
        return dataclasses.replace(self, tags=self.tags | {name}, tags_aside=_toggled(self.tags_aside, name, aside))

    def without_ref(self, name: str, branch: bool) -> RefsRecord:
        """The record with ``name`` no branch (``branch``) or no tag (deleted)."""
        if branch:
            return dataclasses.replace(self, branches=self.branches - {name},
                                       branches_aside=self.branches_aside - {name})
        return dataclasses.replace(self, tags=self.tags - {name}, tags_aside=self.tags_aside - {name})

    def as_json(self) -> bytes:
        doc: dict[str, object] = {"branches": sorted(self.branches), "tags": sorted(self.tags)}
        if self.branches_aside:
            doc["branchesAside"] = sorted(self.branches_aside)
        if self.tags_aside:
            doc["tagsAside"] = sorted(self.tags_aside)
        if self.private:
            doc["private"] = True
        if self.gated:
            doc["gated"] = self.gated
        if self.deleted:
            doc["deleted"] = True
        if self.moved:
            doc["moved"] = self.moved
        if self.recreated:
            doc["recreated"] = True
        if self.upstream:
            doc["upstream"] = True
        if self.asks:
            doc["accessRequests"] = [{"user": a.user, "status": a.status, "timestamp": a.timestamp} for a in self.asks]
        return json.dumps(doc, separators=(",", ":")).encode()


def _toggled(names: frozenset[str], name: str, present: bool) -> frozenset[str]:
    return names | {name} if present else names - {name}


class RecordUnread(OcibridgeError):
    """The refs record is there but was not read (the registry refused or failed, or what it
    holds is no record serve can read): whether the repository is private, gated or deleted is
    not known, so what needs it is refused (the Hub's 503, asked again after :attr:`retry_after`)."""

    def __init__(self, message: str, retry_after: int | None = None):
        super().__init__(message)
        self.retry_after = RETRY_AFTER if retry_after is None else retry_after


def read_record(repo: Repository) -> RefsRecord:
    """The repository's record; the empty record when it has none (the registry said its tag is
    not found); :class:`RecordUnread` when it was not read or is malformed (never the empty
    record then: a tag that resolves is a record, even one whose blob is gone)."""
    store = repo.store
    try:
        desc = store.resolve(repo.reference(REFS_TAG))
    except (NotFound, InvalidReference):
        return RefsRecord()
    except (OcibridgeError, OSError) as e:
        raise _unread(repo, e) from None
    try:
        return parsed(record_layer(store, desc, REFS_ARTIFACT_TYPE, REFS_LAYER_TYPE, RECORD_MAX, "refs",
                                   OcibridgeError))
    except (OcibridgeError, OSError, ValueError, RecursionError) as e:
        raise _unread(repo, e) from None


def _unread(repo: Repository, error: Exception) -> RecordUnread:
    log.warning("%s: its refs record (%s) is not read, so what needs it is refused: %s", repo.shown, REFS_TAG, error)
    return RecordUnread(f"{repo.shown}: serve cannot read its refs record ({REFS_TAG}) now, so it cannot tell "
                        f"whether the repository is private, gated or deleted: {error}; try again shortly")


def parsed(data: bytes) -> RefsRecord:
    """The record's layer, read: names that are tags a registry takes, not serve's own."""
    doc = boundedjson.loads(data)
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")

    def names(key: str) -> frozenset[str]:
        listed = doc.get(key)
        found = set()
        for name in listed if isinstance(listed, list) else []:
            if isinstance(name, str) and not is_bookkeeping(name):
                try:
                    found.add(hub_ref_name(name))
                except InvalidReference:
                    continue
        return frozenset(found)

    branches, tags = names("branches"), names("tags")
    # a name of both kinds has at most one at its own tag: the record's word for which, else the branch
    branches_aside, tags_aside = names("branchesAside") & branches, names("tagsAside") & tags
    tags_aside |= (branches & tags) - branches_aside
    # a name no registry tag can be (feature/x) is always at its reserved tag (refnames.py)
    branches_aside |= {n for n in branches if not is_tag(n)}
    tags_aside |= {n for n in tags if not is_tag(n)}
    moved = doc.get("moved")
    moved = moved if isinstance(moved, str) and repo_parts(moved) is not None else ""
    gated = doc.get("gated")
    return RefsRecord(branches, tags, doc.get("private") is True, doc.get("deleted") is True, moved,
                      branches_aside, tags_aside, gated if gated in GATES else "", doc.get("recreated") is True,
                      doc.get("upstream") is True, _asks(doc.get("accessRequests")))


def _asks(listed: object) -> tuple[AccessAsk, ...]:
    """The record's access requests that make sense (one per user, at most :data:`ASKS_MAX`)."""
    found: dict[str, AccessAsk] = {}
    for item in listed[:ASKS_MAX] if isinstance(listed, list) else []:
        if not isinstance(item, dict):
            continue
        user, status, when = item.get("user"), item.get("status"), item.get("timestamp")
        if isinstance(user, str) and user and status in ASK_STATES and isinstance(when, str):
            found[user] = AccessAsk(user, str(status), when)
    return tuple(found.values())


# Writing the record: rewritten whole by ``create_branch`` and ``create_tag``, before the plain tag of
# the new ref is written, so a crash between the two leaves a recorded name without its tag (listed by
# nobody) rather than a branch listed as a tag.

#: the name of the lock of a repository's refs record among the branches' locks (no branch has it)
RECORD_LOCK = "\0refs"


def record_store(repo: Repository) -> WritableStore:
    """The store to write ``repo``'s record (and tags) in; :class:`BadCommit` when serve cannot write there."""
    if not isinstance(repo.store, WritableStore):
        raise BadCommit(f"{repo.shown}: not a store serve can tag")
    return repo.store


def write_record(repo: Repository, store: WritableStore, record: RefsRecord) -> Descriptor:
    """``record`` as the repository's ``ocibridge-refs`` manifest; its descriptor."""
    from ocibridge.transfer.writer import Blob, write_artifact

    data = record.as_json()
    layer = Descriptor.for_bytes(REFS_LAYER_TYPE, data)
    body = Manifest(mediaType=OCI_MANIFEST, artifactType=REFS_ARTIFACT_TYPE, config=empty_descriptor(),
                    layers=[layer]).to_json_bytes()
    desc = Descriptor.for_bytes(OCI_MANIFEST, body)
    write_artifact(store, desc, body, [Blob.empty(), Blob.of_bytes(layer, data)],
                   tags=[repo.reference(REFS_TAG)])
    return desc
