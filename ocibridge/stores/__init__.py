"""Stores: places that hold content-addressed blobs and manifests and resolve references.

``LayoutStore`` is imported on first use (PEP 562): a copy between registries imports this
package for the protocols, and the layout's module brings tempfile and shutil (~15 ms).
"""

from typing import TYPE_CHECKING, Any

from ocibridge.stores.base import ReadableStore, Store, WritableStore

if TYPE_CHECKING:
    from ocibridge.stores.layout import LayoutStore

__all__ = ["LayoutStore", "ReadableStore", "Store", "WritableStore"]


def __getattr__(name: str) -> Any:
    if name == "LayoutStore":
        from ocibridge.stores.layout import LayoutStore

        return LayoutStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
