"""Ollama destinations take Ollama models only, and say so before anything is written.

``ocibridge copy``/``push`` into ``ollama:NAME`` or ``ollama://host/NAME`` moves a manifest graph
as it is. An Ollama model goes through; a ModelPack artifact (or anything else) would leave a
model Ollama cannot run, so it is refused at its first blob, with the command that converts
it (``ocibridge pull REF NAME``). The export itself only ever writes Ollama-typed blobs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, BinaryIO

from ocibridge.core.closing import ClosesOnExit
from ocibridge.errors import OcibridgeError, SourceError, UnsafePath
from ocibridge.kinds.ollama.manifest import parse_ollama_manifest
from ocibridge.kinds.ollama.names import layer_names
from ocibridge.oci.mediatypes import DOCKER_CONFIG, OLLAMA_LAYER_PREFIX
from ocibridge.oci.models import Descriptor
from ocibridge.stores.base import Reopen
from ocibridge.stores.forwarding import ForwardingReads

if TYPE_CHECKING:
    from ocibridge.stores.registry.store import RegistryStore


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
    """Refuse what the Ollama reader would refuse, before anything is written: not an Ollama
    manifest at all, or one whose layer names are missing, unsafe (``../x``) or repeated."""
    try:
        manifest = parse_ollama_manifest(data, where=f"manifest {digest}")
    except SourceError as e:
        raise NotAnOllamaModel(f"{label} takes Ollama models only: {e}; {_hint(label)}") from None
    try:
        layer_names(manifest)
    except (SourceError, UnsafePath) as e:
        raise type(e)(f"{label}: refusing manifest {digest}: {e}") from None


class OllamaRegistryStore(ForwardingReads["RegistryStore"], ClosesOnExit):
    """A registry repository used as an Ollama destination: every write is checked first;
    everything else is the wrapped store's (so mounts, HEAD skips and retries still apply).

    It is no :class:`~ocibridge.stores.base.Ingesting` store: a blob of unknown digest has no
    Ollama type to check."""

    def __init__(self, inner: RegistryStore, label: str):
        super().__init__(inner)  # reads: the repository's own
        self.label = label

    def close(self) -> None:
        self._inner.close()

    # -- writes: checked first ----------------------------------------------------------------
    def push_blob(self, desc: Descriptor, reader: BinaryIO, *, reopen: Reopen | None = None) -> None:
        check_blob(self.label, desc)
        self._inner.push_blob(desc, reader, reopen=reopen)

    def can_mount_from(self, src: object) -> bool:
        return self._inner.can_mount_from(src)

    def mount_from(self, desc: Descriptor, src: object) -> bool:
        check_blob(self.label, desc)
        return self._inner.mount_from(desc, src)

    def push_manifest(self, desc: Descriptor, data: bytes, tag: str | None = None) -> None:
        check_manifest(self.label, desc.digest, data)
        self._inner.push_manifest(desc, data, tag)

    def tag(self, desc: Descriptor, tag: str) -> None:
        check_manifest(self.label, desc.digest, self._inner.fetch_bytes(desc))
        self._inner.tag(desc, tag)
