"""The neutral model package every format reader produces and every exporter consumes."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from ocibridge.core.fsutil import safe_relpath
from ocibridge.oci.mediatypes import Kind, Variant


def normalise_mode(mode: int, is_link: bool = False) -> int:
    """Modes are normalised so builds do not depend on umask: 0755 if executable, else 0644."""
    if is_link:
        return 0o777
    return 0o755 if mode & 0o111 else 0o644


@dataclass
class ModelFile:
    """One file of a model: where it goes, what it is, and how to read it (possibly twice)."""

    path: str
    kind: Kind
    size: int
    opener: Callable[[], BinaryIO] | None = None
    mode: int = 0o644
    digest: str | None = None  # known sha256 of the content, if the source already has it
    link_target: str | None = None  # a symlink inside the model (packed in a tar layer)
    layer: str | None = None  # files sharing a layer name go into one tar layer
    variant: Variant | None = None  # override of the layer variant for this file
    source_path: Path | None = None  # the file on disk, when there is one (digest cache key)
    #: ``open()`` raises at the stream's end unless the content has ``digest`` (a carton entry
    #: against its MANIFEST): a store may write it under that digest without hashing it again
    checked: bool = False

    def __post_init__(self) -> None:
        self.path = safe_relpath(self.path, "model file path")
        self.mode = normalise_mode(self.mode, self.link_target is not None)

    def open(self) -> BinaryIO:
        if self.opener is None:
            raise ValueError(f"{self.path}: no content")
        return self.opener()

    @classmethod
    def from_path(cls, rel: str, source: Path, kind: Kind, **kw: Any) -> ModelFile:
        from ocibridge.model import digestcache

        st = source.stat()
        kw.setdefault("digest", digestcache.lookup(source))
        return cls(
            path=rel,
            kind=kind,
            size=st.st_size,
            opener=lambda: open(source, "rb"),
            mode=st.st_mode,
            source_path=source,
            **kw,
        )

    @classmethod
    def from_bytes(cls, rel: str, data: bytes, kind: Kind, **kw: Any) -> ModelFile:
        import io

        return cls(path=rel, kind=kind, size=len(data), opener=lambda: io.BytesIO(data), **kw)


@dataclass
class ModelPackage:
    """Files plus metadata. ``descriptor`` and ``config`` use the ModelPack field names."""

    files: list[ModelFile]
    descriptor: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)  # manifest annotations
    source_format: str = "directory"

    @property
    def name(self) -> str | None:
        return self.descriptor.get("name")


def env_epoch() -> int | None:
    value = os.environ.get("SOURCE_DATE_EPOCH")
    return int(value) if value and value.isdigit() else None
