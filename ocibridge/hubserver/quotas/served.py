"""serve's quotas as the app holds them: made from its settings over the registry it writes to,
and shown on ``/metrics``:

    ocibridge_serve_namespace_bytes{namespace}         bytes a namespace's repositories hold
    ocibridge_serve_namespace_bytes_limit{namespace}   its quota (only where it has one)
    ocibridge_serve_namespace_repos{namespace}         its repositories
    ocibridge_serve_namespace_repos_limit{namespace}   their quota

Only with ``--quotas``: a namespace is a label there, which the page otherwise never names."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ocibridge.hubserver.quotas.enforce import Quotas
from ocibridge.hubserver.quotas.ingests import IngestLimits
from ocibridge.hubserver.quotas.quotafile import QuotaFile
from ocibridge.hubserver.quotas.usage import Usage
from ocibridge.hubserver.repo.sources import Source
from ocibridge.hubserver.settings import ServeSettings


def quotas_for(settings: ServeSettings, source: Source | None) -> Quotas | None:
    """The quotas of ``--quotas`` over ``source`` (the first SOURCE); None without the flag."""
    if settings.quotas is None or source is None:
        return None
    return Quotas(QuotaFile(settings.quotas), Usage(source))


def ingest_limits(quotas: Quotas | None, settings: ServeSettings) -> IngestLimits:
    """What the proxy's clients may have it fetch (``--upstream``), and what it fetched counted
    against the namespace the operator names (the flag, else the file's)."""
    limits = IngestLimits(quotas, settings.upstream_max_size, settings.upstream_quota_namespace)
    if quotas is not None:
        quotas.usage.ingests = lambda: limits.rules().namespace
    return limits


class QuotaMetrics(Collector):
    """What each namespace takes and may take, read at each scrape."""

    def __init__(self, quotas: Quotas):
        self.quotas = quotas

    def collect(self) -> Iterator[Metric]:
        used = GaugeMetricFamily("ocibridge_serve_namespace_bytes", "Bytes the namespace's repositories hold "
                                 "(unique blobs of their tags)", labels=["namespace"])
        most = GaugeMetricFamily("ocibridge_serve_namespace_bytes_limit", "The namespace's byte quota",
                                 labels=["namespace"])
        repos = GaugeMetricFamily("ocibridge_serve_namespace_repos", "The namespace's repositories",
                                  labels=["namespace"])
        repos_most = GaugeMetricFamily("ocibridge_serve_namespace_repos_limit", "The namespace's repository quota",
                                       labels=["namespace"])
        for name, taken, limit in self.quotas.report():
            used.add_metric([name], taken.bytes)
            repos.add_metric([name], taken.repos)
            if limit is not None and limit.bytes is not None:
                most.add_metric([name], limit.bytes)
            if limit is not None and limit.repos is not None:
                repos_most.add_metric([name], limit.repos)
        yield from (used, most, repos, repos_most)
