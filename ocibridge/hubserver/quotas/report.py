"""``ocibridge serve-usage``: what each namespace of serve's registry holds, read as serve reads it
(:mod:`.usage`), beside its ``--quotas`` limits; no serve needs to run."""

from __future__ import annotations

from ocibridge.hubserver.quotas.enforce import usage_rows
from ocibridge.hubserver.quotas.quotafile import Limit, QuotaRules, read_quotas
from ocibridge.hubserver.quotas.usage import Usage, Used
from ocibridge.hubserver.repo.sources import parse_sources
from ocibridge.stores.registry.options import RegistryOptions


def namespace_usage(source: str, quotas: str | None, options: RegistryOptions | None,
                    ingests: str | None = None) -> list[tuple[str, Used, Limit | None]]:
    """Each namespace ``source`` holds a repository of (and each the quotas file names): what it
    holds and its limit. ``ingests``: the namespace proxied repositories count against."""
    rules = read_quotas(quotas) if quotas is not None else QuotaRules()
    named = (ingests or rules.upstream.namespace or "").lower() or None
    located = parse_sources([source], options)[0]
    try:
        return usage_rows(Usage(located, lambda: named), rules)
    finally:
        located.close()
