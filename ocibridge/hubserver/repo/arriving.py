"""A revision whose files are still arriving (serve ``--upstream``: a commit whose fetch is under
way): what the read routes ask of it, so that they answer it by the rules they answer a landed
revision by (the same route functions, the same file answer), never by a path a client wrote.

A catalog that can hand one out is an :class:`ArrivingCatalog`; every other catalog's reads wait
for nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ocibridge.hubserver.repo.catalog import Catalog, Resolved
    from ocibridge.hubserver.repo.sources import ServingSide

#: a catalog made for the serve that answers from it: one that fetches (serve --upstream) is built
#: knowing that serve's reader rule, writer role and audit log (:class:`.sources.ServingSide`)
CatalogFor = Callable[["ServingSide"], "Catalog"]


class ArrivingFile(Protocol):
    """One file of an arriving revision: what names it (an LFS file's SHA-256, or a file in git's
    blob id) and its bytes as they arrive."""

    @property
    def size(self) -> int: ...

    @property
    def lfs_sha256(self) -> str | None: ...

    @property
    def git_blob(self) -> str | None: ...

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


@runtime_checkable
class ArrivingCatalog(Protocol):
    """A catalog whose revisions may be read while they arrive."""

    def resolve_arriving(self, repo_id: str, revision: str | None) -> Resolved | Arriving:
        """The revision resolved, or arriving (its fetch under way); else what ``resolve`` raises."""
        ...


