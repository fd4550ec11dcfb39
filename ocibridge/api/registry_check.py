"""``check-registry``: what a registry supports, tried against it (stores/registry/probe.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ocibridge.api.options import TransferOptions

if TYPE_CHECKING:
    from ocibridge.stores.registry.probe import RegistryReport


def check_registry(target: str, *, transfer: TransferOptions | None = None) -> RegistryReport:
    """Probe ``HOST`` or ``HOST/REPO`` (with a repository: small uploads, a mount, an
    artifact manifest and a referrers query; see probe.py for what stays behind)."""
    from ocibridge.places.locate import registry_text
    from ocibridge.stores.registry.client import RegistryClient
    from ocibridge.stores.registry.credentials import credential_function
    from ocibridge.stores.registry.probe import check_registry as run

    options = (transfer or TransferOptions()).registry_options()
    target = registry_text(target, "check-registry takes HOST or HOST/REPO")
    return run(target, lambda host: RegistryClient(host, options, credentials=credential_function(options)))
