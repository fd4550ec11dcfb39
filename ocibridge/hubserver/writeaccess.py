"""Who writes (the HTTP half of every write route, over :mod:`.access`): the write grant a
request's token holds for a repository, the name its uploads are staged under, and the grant
handed to the Hub repository as the :class:`.repo.ports.Author` of a commit. Every write route
asks it (``writeroutes/``, ``lfs/``, the xet write token), and nothing else: what they then do to a
repository is ``repo/``'s.

Every write needs a write token of ``--token-file`` (:class:`.access.Gate`): none sent or unknown
is the Hub's 401, a read token or another repository's is 403. A repo id that is not one
(``acme/../secret/vault``, a quoted ``/``, ``..``) is refused by its name first, the Hub's 400,
on every write route (:meth:`Writers.writer`), before anything is granted for it.
"""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request

from ocibridge.hubserver.access import Access, Gate, Grant
from ocibridge.hubserver.repo.commits import BadCommit
from ocibridge.hubserver.repo.sources import repo_parts
from ocibridge.hubserver.settings import ServeSettings
from ocibridge.oci.bookkeeping import LEASE_REPO


class InvalidRepoName(BadCommit):
    """A write names a repo id no repository can have (the Hub's 400)."""


@dataclass(frozen=True)
class GrantAuthor:
    """A write grant as the author of a commit (:class:`.repo.ports.Author`)."""

    grant: Grant
    gate: Gate

    @property
    def name(self) -> str:
        return self.grant.name

    @property
    def staged_as(self) -> str:
        """Its Xet client name, which its Xet grant carries too: whose share of the staging
        budget its uploads count in."""
        return self.gate.xet.client_of(self.grant.token)

    def may_take(self, repo_id: str) -> bool:
        """Whether its token could download ``repo_id``'s files (:meth:`.Gate.may_take`)."""
        return self.gate.may_take(self.grant, repo_id)


class Writers:
    """The write grants of requests (``gate``) and the URL serve answers under (``settings``)."""

    def __init__(self, gate: Gate, settings: ServeSettings):
        self.gate = gate
        self.settings = settings

    def base(self, request: Request) -> str:
        return self.settings.base(str(request.base_url))

    def writer(self, request: Request, repo_id: str | None) -> Grant:
        """The write grant of the request's token for ``repo_id`` (None: any); raises
        :class:`.access.Denied`, or :class:`InvalidRepoName` (400) for a name no repository has."""
        if repo_id is not None and repo_parts(repo_id) is None:
            raise InvalidRepoName(f"Invalid repo name: {repo_id!r} is not a repo id (NAME or ORG/NAME: letters, "
                                  "digits and single '.', '_', '-' between them)")
        if repo_id is not None and repo_parts(repo_id) == [LEASE_REPO]:
            raise InvalidRepoName(f"Invalid repo name: {repo_id!r} is serve's own repository (it keeps the writer "
                                  "lease: docs/serve.md, 'One writer, many readers'): choose another name")
        grant = self.gate.require(request, repo_id, Access.WRITE)
        assert grant is not None  # a write always names its writer
        return grant

    def author(self, grant: Grant) -> GrantAuthor:
        """``grant`` as the author of a commit."""
        return GrantAuthor(grant, self.gate)

    def writer_of(self, grant: Grant) -> str:
        """The name a write token's uploads are staged under (whose share of the staging budget they take)."""
        return self.author(grant).staged_as
