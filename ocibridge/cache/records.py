"""What a reference last resolved to, and where its snapshot is: the model cache's small files,
read with the standard library alone.

``ocibridge path`` of a model the cache already holds answers from these (see :mod:`.fastpath`)
before anything heavier is imported: the record of the reference names the manifest, and the
snapshot directory of that manifest exists only once it is complete (it is built aside and
renamed into place whole), so its presence is the completeness check.
"""

from __future__ import annotations

import contextlib
import json
import os
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from ocibridge.core import boundedjson
from ocibridge.core.environment import OFFLINE, cache_root, switched_on
from ocibridge.core.smallfile import MAX_TINY_FILE, read_small

TEMP_PREFIX = ".tmp-"


def model_cache_root() -> Path:
    """``models/`` in the cache root (``$OCIBRIDGE_CACHE``)."""
    return cache_root() / "models"


def offline_from_env() -> bool:
    return switched_on(OFFLINE, default=False)


def filter_id(include: Sequence[str], exclude: Sequence[str]) -> str:
    """A short name for a file selection, part of a partial snapshot's directory name."""
    if not include and not exclude:
        return ""
    import hashlib  # a partial snapshot only

    spec = json.dumps({"include": list(include), "exclude": list(exclude)}, sort_keys=True)
    return hashlib.sha256(spec.encode()).hexdigest()[:12]


def snapshot_name(digest: str, include: Sequence[str] = (), exclude: Sequence[str] = ()) -> str:
    """``<manifest hex>[-<filter id>]``: the directory of a snapshot under ``snapshots/``."""
    name = digest.split(":", 1)[-1]
    return name + ("-" + filter_id(include, exclude) if include or exclude else "")


def ref_file(root: Path, reference: str) -> Path:
    return root / "refs" / (urllib.parse.quote(reference, safe="") + ".json")


class Origin(NamedTuple):
    """Where a registry reference was resolved: the repository asked directly (no mirror), the
    tag or digest, and the digest its manifest request answered (an index's, when the model is
    an entry of one). Enough to ask again whether the tag still names it. (Named tuples: a warm
    ``path`` imports no dataclasses.)"""

    host: str
    repository: str
    reference: str
    top: str


class RefRecord(NamedTuple):
    """The record of one reference: the model manifest it resolved to."""

    media_type: str
    digest: str
    size: int
    origin: Origin | None = None


def read_record(root: Path, reference: str) -> RefRecord | None:
    """The record of ``reference``, None if there is none; ValueError if it is damaged."""
    try:
        data = boundedjson.loads(read_small(ref_file(root, reference), MAX_TINY_FILE, "cache record"))
    except FileNotFoundError:
        return None
    try:
        origin = data.get("origin")
        return RefRecord(
            media_type=str(data["mediaType"]), digest=str(data["digest"]), size=int(data["size"]),
            origin=Origin(**{k: str(origin[k]) for k in ("host", "repository", "reference", "top")})
            if isinstance(origin, dict) else None)
    except (KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"missing or malformed {e}") from None


def record_bytes(reference: str, media_type: str, digest: str, size: int, origin: Origin | None) -> bytes:
    data: dict[str, object] = {"reference": reference, "mediaType": media_type, "digest": digest, "size": size}
    if origin is not None:
        data["origin"] = {"host": origin.host, "repository": origin.repository,
                          "reference": origin.reference, "top": origin.top}
    return json.dumps(data).encode()


def resolved_at(root: Path, reference: str) -> float | None:
    """When ``reference`` was last resolved by asking its registry (a time stamp), None if
    never: its record is written at every full resolution and touched when a warm ``path``
    finds the tag unmoved, so the record's modification time is that moment."""
    try:
        return ref_file(root, reference).stat().st_mtime
    except OSError:
        return None


def mark_resolved(root: Path, reference: str) -> None:
    """The registry confirmed ``reference`` names what its record says, now."""
    with contextlib.suppress(OSError):
        os.utime(ref_file(root, reference))


def complete_snapshot(root: Path, name: str) -> Path | None:
    """The snapshot directory ``name`` if it is there (so complete), marked used now."""
    path = root / "snapshots" / name
    if not path.is_dir():
        return None
    touch(path)
    return path


def touch(path: Path) -> None:
    """Mark a snapshot used now (``prune --older-than`` goes by it)."""
    with contextlib.suppress(OSError):
        os.utime(path)
