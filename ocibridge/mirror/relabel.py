"""Re-labelling ModelPack artifacts between the ``vnd.cnai`` and ``vnd.cncf`` families.

Only manifests change: media types (artifactType, config, layers) and annotation keys
(``org.<family>.model.*``) move to the other family. Config and layer blobs are the same
bytes, so a mirror that converts still HEAD-skips and mounts every blob; only manifest
(and index) digests change. :class:`RelabelStore` does this on the fly as a read-only store,
so the one graph copy moves converted artifacts without knowing about it. A chunk table the
original binds keeps every entry (same blobs, raw stays raw) and is bound by the re-labelled
manifest's annotations as it was; its referrer is made anew for the new digest (chunks/carry.py).
"""

from __future__ import annotations

import io
import threading
from typing import Any, BinaryIO

from ocibridge.chunks.carry import ChunkReferrer, bound_source_table, rebind, reduce_table
from ocibridge.core.environment import MAX_GRAPH_DEPTH as ENV_MAX_DEPTH
from ocibridge.core.graphbound import max_depth
from ocibridge.errors import NotFound, TooLarge
from ocibridge.oci.mediatypes import Family
from ocibridge.oci.models import Descriptor, Index, Manifest, parse_manifest_bytes
from ocibridge.stores.base import Store, is_manifest


def _swap(value: str | None, prefixes: dict[str, str]) -> str | None:
    if value is None:
        return None
    for old, new in prefixes.items():
        if value.startswith(old):
            return new + value[len(old):]
    return value


def _prefixes(to: Family) -> tuple[dict[str, str], dict[str, str]]:
    """(media type prefixes, annotation key prefixes) of the other family → ``to``."""
    media, keys = {}, {}
    for family in Family:
        if family is not to:
            media[family.media_prefix] = to.media_prefix
            keys[family.key_prefix] = to.key_prefix
    return media, keys


def relabel_descriptor(desc: Descriptor, to: Family) -> Descriptor:
    """A blob descriptor in the ``to`` family (same digest and size)."""
    media, keys = _prefixes(to)
    update: dict[str, Any] = {"mediaType": _swap(desc.mediaType, media)}
    if desc.artifactType is not None:
        update["artifactType"] = _swap(desc.artifactType, media)
    if desc.annotations is not None:
        update["annotations"] = {_swap(k, keys): v for k, v in desc.annotations.items()}
    return desc.model_copy(update=update)


def relabel_manifest(manifest: Manifest, to: Family) -> Manifest:
    """The manifest in the ``to`` family; ``subject`` is left as it is (it names another artifact)."""
    media, keys = _prefixes(to)
    return manifest.model_copy(
        update={
            "artifactType": _swap(manifest.artifactType, media),
            "config": relabel_descriptor(manifest.config, to),
            "layers": [relabel_descriptor(d, to) for d in manifest.layers],
            "annotations": (
                {_swap(k, keys): v for k, v in manifest.annotations.items()}
                if manifest.annotations is not None
                else None
            ),
        }
    )


