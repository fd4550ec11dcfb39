"""Ollama destinations take Ollama models only, and say so before anything is written.

``ocibridge copy``/``push`` into ``ollama:NAME`` or ``ollama://host/NAME`` moves a manifest graph
as it is. An Ollama model goes through; a ModelPack artifact (or anything else) would leave a
model Ollama cannot run, so it is refused at its first blob, with the command that converts
it (``ocibridge pull REF NAME``). The export itself only ever writes Ollama-typed blobs.
"""

from __future__ import annotations

from typing import Any, BinaryIO

from ...errors import OcibridgeError, SourceError
from ...oci.mediatypes import DOCKER_CONFIG, OLLAMA_LAYER_PREFIX
from ...oci.models import Descriptor
from .manifest import parse_ollama_manifest


class NotAnOllamaModel(OcibridgeError):
    """Something other than an Ollama model was sent to an Ollama destination."""


def _hint(label: str) -> str:
    return f"to convert a ModelPack artifact run: ocibridge pull REF {label}"


def is_ollama_blob(media_type: str) -> bool:
    """Ollama layers (any ``application/vnd.ollama.image.*``) and the Docker config blob."""
    base = media_type.split(";", 1)[0].strip()
    return base.startswith(OLLAMA_LAYER_PREFIX) or base == DOCKER_CONFIG


def check_blob(label: str, desc: Descriptor) -> None:
    if not is_ollama_blob(desc.mediaType):
        raise NotAnOllamaModel(
            f"{label} takes Ollama models only, not {desc.mediaType} blobs; {_hint(label)}"
        )


def check_manifest(label: str, digest: str, data: bytes) -> None:
    try:
        parse_ollama_manifest(data, where=f"manifest {digest}")
    except SourceError as e:
        raise NotAnOllamaModel(f"{label} takes Ollama models only: {e}; {_hint(label)}") from None


class OllamaRegistryStore:
    """A registry repository used as an Ollama destination: every write is checked first;
    everything else is the wrapped store's (so mounts, HEAD skips and retries still apply)."""

    def __init__(self, inner: Any, label: str):
        self._inner = inner
        self.label = label

    def __getattr__(self, name: str) -> Any:
        if name == "ingest_blob":  # a blob of unknown digest has no Ollama type to check
            raise AttributeError(name)
        return getattr(self._inner, name)

    def push_blob(self, desc: Descriptor, reader: BinaryIO, **kwargs: Any) -> None:
        check_blob(self.label, desc)
        self._inner.push_blob(desc, reader, **kwargs)

    def mount_from(self, desc: Descriptor, src: object) -> bool:
        check_blob(self.label, desc)
        return self._inner.mount_from(desc, src)

    def push_manifest(self, desc: Descriptor, data: bytes, tag: str | None = None) -> None:
        check_manifest(self.label, desc.digest, data)
        self._inner.push_manifest(desc, data, tag)

    def tag(self, desc: Descriptor, tag: str) -> None:
        check_manifest(self.label, desc.digest, self._inner.fetch_bytes(desc))
        self._inner.tag(desc, tag)
