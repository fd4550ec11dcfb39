"""A ModelPack artifact → an Ollama model (local store or Ollama-compatible registry).

An artifact read from Ollama carries the Ollama manifest and config verbatim
(``ollama-manifest.json``, ``ollama-config.json``): the export writes those exact bytes back,
with every blob taken from the artifact's raw layers under the same digest. A generic GGUF
artifact gets a new Ollama manifest and config: its GGUF file becomes the model layer, and files
named like the reader's (template, system, params.json, messages.json, license…) their layers.
Blobs go first (verified), the manifest last; a failed export into a local store removes the
blobs it added.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from typing import Any, BinaryIO

from ocibridge.core.fsutil import safe_relpath
from ocibridge.errors import OcibridgeError, SourceError, TooLarge
from ocibridge.kinds.ollama.manifest import (
    OllamaConfig,
    OllamaRootFS,
    go_json,
    manifest_blobs,
    parse_ollama_manifest,
    render_manifest,
)
from ocibridge.kinds.ollama.mapping import MANIFEST_FILE
from ocibridge.model.gguf_header import read_gguf_header
from ocibridge.oci.digest import sha256_bytes
from ocibridge.oci.mediatypes import (
    ANNOTATION_TITLE,
    DOCKER_CONFIG,
    DOCKER_MANIFEST,
    OLLAMA_LAYER_PREFIX,
    Family,
    family_of_artifact,
    parse_layer_media_type,
)
from ocibridge.oci.models import Descriptor, Index, Manifest, parse_manifest_bytes
from ocibridge.oci.reference import DEFAULT_TAG
from ocibridge.places.targets import StoreTarget
from ocibridge.stores.base import MAX_MANIFEST_BYTES, OneManifest, Store
from ocibridge.transfer.copy import CopyHooks, CopyStats, copy
from ocibridge.transfer.progress import ProgressFn

_PROJECTOR = re.compile(r"(^|/)(projector[^/]*|[^/]*mmproj[^/]*)\.gguf$", re.IGNORECASE)
_ADAPTER = re.compile(r"(^|/)adapter[^/]*\.gguf$", re.IGNORECASE)
_LICENSE = re.compile(r"(^|/)(license|licence|copying)[^/]*$", re.IGNORECASE)
#: Exact file names (from the reader) → Ollama layer kind, in Ollama's layer order.
_BY_NAME = (("template", "template"), ("system", "system"), ("params.json", "params"),
            ("messages.json", "messages"))


@dataclass
class _Plan:
    """The Ollama manifest to write, and where each of its blobs comes from."""

    manifest: bytes
    sources: list[Descriptor]  # blobs to copy from the source store, typed as Ollama layers
    extra: dict[str, bytes]  # blobs made here (a generated config), by digest


def _raw_files(manifest: Manifest) -> tuple[dict[str, Descriptor], list[str]]:
    """path → layer for raw (one-file) layers; paths of tar layers, for error messages."""
    raw: dict[str, Descriptor] = {}
    packed: list[str] = []
    for layer in manifest.layers:
        annotations = layer.annotations or {}
        path = next(
            (annotations[f.filepath_key] for f in Family if f.filepath_key in annotations),
            annotations.get(ANNOTATION_TITLE),
        )
        lt = parse_layer_media_type(layer.mediaType)
        if path is None or lt is None:
            continue
        path = safe_relpath(path, "layer file path")  # an artifact naming ../x is refused
        if lt.variant.is_tar:
            packed.append(path)
        else:
            raw.setdefault(path, layer)
    return raw, packed


def _restore_plan(src: Store, files: dict[str, Descriptor]) -> _Plan:
    """The artifact came from Ollama: the manifest is restored byte for byte."""
    desc = files[MANIFEST_FILE]
    if desc.size > MAX_MANIFEST_BYTES:
        raise TooLarge(f"{MANIFEST_FILE} is too large ({desc.size} bytes)")
    data = src.fetch_bytes(desc)
    manifest = parse_ollama_manifest(data, where=MANIFEST_FILE)
    by_digest = {d.digest: d for d in files.values()}
    sources: list[Descriptor] = []
    for blob in manifest_blobs(manifest):
        layer = by_digest.get(blob.digest)
        if layer is None or layer.size != blob.size:
            raise SourceError(
                f"the artifact lacks the blob {blob.digest} ({blob.mediaType}) that its "
                f"{MANIFEST_FILE} lists; remove {MANIFEST_FILE} to export it as a new Ollama model"
            )
        sources.append(_ollama_typed(blob.mediaType, layer.digest, layer.size))
    return _Plan(data, sources, {})


def _ollama_typed(media_type: str, digest: str, size: int) -> Descriptor:
    """A blob under the Ollama media type it has in the written model (the destination
    takes Ollama-typed blobs only)."""
    return Descriptor(mediaType=media_type.split(";")[0].strip(), digest=digest, size=size)


def _pick(files: dict[str, Descriptor], packed: list[str]) -> dict[str, list[tuple[str, Descriptor]]]:
    """Ollama layer kind → the artifact files that become such layers."""
    roles: dict[str, list[tuple[str, Descriptor]]] = {}
    models: list[tuple[str, Descriptor]] = []
    for path in sorted(files):
        desc = files[path]
        if path.lower().endswith(".gguf"):
            if _PROJECTOR.search(path):
                roles.setdefault("projector", []).append((path, desc))
            elif _ADAPTER.search(path):
                roles.setdefault("adapter", []).append((path, desc))
            else:
                models.append((path, desc))
        elif _LICENSE.search(path) and "/" not in path:
            roles.setdefault("license", []).append((path, desc))
    for name, kind in _BY_NAME:
        if name in files:
            roles[kind] = [(name, files[name])]
    if not models:
        tarred = [p for p in packed if p.lower().endswith(".gguf")]
        if tarred:
            raise SourceError(
                f"the GGUF file {tarred[0]} is packed in a tar layer; Ollama needs it as a raw "
                "layer (push it without grouping weights)"
            )
        raise SourceError("the artifact has no GGUF weight file; Ollama runs GGUF models")
    if len(models) > 1:
        preferred = [m for m in models if m[0] == "model.gguf"]
        if not preferred:
            names = ", ".join(p for p, _ in models)
            raise SourceError(f"the artifact has several GGUF files ({names}); Ollama needs one")
        models = preferred
    roles["model"] = models
    return roles


def _generic_plan(src: Store, files: dict[str, Descriptor], packed: list[str]) -> _Plan:
    """A new Ollama manifest and config for a GGUF artifact that did not come from Ollama."""
    roles = _pick(files, packed)
    model_path, model = roles["model"][0]
    with src.open_blob(model) as reader:
        header = read_gguf_header(reader, where=model_path)
    order = ("model", "projector", "adapter", "template", "system", "params", "messages", "license")
    layers: list[dict[str, Any]] = []
    sources: list[Descriptor] = []
    for kind in order:
        for _, desc in roles.get(kind, []):
            layers.append(
                {"mediaType": OLLAMA_LAYER_PREFIX + kind, "digest": desc.digest, "size": desc.size}
            )
            sources.append(_ollama_typed(OLLAMA_LAYER_PREFIX + kind, desc.digest, desc.size))
    arch = header.architecture or ""
    config = OllamaConfig(
        model_format="gguf",
        model_family=arch,
        model_families=[arch] if arch else None,
        model_type=header.param_size or "",
        file_type=header.quantization or "",
        architecture="amd64",
        os="linux",
        rootfs=OllamaRootFS(type="layers", diff_ids=[layer["digest"] for layer in layers]),
    )
    config_bytes = go_json(config.model_dump(exclude_none=True)) + b"\n"
    config_digest = sha256_bytes(config_bytes)
    config_desc = {"mediaType": DOCKER_CONFIG, "digest": config_digest, "size": len(config_bytes)}
    return _Plan(render_manifest(config_desc, layers), sources, {config_digest: config_bytes})


def _plan(src: Store, desc: Descriptor) -> _Plan:
    data = src.fetch_bytes(desc)
    node = parse_manifest_bytes(data, desc.mediaType)
    if isinstance(node, Index):
        raise SourceError(f"{desc.digest} is an index; export one of its manifests")
    if node.layers and all(la.mediaType.startswith(OLLAMA_LAYER_PREFIX) for la in node.layers):
        manifest = parse_ollama_manifest(data, where=f"manifest {desc.digest}")  # already Ollama
        blobs = [_ollama_typed(b.mediaType, b.digest, b.size) for b in manifest_blobs(manifest)]
        return _Plan(data, blobs, {})
    if family_of_artifact(node.artifactType, node.config.mediaType) is None:
        raise SourceError(f"{desc.digest} is neither a ModelPack artifact nor an Ollama model")
    files, packed = _raw_files(node)
    if MANIFEST_FILE in files:
        return _restore_plan(src, files)
    return _generic_plan(src, files, packed)


def export_ollama(
    src_store: Store,
    desc: Descriptor,
    target: StoreTarget,
    *,
    concurrency: int = 4,
    progress: ProgressFn | None = None,
) -> CopyStats:
    """Write the artifact ``desc`` as an Ollama model at ``target``; returns what the copy did
    (``root``: the Ollama manifest's descriptor). Digests are kept, so the blobs an Ollama store
    or registry has are skipped. The Ollama model is a read-only view of ``src_store``
    (:class:`OllamaView`), and the one copy writes it, blobs first, the manifest last, taking
    back what it added if it fails."""
    view = OllamaView(src_store, _plan(src_store, desc))
    mounts = {d.digest: src_store for d in view.plan.sources}  # same registry: mounted, not sent
    try:
        return copy(view, view.descriptor.digest, target.store, target.tag or DEFAULT_TAG,
                    concurrency=concurrency, progress=progress,
                    hooks=CopyHooks(mounts=mounts, undo_on_failure=True, successors=view.successors))
    except OcibridgeError:
        raise
    except Exception as e:
        raise OcibridgeError(f"export to {target.text} failed: {e}") from e


class OllamaView(OneManifest):
    """An artifact seen as the Ollama model it exports to: the Ollama manifest and the blobs
    made for it (a generated config) are this view's, every other blob is the source's."""

    def __init__(self, src: Store, plan: _Plan):
        self.src = src
        self.plan = plan
        self.descriptor = Descriptor.for_bytes(DOCKER_MANIFEST, plan.manifest)

    def describe(self) -> str:
        return f"{self.src.describe()} (as an Ollama model)"

    def successors(self, desc: Descriptor, data: bytes) -> list[Descriptor]:
        """The blobs of the Ollama manifest (which need not name a config, as OCI's must)."""
        made = [Descriptor(mediaType=DOCKER_CONFIG, digest=d, size=len(b)) for d, b in self.plan.extra.items()]
        return list({d.digest: d for d in [*made, *self.plan.sources]}.values())

    def exists(self, desc: Descriptor) -> bool:
        return desc.digest == self.descriptor.digest or desc.digest in self.plan.extra \
            or self.src.exists(desc)

    def fetch_bytes(self, desc: Descriptor) -> bytes:
        if desc.digest == self.descriptor.digest:
            return self.plan.manifest
        if desc.digest in self.plan.extra:
            return self.plan.extra[desc.digest]
        return self.src.fetch_bytes(desc)

    def open_blob(self, desc: Descriptor) -> BinaryIO:
        if desc.digest == self.descriptor.digest or desc.digest in self.plan.extra:
            return io.BytesIO(self.fetch_bytes(desc))
        return self.src.open_blob(desc)

    def held_manifest(self) -> Descriptor:
        return self.descriptor
