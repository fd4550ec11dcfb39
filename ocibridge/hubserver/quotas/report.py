"""``ocibridge serve-usage``: what each namespace of serve's registry holds, read as serve reads it
(:mod:`.usage`), beside its ``--quotas`` limits; no serve needs to run."""

from __future__ import annotations

from ocibridge.errors import OcibridgeError
from ocibridge.hubserver.quotas.enforce import usage_rows
from ocibridge.hubserver.quotas.quotafile import Limit, QuotaRules, read_quotas
from ocibridge.hubserver.quotas.usage import Usage, Used
from ocibridge.hubserver.repo.sources import RegistrySource, parse_sources
from ocibridge.stores.registry.options import RegistryOptions


def namespace_usage(source: str, quotas: str | None, options: RegistryOptions | None,
                    ingests: str | None = None) -> list[tuple[str, Used, Limit | None]]:
    """Each namespace ``source`` holds a repository of (and each the quotas file names): what it
    holds and its limit. ``ingests``: the namespace proxied repositories count against."""
    rules = read_quotas(quotas) if quotas is not None else QuotaRules()
    named = (ingests or rules.upstream.namespace or "").lower() or None
    located = parse_sources([source], options)[0]
    try:
        located.ready()  # a registry that does not answer is an error, not a table of nothing
        rows = usage_rows(Usage(located, lambda: named), rules)
        if isinstance(located, RegistrySource) and located.catalog_refused:
            raise OcibridgeError(f"{located.shown}: the registry does not list its repositories "
                                 f"({located.catalog_refused}), so what each namespace holds cannot be counted")
        return rows
    finally:
        located.close()
