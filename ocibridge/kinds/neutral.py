"""The neutral form every OCI model family is read into and written from.

A family's manifest becomes a :class:`ModelView`: its layers (the blobs, untouched, with what
each holds), the ModelPack-named metadata, and what only that family says. Writers turn a view
into another family's manifest and config while pointing at the same blobs, so raw layers
keep their digests across families.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ocibridge.core.asdict import FieldsAsDict
from ocibridge.oci.mediatypes import Kind, Variant
from ocibridge.oci.models import Descriptor


@dataclass
class Part:
    """One layer: the blob as it is, and what it carries.

    ``role`` names finer kinds that some families distinguish (``gguf``, ``safetensors``,
    ``mmproj``, ``license``, ``chat-template``, ``model`` for Kit's main model, ...); families
    that have no such notion ignore it.
    """

    blob: Descriptor
    kind: Kind
    variant: Variant
    path: str
    diff_id: str
    role: str | None = None
    mode: int = 0o644
    file_metadata: str | None = None  # the org.*.model.file.metadata+json value, if any
    extra: dict[str, Any] = field(default_factory=dict)  # family fields of this layer (Kitfile entry...)

    def bare_blob(self, media_type: str, annotations: dict[str, str] | None) -> Descriptor:
        """The same blob described under another media type and annotations."""
        return Descriptor(
            mediaType=media_type,
            digest=self.blob.digest,
            size=self.blob.size,
            annotations=annotations or None,
        )


@dataclass
class ModelView:
    """A model artifact of any family, as one neutral structure.

    ``descriptor`` and ``config`` use the ModelPack field names; ``extra`` holds what only the
    source family says (a Kitfile's parameters, Docker's context size), for writers that can
    express it.
    """

    family: str  # the family it was read from
    parts: list[Part]
    descriptor: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)  # manifest annotations kept as they are
    manifest: bytes = b""  # the source manifest and config, byte for byte
    config_bytes: bytes = b""
    manifest_media_type: str = ""
    edited: bool = False  # metadata changed by flags: the source's bytes no longer describe it

    @property
    def name(self) -> str | None:
        value = self.descriptor.get("name")
        return value if isinstance(value, str) else None


@dataclass(frozen=True)
class Loss(FieldsAsDict):
    """A field the target family cannot carry; ``kept`` when an annotation keeps it for the way back."""

    field: str
    value: str
    kept: bool


@dataclass
class Written:
    """A family writer's output: the new manifest and config, and what it could not express."""

    manifest: bytes
    media_type: str
    config: bytes
    config_media_type: str
    artifact_type: str | None = None
    losses: list[Loss] = field(default_factory=list)
