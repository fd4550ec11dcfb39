"""A branch and a Hub tag of one name, in a registry that has one tag of that name
(:mod:`ocibridge.hubserver.repo.refnames`): where the second goes when it is made, and how the one left gets
its own name back when the one there is deleted, each step leaving the record and the tags
agreeing (a crash midway lists every ref that exists, at one tag each)."""

from __future__ import annotations

from ocibridge.errors import InvalidReference, NotFound, OcibridgeError
from ocibridge.hubserver.repo.catalog import Resolved
from ocibridge.hubserver.repo.commits import BadCommit
from ocibridge.hubserver.repo.refnames import HEADS, aside_tag, other, registry_tag
from ocibridge.hubserver.repo.refrules import is_tag
from ocibridge.hubserver.repo.refsrecord import RefsRecord, write_record
from ocibridge.hubserver.repo.sources import Repository
from ocibridge.hubserver.repo.tombstone import is_tombstone
from ocibridge.oci.reference import check_tag
from ocibridge.stores.base import WritableStore


def place(source: Resolved, record: RefsRecord, kind: str, name: str, default_tag: str) -> tuple[str, RefsRecord]:
    """Where the new ref ``name`` of ``kind`` goes and the record that says so: the registry tag
    of its own name, unless a ref of the other kind is there: then its reserved tag
    (:func:`ocibridge.hubserver.repo.refnames.aside_tag`), the other left where pulls find it, and recorded (a
    tag pushed outside serve is a Hub tag the record did not name)."""
    branch, theirs = kind == HEADS, registry_tag(record, other(kind), name, default_tag)
    if not is_tag(name):  # no registry tag (feature/x): its reserved one, which the record names
        return aside_tag(kind, name), record.with_ref(name, branch, aside=True)
    if theirs != name:  # the other kind is aside, or there is none
        return name, record.with_ref(name, branch)
    if not present(source.repo, name):  # a name recorded whose tag was never written (a crash): dropped
        return name, record.without_ref(name, not branch).with_ref(name, branch)
    aside = aside_tag(kind, name)
    try:
        check_tag(aside)
    except OcibridgeError as e:
        raise BadCommit(f"{name}: a {'tag' if branch else 'branch'} has this name, and {aside} is no registry tag "
                        f"for the {'branch' if branch else 'tag'} beside it: {e}") from None
    return aside, record.with_ref(name, not branch).with_ref(name, branch, aside=True)


def give_back(repo: Repository, store: WritableStore, record: RefsRecord, kind: str, name: str) -> list[str]:
    """The ref ``name`` of ``kind``, at the registry tag ``name``, is deleted, and the other kind's
    ``name`` is aside: that one moves to ``name``. The record first forgets the deleted ref
    (``name`` then names no ref), ``name`` is retagged, the record says so, and the registry tags
    left to bury are returned (the reserved one; the caller buries them)."""
    from ocibridge.transfer.writer import retag

    theirs = other(kind)
    aside = aside_tag(theirs, name)
    gone = record.without_ref(name, kind == HEADS)
    try:
        found = store.resolve(repo.reference(aside))
    except (NotFound, InvalidReference):
        found = None
    if found is None or is_tombstone(found.digest):  # the other was never written (a crash): gone too
        write_record(repo, store, gone.without_ref(name, theirs == HEADS))
        return [name]
    write_record(repo, store, gone)
    retag(store, found, [repo.reference(name)])
    write_record(repo, store, gone.with_ref(name, theirs == HEADS))
    return [aside]


def present(repo: Repository, tag: str) -> bool:
    """Whether the registry tag ``tag`` names a manifest (a deleted tag names none)."""
    try:
        found = repo.store.resolve(repo.reference(tag))
    except (NotFound, InvalidReference):
        return False
    return not is_tombstone(found.digest)
