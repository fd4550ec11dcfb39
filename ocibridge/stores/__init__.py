"""Stores: places that hold content-addressed blobs and manifests and resolve references."""

from .base import Store
from .layout import LayoutStore

__all__ = ["Store", "LayoutStore"]
