"""What the upstream Hub says a revision is: ``GET /api/models/REPO/revision/REV`` (model_info),
its commit and its files: the metadata the door's rules need, and all that is asked before a
repository is let in. The token is serve's (``--upstream-token-file``), never a client's."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ocibridge.hubserver.repo.sources import RepoNotFound, RevisionNotFound
from ocibridge.hubserver.upstream.askbudget import AskBudgets, AskRate
from ocibridge.hubserver.upstream.errors import UpstreamDown
from ocibridge.hubserver.upstream.memo import AnswerMemo
from ocibridge.hubserver.upstream.session import TIMEOUT, UpstreamSession, refused, upstream_tls
from ocibridge.hubserver.upstream.tokenless import check_tokenless

__all__ = ["TIMEOUT", "UpstreamHub", "UpstreamRevision", "not_found", "upstream_tls"]
_SHA = re.compile(r"[0-9a-f]{40}")


@dataclass(frozen=True)
class UpstreamRevision:
    """A revision as the upstream resolved it."""

    repo_id: str
    commit: str  # its 40 hex digits
    files: tuple[str, ...]  # every file's path (``siblings``)
    card: dict[str, Any] | None = None  # the card's metadata (``cardData``: the README's front matter)
    gated: str = ""  # "auto" or "manual" when the upstream gates it
    private: bool = False
    #: the model_info as the upstream wrote it (the commit facts and the answers in flight read it too)
    said: dict[str, Any] | None = field(default=None, compare=False, repr=False)


def not_found(repo_id: str, url: str) -> RepoNotFound:
    """A repository neither here nor at the upstream, in words that never say more: a private one
    a reader may not have is answered the same (upstream/proxy.py), its existence not told."""
    return RepoNotFound(f"{repo_id}: not here, nor at the upstream {url}")


class UpstreamHub:
    """The upstream's API, over the proxy's one session (serve's token); what it says of a revision
    asked once per ``fresh`` seconds (memo.py); ``asks``: what one client's misses may ask (askbudget.py)."""

    def __init__(self, session: UpstreamSession, fresh: float = 0, asks: AskRate | None = None):
        self.session = session
        self.url = session.url
        self.revisions: AnswerMemo[UpstreamRevision] = AnswerMemo(fresh)
        self.asks = AskBudgets(asks) if asks is not None else None

    def charge(self, what: str) -> None:
        """One ask of the upstream for the client being answered: :class:`.AsksSpent` past its budget;
        while the upstream's own window is open the ask is not sent, nor counted (its 503 first)."""
        self.session.window.check(what, self.url)
        if self.asks is not None:
            from ocibridge.hubserver.upstream.fetchbounds import requesting_client

            self.asks.take(requesting_client(), what)

    def revision(self, repo_id: str, revision: str, *, again: bool = False, miss: bool = False) -> UpstreamRevision:
        """The commit and files of ``revision`` (as the upstream said it within the freshness
        window, else asked now; ``again``: a re-check, asked now; ``miss``: asked for a client's
        miss, an ask its budget pays); :class:`RepoNotFound`/:class:`RevisionNotFound` as the
        upstream says (a 401 is the Hub's answer for a repository a token may not see: not found
        here too), :class:`UpstreamDown` when it cannot be asked."""
        return self.revisions.get((repo_id, revision), lambda: self._revision(repo_id, revision, miss),
                                  lambda info: (repo_id, info.commit), again=again,
                                  keep=lambda info: not (info.private or info.gated))  # (memo.py: why)

    def _revision(self, repo_id: str, revision: str, miss: bool = False) -> UpstreamRevision:
        what = f"{repo_id}@{revision}"
        if miss:
            self.charge(what)
        answer = self.session.get(self.session.api(repo_id, "revision", revision), what)
        if refused(answer.status_code):
            code = answer.headers.get("X-Error-Code", "")
            if code == "RevisionNotFound":
                raise RevisionNotFound(f"{repo_id}: no revision {revision} here nor at the upstream {self.url}")
            check_tokenless(answer.status_code, code, self.session.token, self.url, f"{repo_id}@{revision}")
            raise not_found(repo_id, self.url)
        if answer.status_code != 200:
            raise UpstreamDown(f"{what}: the upstream {self.url} answered {answer.status_code}")
        info = self.session.json(answer, what)
        try:
            commit = info["sha"]
            files = tuple(str(s["rfilename"]) for s in info.get("siblings") or ())
            card = info.get("cardData") if isinstance(info.get("cardData"), dict) else None
            said = info.get("gated")
            gated = (said if isinstance(said, str) else "auto" if said is True else "").lower()
            private = info.get("private") is True
        except (KeyError, TypeError, AttributeError):
            raise UpstreamDown(f"{what}: the upstream {self.url} answered no model_info") from None
        if not isinstance(commit, str) or not _SHA.fullmatch(commit):
            raise UpstreamDown(f"{what}: the upstream {self.url} named no commit ({commit!r})")
        return UpstreamRevision(repo_id, commit, files, card, gated if gated in ("auto", "manual") else "", private,
                                info)

    def said(self, url: str, what: str, *, waits: bool = False) -> Any:
        """The upstream's JSON answer at ``url`` (one :meth:`.UpstreamSession.api` built); None
        for a 4xx (it does not say); :class:`UpstreamDown` when it cannot be asked or answers no JSON
        (``waits``: :meth:`.UpstreamSession.get`'s)."""
        answer = self.session.get(url, what, waits=waits)
        if refused(answer.status_code):
            return None
        if answer.status_code != 200:
            raise UpstreamDown(f"{what}: the upstream {self.url} answered {answer.status_code}")
        return self.session.json(answer, what)

    def is_branch(self, repo_id: str, name: str) -> bool:
        """Whether ``name`` is a branch at the upstream (``GET /api/models/REPO/refs``, as
        list_repo_refs asks); False when it is not, or the upstream cannot say (it is kept a tag)."""
        try:
            listed = self.said(self.session.api(repo_id, "refs"), f"{repo_id}'s refs")
        except UpstreamDown:
            return False
        branches = listed.get("branches") if isinstance(listed, dict) else None
        return isinstance(branches, list) and any(isinstance(b, dict) and b.get("name") == name for b in branches)
