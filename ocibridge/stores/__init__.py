"""Stores: places that hold content-addressed blobs and manifests and resolve references.

Every name is imported on first use (PEP 562): a copy between registries imports this package
for the protocols, and the layout's module brings tempfile and shutil (~15 ms); a warm
``ocibridge path`` reads the registry settings (stores/registry/hostsettings.py) and needs neither the
protocols nor the OCI models they bring.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ocibridge.stores.base import ReadableStore, Store, WritableStore
    from ocibridge.stores.layout import LayoutStore

__all__ = ["LayoutStore", "ReadableStore", "Store", "WritableStore"]


def __getattr__(name: str) -> Any:
    if name == "LayoutStore":
        from ocibridge.stores.layout import LayoutStore

        return LayoutStore
    if name in ("ReadableStore", "Store", "WritableStore"):
        from ocibridge.stores import base

        return getattr(base, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
