"""The chunk table a model manifest binds, read from an OCI layout (the model cache's blobs) or
fetched into it, for delta downloads into the model cache and a pull.

Only a table the manifest's own annotations name (``io.ocibridge.chunks.digest``) is used: the
manifest digest binds it, and it is fetched once into the cache's blobs (verified). A table is
an optimisation here, never a condition: a manifest without one, or one the registry does not
serve intact, means plain downloads, each blob still checked by its own digest.
"""

from __future__ import annotations

import logging

from ocibridge.chunks.chain import bound_table_descriptor
from ocibridge.chunks.chunktable import MAX_TABLE_BYTES, ChunkTable, ChunkTableError, parse_table
from ocibridge.core.fsutil import atomic_write_bytes
from ocibridge.errors import OcibridgeError
from ocibridge.oci.digest import verify_bytes
from ocibridge.oci.models import Descriptor, Manifest, parse_manifest_bytes
from ocibridge.stores.base import ReadableStore, Store
from ocibridge.stores.layout import LayoutStore
from ocibridge.stores.ranged import RangedStore

_LOG = logging.getLogger("ocibridge")


def bound_table(blobs: LayoutStore, remote: Store | None, manifest: Descriptor) -> ChunkTable | None:
    """The table ``manifest`` (in the cache already) binds, read from the cache or fetched into
    it from ``remote``; None when there is none or it cannot be had."""
    try:
        parsed = parse_manifest_bytes(blobs.fetch_bytes(manifest))
        if not isinstance(parsed, Manifest):
            return None
        desc = bound_table_descriptor(parsed)
        if desc is None:
            return None
        if blobs.exists(desc):
            return parse_table(_verified(blobs, desc))  # checked again: the cache may be shared
        if remote is None:
            return None
        data = _verified(remote, desc)
        table = parse_table(data)
        path = blobs.blob_path(desc.digest)
        atomic_write_bytes(path, data, 0o444)
        return table
    except (OcibridgeError, OSError) as e:  # a table is never needed: plain downloads, each verified
        _LOG.debug("chunk table of %s not used: %s", manifest.digest, e)
        return None


def _verified(store: ReadableStore | RangedStore, desc: Descriptor) -> bytes:
    if desc.size > MAX_TABLE_BYTES:
        raise ChunkTableError(f"chunk table of {desc.size} bytes: over the {MAX_TABLE_BYTES} byte limit")
    with store.open_blob(desc) as reader:
        data = reader.read(desc.size + 1)
    return verify_bytes(data, desc.digest, desc.size, what="chunk table")


def remote_bound_table(store: Store, manifest: Descriptor) -> ChunkTable | None:
    """The table the manifest ``store`` holds binds (for a pull: nothing kept in the cache)."""
    try:
        parsed = parse_manifest_bytes(store.fetch_bytes(manifest))
    except (OcibridgeError, OSError) as e:
        _LOG.debug("chunk table of %s not used: %s", manifest.digest, e)
        return None
    return table_bound_by(store, manifest, parsed) if isinstance(parsed, Manifest) else None


def table_bound_by(store: Store, desc: Descriptor, manifest: Manifest) -> ChunkTable | None:
    """The table ``manifest`` (in hand, at ``desc``) binds, read from ``store``; None without one."""
    try:
        table = bound_table_descriptor(manifest)
    except OcibridgeError as e:
        _LOG.debug("chunk table of %s not used: %s", desc.digest, e)
        return None
    return None if table is None else table_at(store, desc, table)


def table_at(store: ReadableStore | RangedStore, desc: Descriptor, table: Descriptor) -> ChunkTable | None:
    """The table ``table`` (bound by the manifest at ``desc``), read from ``store`` and checked;
    None when it cannot be had (plain downloads then)."""
    try:
        data = _verified(store, table)
        return parse_table(data)
    except (OcibridgeError, OSError) as e:
        _LOG.debug("chunk table of %s not used: %s", desc.digest, e)
        return None
