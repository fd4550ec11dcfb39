"""A pull's layer checked by the chunk table its manifest binds, as it lands: what the pull
cache (layer 3) knows of it.

A model pushed with a table (push's default from 64 MiB) names it in the manifest, whose
digest binds both the layer digest and every chunk digest. Checking each chunk as the
download's in-order hash reaches it proves the layer as well as its SHA-256 would, with each
byte hashed once, by the table's hash (BLAKE3: about three times SHA-256's speed where the CPU
has no SHA instructions), and no whole-blob SHA-256 after it.

What is proven is the table's word, and a table from an untrusted manifest can claim any
layer digest: the file is kept under the table's content key, a directory of its own in the
pull cache (``tabled/<key>/``), never under the layer digest that other manifests' pulls trust
(``blobs/sha256/``). An interrupted download resumes there on the next run of the same table.
The checking itself is the chunk modules' (``chunks/tabledfetch.py``, a layer above): the pull
cache is handed a :class:`TabledLayer` by whoever read the table (``cache/deltas.py``).
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Protocol, runtime_checkable

from ocibridge.oci.models import Descriptor
from ocibridge.stores.ranged import ByteCount, RangedStore

#: the pull cache's directory of table-checked layers, one directory per content key
TABLED = "tabled"
#: the layer file's name inside its key's directory
LAYER_FILE = "layer"


class TabledLayer(Protocol):
    """One layer the bound table covers: fetched into the pull cache, checked chunk by chunk."""

    def fetch(self, cache_root: Path, source: RangedStore, on_bytes: ByteCount | None = None) -> Path:
        """The layer's file under its table's content key in the pull cache at ``cache_root``,
        each chunk checked as it lands (DigestMismatch naming the first wrong one)."""
        ...


@runtime_checkable
class LayerTables(Protocol):
    """Knows the chunk table a pull's manifest binds (read from ``source`` when first asked)."""

    def checked_by_table(self, desc: Descriptor, source: RangedStore) -> TabledLayer | None:
        """``desc`` as the bound table covers it with a hash other than SHA-256 (a SHA-256
        table saves nothing on the blob's own digest); None: it is checked by its SHA-256."""
        ...


def sweep(cache_root: Path) -> None:
    """Before a pull's first tabled fetch: the partial files killed runs left, once old enough
    (as the layout sweeps its own, ``core.stale``), and the key directories they leave empty."""
    from ocibridge.core.stale import GRACE_SECONDS, remove_stale
    from ocibridge.stores.partial import PARTIAL_PREFIX

    try:
        keys = [entry for entry in (cache_root / TABLED).iterdir() if entry.is_dir() and not entry.is_symlink()]
    except FileNotFoundError:
        return
    now = time.time()
    for key in keys:
        remove_stale(key, PARTIAL_PREFIX)
        with contextlib.suppress(OSError):
            if now - key.stat().st_mtime > GRACE_SECONDS:  # not one another pull just made
                key.rmdir()  # only when empty


def forget(path: Path) -> None:
    """Drop a tabled layer from the pull cache (the pull that used it succeeded). Its key's
    directory stays (another pull of the same table may be downloading into it), for
    :func:`sweep` to remove once empty and old."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
