"""The upstream a catalog may hold (serve ``--upstream``: :class:`Upstream`, asked for what its
sources lack), and a revision whose files are still arriving from it (a commit whose fetch is
under way): what the read routes ask of it, so that they answer it by the rules they answer a
landed revision by (the same route functions, the same file answer), never by a path a client
wrote. A catalog without an upstream hands out landed revisions only."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ocibridge.hubserver.repo.repostates import RepoStates
    from ocibridge.hubserver.repo.resolved import Resolved
    from ocibridge.hubserver.repo.sources import Source


class ArrivingFile(Protocol):
    """One file of an arriving revision: what names it (an LFS file's SHA-256, or a file in git's
    blob id) and its bytes as they arrive."""

    @property
    def size(self) -> int: ...

    @property
    def lfs_sha256(self) -> str | None: ...

    @property
    def git_blob(self) -> str | None: ...

    def ready(self) -> None:
        """Waits a moment at most for the first bytes (blocking); raises where the fetch failed
        before any, so the answer is an error, not a body cut after its headers."""
        ...

    def read(self, start: int, end: int) -> Iterator[bytes]:
        """Bytes ``[start, end)`` as they arrive (blocking); a failed fetch cuts the iteration."""
        ...


@dataclass(frozen=True)
class SaidAbove:
    """The source's answer to a metadata read it was asked for the revision (model_info, a tree
    page), already shaped as serve answers the landed revision; ``cursor``: the next page's."""

    status: int
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)
    cursor: str | None = None


class Arriving(Protocol):
    """A revision being fetched: its repo id, its commit, its files once listed."""

    @property
    def repo_id(self) -> str: ...

    @property
    def commit(self) -> str: ...

    def files(self) -> Mapping[str, ArrivingFile] | None:
        """Its files by path, once listed (blocking a while); None: not listed, wait for it to land."""
        ...

    def landed(self) -> None:
        """Waits until the revision landed; raises what its fetch ended with."""
        ...

    def model_info(self, blobs: bool) -> SaidAbove:
        """model_info of the commit, as the source says it (blocking)."""
        ...

    def tree(self, path: str, recursive: bool, expand: bool, cursor: str | None) -> SaidAbove:
        """A page of the commit's tree under ``path`` (a directory of :meth:`files`), as the source says it."""
        ...


class Here(Protocol):
    """What an upstream asks of the catalog that holds it: its sources (the first is the one it
    fills), their resolution, the refs records as kept, and what to forget once a commit landed."""

    sources: list[Source]
    default_tag: str
    states: RepoStates

    def resolve_here(self, repo_id: str, revision: str, *, reuse_for: float = 0) -> Resolved:
        """The revision in the sources alone; what :meth:`.catalog.Catalog.resolve` raises."""
        ...

    def forget(self, repo_id: str, *, record: bool = True) -> None: ...


class ReaderRule(Protocol):
    """Why the request's reader may not have ``repo_id`` were it private or gated here (None: it
    may): serve's grants (:meth:`ocibridge.hubserver.access.Gate.upstream_refuses`)."""

    def __call__(self, repo_id: str, *, private: bool, gated: str) -> Exception | None: ...


class Upstream(Protocol):
    """A source behind the catalog's sources, asked for a read they cannot answer (and asked
    again, every while, for a branch it gave): :class:`ocibridge.hubserver.upstream.proxy.UpstreamSource`."""

    def resolve(self, repo_id: str, revision: str, reuse_for: float, *, arriving: bool) -> Resolved | Arriving:
        """The revision resolved (fetched first when the sources lack it), or (``arriving``) a
        commit whose fetch is under way as it arrives; else what the catalog's resolution raises."""
        ...

    def taken_back(self, repo_id: str) -> Exception | None:
        """What a repository the upstream took back since it was fetched is answered as (None: not taken back)."""
        ...

    def describe(self) -> str:
        """serve's start line for it: where a miss goes, what is let in."""
        ...

    def close(self) -> None: ...


#: an upstream built for the catalog that holds it (its constructor's last positional argument)
UpstreamFor = Callable[[Here], Upstream]
