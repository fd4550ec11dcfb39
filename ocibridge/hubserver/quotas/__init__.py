"""serve's quotas (``--quotas FILE``, docs/quotas.md): bytes and repositories per namespace,
enforced on every write route before its bytes are taken (:mod:`.enforce`), counted from what
the registry holds (:mod:`.usage`), and what the proxy's clients may have it fetch
(:mod:`.ingests`). Without the file nothing is counted: :data:`UNLIMITED` answers every check."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol


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
