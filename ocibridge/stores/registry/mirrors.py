"""Pull-through mirrors from the settings file, as containers' registries.conf has them.

For a read, each mirror listed for the registry is asked for the same repository and reference
first; the first that has it serves the read, else the registry itself. Digests are verified as
always, so a mirror can only serve the same bytes for a digest (for a tag, it is trusted as the
registry would be). Credentials given for the registry (``-u/-p``) never go to a mirror: a mirror
gets its own from the credential files.
"""

from __future__ import annotations

from ocibridge.errors import OcibridgeError
from ocibridge.oci.reference import RegistryReference
from ocibridge.stores.registry.hostsettings import host_settings
from ocibridge.stores.registry.options import RegistryOptions
from ocibridge.stores.registry.store import RegistryStore, open_repository


def open_for_reading(ref: RegistryReference, options: RegistryOptions | None = None) -> RegistryStore:
    """A store for ``ref`` on the first mirror that holds it, else on its own registry."""
    options = options or RegistryOptions()
    mirror_options = options.for_mirror()
    for mirror in host_settings(ref.registry).mirrors:
        host, repository = mirror_location(mirror, ref.repository)
        store = open_repository(RegistryReference(host, repository, ref.tag, ref.digest), mirror_options)
        try:
            store.resolve(ref.reference)
        except OcibridgeError:
            store.client.close()
            continue
        return store
    return open_repository(ref, options)


def mirror_location(mirror: str, repository: str) -> tuple[str, str]:
    """(host, repository) on a mirror written ``host[:port][/namespace]``: as in registries.conf,
    ``mirror.internal:5000/hub`` serves ``HOST/library/x`` as ``mirror.internal:5000/hub/library/x``."""
    host, _, namespace = mirror.partition("/")
    namespace = namespace.strip("/")
    return host, f"{namespace}/{repository}" if namespace else repository