class RelabelStore:
    """A read-only view of ``inner`` in which ModelPack manifests appear in family ``to``.

    Manifests that are not ModelPack (or already in ``to``) pass through unchanged, byte for
    byte. Referrers of a converted manifest are not offered: they name the original digest,
    and a signature over it would not verify against the converted one. The one exception is
    made here: the referrer of a chunk table the original binds, checked against that binding
    (a table served with other bytes fails the conversion) and made for the new digest.
    """

    def __init__(self, inner: Store, to: Family):
        self.inner = inner
        self.to = to
        self._lock = threading.Lock()
        self._converted: dict[str, tuple[Descriptor, bytes]] = {}  # new digest → (desc, bytes)
        self._unchanged: set[str] = set()  # manifests checked and served as they are
        self._chunks: dict[str, ChunkReferrer] = {}  # new manifest digest → its chunk table's referrer
        self._held: dict[str, bytes] = {}  # blobs of those referrers (the tables, the empty config)

    def describe(self) -> str:
        return f"{self.inner.describe()} (as vnd.{self.to.value})"

    def blob_source(self) -> Store:
        """Re-labelling changes manifests only: every blob is the inner store's (BlobView)."""
        return self.inner

    # -- conversion ---------------------------------------------------------------------------
    def convert(self, desc: Descriptor, depth: int = 0) -> Descriptor:
        """The descriptor of ``desc`` as this view serves it (converting on first sight; each
        digest once, by the memo below, and no deeper than core/graphbound.py allows)."""
        if not is_manifest(desc):
            return desc
        if depth > max_depth():
            raise TooLarge(f"{desc.digest}: indexes nested deeper than {max_depth()} "
                                f"(${ENV_MAX_DEPTH} raises the limit)")
        with self._lock:
            if desc.digest in self._converted:
                return self._converted[desc.digest][0]
            if desc.digest in self._unchanged:
                return desc
        data = self.inner.fetch_bytes(desc)
        node = parse_manifest_bytes(data, desc.mediaType)
        table = None
        if isinstance(node, Index):
            children = []
            for child in node.manifests:
                new_child = self.convert(child, depth + 1)
                children.append(child if new_child.digest == child.digest else child.model_copy(
                    update={"digest": new_child.digest, "size": new_child.size,
                            "artifactType": new_child.artifactType}))
            changed = children != node.manifests
            new_node: Manifest | Index = node.model_copy(update={"manifests": children})
        else:
            new_node = relabel_manifest(node, self.to)
            changed = new_node.model_dump(by_alias=True) != node.model_dump(by_alias=True)
            table = bound_source_table(self.inner, node).table if changed else None
            if table is not None:
                table = reduce_table(table, new_node.layers)
                new_node = rebind(new_node, table)
        if not changed:
            with self._lock:
                self._unchanged.add(desc.digest)
            return desc
        body = new_node.to_json_bytes()
        new = Descriptor.for_bytes(desc.mediaType, body)
        if desc.artifactType is not None:
            media, _ = _prefixes(self.to)
            new.artifactType = _swap(desc.artifactType, media)
        if desc.platform is not None:
            new.platform = desc.platform
        with self._lock:
            self._converted[new.digest] = (new, body)
            if isinstance(new_node, Manifest) and table is not None and table.layers:
                chunks = ChunkReferrer(new, table)
                self._chunks[new.digest] = chunks
                self._converted[chunks.descriptor.digest] = (chunks.descriptor, chunks.body)
                self._held.update(chunks.blobs)
        return new

    def carries_chunks(self, converted: str) -> bool:
        """Whether the manifest served as ``converted`` comes with a chunk table's referrer made
        for it (the original's chunk referrer is then replaced, not left behind)."""
        with self._lock:
            return converted in self._chunks

    def _lookup(self, digest: str) -> tuple[Descriptor, bytes] | None:
        with self._lock:
            return self._converted.get(digest)

    # -- the Store protocol (reads) -------------------------------------------------------------
    def resolve(self, reference: str) -> Descriptor:
        found = self._lookup(reference)
        if found is not None:
            return found[0]
        return self.convert(self.inner.resolve(reference))

    def _held_blob(self, digest: str) -> bytes | None:
        with self._lock:
            return self._held.get(digest)

    def exists(self, desc: Descriptor) -> bool:
        if self._lookup(desc.digest) is not None or self._held_blob(desc.digest) is not None:
            return True
        return self.inner.exists(desc)

    def fetch_bytes(self, desc: Descriptor) -> bytes:
        found = self._lookup(desc.digest)
        if found is not None:
            return found[1]
        held = self._held_blob(desc.digest)
        if held is not None:
            return held
        if is_manifest(desc):
            converted = self.convert(desc)
            if converted.digest != desc.digest:
                raise NotFound(f"{self.describe()}: {desc.digest} is served as {converted.digest}")
        return self.inner.fetch_bytes(desc)

    def open_blob(self, desc: Descriptor) -> BinaryIO:
        found = self._lookup(desc.digest)
        if found is not None:
            return io.BytesIO(found[1])
        held = self._held_blob(desc.digest)
        if held is not None:
            return io.BytesIO(held)
        return self.inner.open_blob(desc)

    def tags(self) -> list[str]:
        return self.inner.tags()

    def referrers(self, desc: Descriptor, artifact_type: str | None = None) -> list[Descriptor]:
        if self._lookup(desc.digest) is not None:
            with self._lock:
                chunks = self._chunks.get(desc.digest)
            return [chunks.descriptor] if chunks is not None and chunks.matches(artifact_type) else []
        return self.inner.referrers(desc, artifact_type)
