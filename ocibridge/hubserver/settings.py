"""What the routes answer by, in one frozen value built once (:func:`ocibridge.api.serve.create_app`,
through :class:`.server.ServerSettings`) and handed to every route set as it is: a flag of
``ocibridge serve`` reaches the route that reads it without being copied on the way. Apart from the
routes, so that the settings load no web framework."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ocibridge.hubserver import XET_MIN_SIZE
from ocibridge.hubserver.replicas.leasetimes import LeaseTimes
from ocibridge.hubserver.replicas.trusted import LOOPBACK

if TYPE_CHECKING:
    from ocibridge.hubserver.repo.quarantined import TrustedKeys

#: files from this size are offered in parts: S3's largest single PUT (5 GiB), past which the
#: Hub's own storage takes parts, so every client already sends them so (serve's --lfs-multipart-min)
MULTIPART_MIN = 5 * 1024 ** 3
#: the size of each part but the last (serve's --lfs-part-size)
PART_SIZE = 512 * 1024 ** 2
#: the most parts one upload is offered in (S3's limit): a larger file gets larger parts
MAX_PARTS = 10_000
#: entries per page of a tree listing (the Hub's: 1000) and of a model listing
PAGE = 1000
#: what one compare page's diff may read from registries (serve's --compare-budget; web/compare.py)
COMPARE_BUDGET = 64 * 1024 ** 2


@dataclass(frozen=True)
class ServeSettings:
    """``ocibridge serve``'s flags, as the routes read them."""

    tokens: tuple[str, ...] = ()  # --token-file lines: TOKEN [read|write] [REPO-PREFIX] [NAME] (access.py)
    token_file: str | None = None  # the file they were read from, watched for changes (tokenfile.py)
    audit_log: str | None = None  # --audit-log: a JSON line per write ("-": stdout; audit.py)
    metrics: bool = True  # GET /metrics (metrics.py; --no-metrics: False)
    page: int = PAGE  # entries per page of a listing
    xet_min: int | None = XET_MIN_SIZE  # files from this size are offered over Xet (None: none)
    public_url: str | None = None  # the URL clients reach serve at, for the URLs it hands out
    lfs_multipart_min: int | None = MULTIPART_MIN  # LFS uploads from this size come in parts (None: never)
    lfs_part_size: int = PART_SIZE  # ... of this size
    writer: str | None = None  # --writer: the serve every write is sent to (replicas/forward.py); None: this one
    trust_forwarded: tuple[str, ...] = LOOPBACK  # peers whose X-Forwarded-* are believed (trusted.py)
    peers: tuple[str, ...] = ()  # --peer: serves a standby sends writes to while one holds the lease (peers.py)
    compare_budget: int = COMPARE_BUDGET  # bytes one compare page's diff may read
    lease: LeaseTimes = LeaseTimes()  # the writer lease's expiry, renewal, settle (replicas/writerlease.py)
    quotas: str | None = None  # --quotas: bytes and repositories per namespace, watched (quotas/quotafile.py)
    upstream_max_size: int | None = None  # --upstream-max-size: one ingest never larger (quotas/ingests.py)
    upstream_quota_namespace: str | None = None  # --upstream-quota-namespace: whose quota ingests count against
    # --scan quarantine: a flagged commit lands, read by its owners only until a report these keys
    # signed releases it (quarantined.py); None: off
    quarantine: TrustedKeys | None = None

    def part_size_for(self, size: int) -> int | None:
        """The part size to offer an LFS upload of ``size`` bytes, or None: one PUT."""
        if self.lfs_multipart_min is None or size < self.lfs_multipart_min or size == 0:
            return None
        return max(self.lfs_part_size, -(-size // MAX_PARTS))

    def base(self, request_base: str) -> str:
        """Where clients reach serve: ``--public-url``, else the request's own base URL."""
        return self.public_url or request_base.rstrip("/")
