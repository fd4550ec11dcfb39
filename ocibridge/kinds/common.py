"""Helpers the family modules share: JSON of manifests, layer paths, file metadata."""

from __future__ import annotations

import contextlib
import json
import posixpath
from typing import Any

from ocibridge.core import boundedjson
from ocibridge.errors import SourceError, TooLarge
from ocibridge.oci.mediatypes import ANNOTATION_TITLE, Family, Variant
from ocibridge.oci.models import Descriptor, Manifest
from ocibridge.stores.base import MAX_MANIFEST_BYTES, Store

EPOCH_ZERO = "1970-01-01T00:00:00Z"
#: typeflag of a regular file and of a directory in the file metadata annotation (tar's '0', '5')
REGULAR, DIRECTORY = 48, 53
FILEPATH_KEYS = tuple(f.filepath_key for f in Family)
METADATA_KEYS = tuple(f.metadata_key for f in Family)


def compact_json(doc: Any) -> bytes:
    """Canonical JSON: compact, keys in insertion order, UTF-8."""
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()


def manifest_bytes(manifest: Manifest) -> bytes:
    return manifest.to_json_bytes()


def layer_file_path(desc: Descriptor) -> str | None:
    """The path a layer carries: a filepath annotation of either ModelPack name, else the title."""
    annotations = desc.annotations or {}
    for key in FILEPATH_KEYS:
        if annotations.get(key):
            return annotations[key]
    return annotations.get(ANNOTATION_TITLE) or None


def layer_metadata(desc: Descriptor) -> tuple[str | None, int]:
    """(the file metadata annotation as written, the file mode it gives or 0644)."""
    annotations = desc.annotations or {}
    for key in METADATA_KEYS:
        raw = annotations.get(key)
        if raw:
            mode = 0o644
            with contextlib.suppress(ValueError, TypeError, AttributeError):
                mode = 0o755 if int(boundedjson.loads(raw).get("mode", 0o644)) & 0o111 else 0o644
            return raw, mode
    return None, 0o644


def file_metadata(path: str, mode: int, size: int, variant: Variant) -> str:
    """A file metadata annotation as ocibridge's builder writes it."""
    tar_dir = variant.is_tar
    meta = {
        "name": posixpath.basename(path.rstrip("/")) or path,
        "mode": 0o755 if tar_dir else mode,
        "uid": 0,
        "gid": 0,
        "size": 0 if tar_dir else size,
        "mtime": EPOCH_ZERO,
        "typeflag": DIRECTORY if tar_dir else REGULAR,
    }
    return json.dumps(meta, separators=(",", ":"))


def fetch_json(store: Store, desc: Descriptor, what: str) -> tuple[bytes, Any]:
    """A small JSON blob (a config), read and parsed; a clear error when it is not JSON."""
    if desc.size > MAX_MANIFEST_BYTES:
        raise TooLarge(f"{what} {desc.digest} is too large ({desc.size} bytes)")
    data = store.fetch_bytes(desc)
    try:
        return data, boundedjson.loads(data)
    except ValueError as e:
        raise SourceError(f"{what} {desc.digest} is not valid JSON: {e}") from None


def text_field(doc: Any, *path: str) -> str | None:
    """``doc[path...]`` when it is a non-empty string."""
    for key in path:
        if not isinstance(doc, dict):
            return None
        doc = doc.get(key)
    return doc if isinstance(doc, str) and doc else None


def section(doc: Any, key: str) -> dict[str, Any]:
    """``doc[key]`` when it is an object, else an empty one (configs written by others vary)."""
    value = doc.get(key) if isinstance(doc, dict) else None
    return value if isinstance(value, dict) else {}


def items(doc: Any, key: str) -> list[Any]:
    """``doc[key]`` when it is a list, else an empty one."""
    value = doc.get(key) if isinstance(doc, dict) else None
    return value if isinstance(value, list) else []


def short(value: Any) -> str:
    """A value as one short line, for loss reports."""
    text = value if isinstance(value, str) else compact_json(value).decode()
    return text if len(text) <= 80 else text[:77] + "..."
