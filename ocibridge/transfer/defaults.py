"""The transfers' defaults that the options name, apart from the copy that uses them, so that
``api/options.py`` (and through it ``load_tensors``) loads no copy, sqlite or progress code."""

from __future__ import annotations

#: blobs in flight of one copy (``TransferOptions.concurrency``)
DEFAULT_CONCURRENCY = 4
