"""A gated repository's access requests, kept in its refs record (:mod:`.refsrecord`) so that every
replica and every restart sees the same list: a caller asks (pending), the repository's owners
accept, reject, set back to pending, or grant one who never asked. Under a "manual" gate a request
waits for an owner; under "auto" it is accepted as it is made, as on the Hub. A caller is the name
of its token (:attr:`..grants.Grant.name`): the name the owners see, decide on and grant. No HTTP
here (the routes: ``writeroutes/accessroutes.py``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime, timezone

from ocibridge.hubserver.repo.commits import BadCommit
from ocibridge.hubserver.repo.refsrecord import (
    ASK_STATES,
    ASKS_MAX,
    RECORD_LOCK,
    AccessAsk,
    RefsRecord,
    read_record,
    record_store,
    write_record,
)
from ocibridge.hubserver.repo.reponames import hub_id
from ocibridge.hubserver.repo.repos import Repos


class NotGated(BadCommit):
    """An access request to a repository that is not gated (the Hub's 400)."""


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def accepted(record: RefsRecord, user: str) -> bool:
    """Whether ``user``'s access request to the record's repository is accepted."""
    return any(a.user == user and a.status == "accepted" for a in record.asks)


def listed(record: RefsRecord, status: str) -> list[AccessAsk]:
    """The record's access requests in ``status``, oldest first."""
    return [a for a in record.asks if a.status == status]


def ask(repos: Repos, repo_id: str, user: str) -> str:
    """``user`` asks for ``repo_id``'s files: its request's state after ("accepted" at once under
    an "auto" gate; one already decided stays as decided)."""
    def change(record: RefsRecord) -> RefsRecord | None:
        mine = next((a for a in record.asks if a.user == user), None)
        if mine is not None:
            return None
        return _with(record, AccessAsk(user, "accepted" if record.gated == "auto" else "pending", _now()))

    return _state_of(_changed(repos, repo_id, change), user)


def decide(repos: Repos, repo_id: str, user: str, status: str, *, grant: bool = False) -> None:
    """An owner sets ``user``'s request to ``status``; ``grant``: one who never asked is accepted
    (else a user with no request is refused, as on the Hub, as is a decision that changes nothing)."""
    if status not in ASK_STATES:
        raise BadCommit(f"Invalid status {status!r}: expected one of {', '.join(ASK_STATES)}")

    def change(record: RefsRecord) -> RefsRecord | None:
        mine = next((a for a in record.asks if a.user == user), None)
        if mine is None and not grant:
            raise BadCommit(f"{user} has no access request to {hub_id(repo_id)}")
        if mine is not None and mine.status == status:  # the Hub's 400: a decision that changes nothing
            raise BadCommit(f"{user}'s access request to {hub_id(repo_id)} is {status} already")
        return _with(record, AccessAsk(user, status, _now()))

    _changed(repos, repo_id, change)


def _with(record: RefsRecord, made: AccessAsk) -> RefsRecord:
    others = tuple(a for a in record.asks if a.user != made.user)
    if len(others) >= ASKS_MAX:
        raise BadCommit(f"this repository keeps {ASKS_MAX} access requests at most: reject or cancel some first")
    return dataclasses.replace(record, asks=(*others, made))


def _changed(repos: Repos, repo_id: str, change: Callable[[RefsRecord], RefsRecord | None]) -> RefsRecord:
    """The record of ``repo_id`` after ``change`` (None: as it is), written under the record's lock."""
    repo = repos.first_repository(repo_id)
    if repo is None:
        raise BadCommit(f"Invalid repo name: {hub_id(repo_id)}")
    with repos.branches.lock(repo_id, RECORD_LOCK):
        record = read_record(repo)
        if not record.gated or record.deleted:
            raise NotGated(f"{hub_id(repo_id)} is not a gated repository here: it takes no access requests (one "
                           "serve --upstream keeps gated takes them once a token on its list has read it here)")
        fresh = change(record)
        if fresh is not None:
            write_record(repo, record_store(repo), fresh)
            record = fresh
    repos.catalog.forget(repo_id)
    return record


def _state_of(record: RefsRecord, user: str) -> str:
    return next((a.status for a in record.asks if a.user == user), "pending")
