"""Stores: places that hold content-addressed blobs and manifests and resolve references."""

from .base import ReadableStore, Store, WritableStore
from .layout import LayoutStore

__all__ = ["LayoutStore", "ReadableStore", "Store", "WritableStore"]
