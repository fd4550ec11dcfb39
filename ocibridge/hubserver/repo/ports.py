"""What the Hub repository asks of serve's other rooms, named here and implemented there: who
commits (a write grant of ``access.py``, handed over by the write routes), where uploads are
staged (``uploads/staging.py``), which other repository holds a blob (``uploads/mounts.py``) and
the writer lease (``replicas/lease.py``). ``repo/`` imports none of them: a commit is the same
whichever protocol, token file or lease backs it (tests/serve/test_hubserver_rooms.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ocibridge.chunks.chunktable import LayerChunks
    from ocibridge.hubserver.repo.sources import Repository
    from ocibridge.oci.models import Descriptor


class Author(Protocol):
    """Who commits: the name a commit records, whose share of staging its bytes count in, and
    which other repository's files it could download (its read grant there: a mount gives it
    nothing more, :mod:`.mountable`)."""

    @property
    def name(self) -> str: ...

    @property
    def staged_as(self) -> str: ...

    def may_take(self, repo_id: str) -> bool: ...


class UploadStaging(Protocol):
    """Where uploaded bytes wait for the commit that names them, pinned for the repository they
    were uploaded for (a SHA-256 alone gives nobody another repository's upload)."""

    def pin(self, sha256: str, owner: str, writer: str = "") -> bool: ...

    def pinned(self, sha256: str, owner: str) -> bool: ...

    def path_for(self, sha256: str) -> Path | None: ...

    def held_size(self, sha256: str) -> int | None: ...

    def drop_held(self, sha256: str) -> None: ...

    def table_for(self, sha256: str) -> LayerChunks | None: ...

    def release(self, shas: Iterable[str], owner: str, writer: str = "") -> None: ...

    def reserve(self, size: int, owner: str = "",
                writer: str = "") -> contextlib.AbstractContextManager[Callable[[], None]]: ...

    def new_file(self) -> contextlib.AbstractContextManager[tuple[Path, int]]: ...

    def commit_file(self, path: Path, sha256: str, *, hashed: str | None = None,
                    chunks: tuple[str, ...] | None = None, tabled: bool = False) -> Path: ...


class BlobHomes(Protocol):
    """The repositories of the first source: a repo id's own, and another one seen holding a blob."""

    def own(self, repo_id: str) -> Repository | None: ...

    def home(self, repo_id: str, sha256: str, admits: Callable[[str], bool]) -> Repository | None: ...

    def blob(self, repo_id: str, sha256: str, size: int | None, admits: Callable[[str], bool],
             listed_size: Callable[[], int | None] | None = None) -> tuple[Repository, Descriptor] | None: ...


class WriterLease(Protocol):
    """The writer lease: a commit is written while it is held (``ensure``) and acknowledged only
    while it still names this serve (``confirm``)."""

    def ensure(self) -> None: ...

    def confirm(self) -> None: ...


class QuotaCheck(Protocol):
    """What a write route asks before it takes bytes; each raises the Hub's 403 when refused."""

    def room(self, key: str) -> None:
        """Refused when ``key``'s namespace is at its byte limit already."""

    def adding_blobs(self, key: str, blobs: Mapping[str, int]) -> None:
        """Refused when the blobs (digest -> size) it does not hold yet would take it past its limit."""

    def new_repo(self, key: str, first: Mapping[str, int]) -> None:
        """Refused when the repository ``key`` is new and its namespace has all the repositories it
        may, or its first commit's blobs (``first``) would take it past its bytes."""

    def landed(self, key: str, digest: str) -> None:
        """A commit of ``key`` landed as the manifest ``digest``: its blobs count from now."""

    def recount(self) -> None:
        """A repository was deleted, squashed or moved: every one counted again when next asked."""


class Unlimited:
    """No ``--quotas``: every write may take what it sends."""

    def room(self, key: str) -> None:
        pass

    def adding_blobs(self, key: str, blobs: Mapping[str, int]) -> None:
        pass

    def new_repo(self, key: str, first: Mapping[str, int]) -> None:
        pass

    def landed(self, key: str, digest: str) -> None:
        pass

    def recount(self) -> None:
        pass


UNLIMITED: QuotaCheck = Unlimited()
