"""What the upstream asks of the serve it answers for (:class:`ServingSide`), and the catalog built
for that serve (:data:`CatalogFor`): the serve hands itself over when it builds its catalog, so the
upstream the catalog holds is constructed with the serve's reader rule, writer role, audit log and
fetch limits, nothing of them wired in after."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ocibridge.hubserver.quotas.ingests import IngestLimits
    from ocibridge.hubserver.repo.catalog import Catalog


class ServingSide(Protocol):
    """What :class:`.proxy.UpstreamSource` is constructed with, of the serve it answers for."""

    def upstream_refuses(self, repo_id: str, *, private: bool, gated: str) -> Exception | None:
        """Why the request's reader may not have ``repo_id`` were it private or gated here (None: it may)."""
        ...

    def fetches_here(self) -> bool:
        """Whether this serve asks the upstream itself (the writer), or the writer does."""
        ...

    def audit_line(self, entry: dict[str, Any]) -> None:
        """One line of the audit log (an ingest's, a refusal at the door)."""
        ...

    def ingest_limits(self) -> IngestLimits:
        """What the proxy's clients may have it fetch (serve's --quotas, --upstream-max-size), asked at each fetch."""
        ...


#: a catalog made for the serve that answers from it: one whose upstream fetches (serve --upstream)
#: is built knowing that serve's side (:class:`ServingSide`)
CatalogFor = Callable[[ServingSide], "Catalog"]
