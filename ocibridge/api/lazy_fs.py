"""``ocibridge.filesystem()``: the fsspec filesystem, or an error naming the extra that brings
fsspec. Apart from :mod:`.fsspec_fs` (which needs fsspec to be imported at all)."""

from __future__ import annotations

from typing import Any

from ocibridge.errors import OcibridgeError


def filesystem(**storage_options: Any) -> Any:
    """The ``ocibridge://`` fsspec filesystem (``fsspec.filesystem("ocibridge")`` finds it too);
    an error naming the extra when fsspec is not installed."""
    try:
        from ocibridge.api.fsspec_fs import OcibridgeFileSystem
    except ImportError as e:
        if (e.name or "").split(".")[0] != "fsspec":
            raise
        raise OcibridgeError("the ocibridge:// filesystem needs fsspec: pip install 'ocibridge[fsspec]'") from None
    return OcibridgeFileSystem(**storage_options)
