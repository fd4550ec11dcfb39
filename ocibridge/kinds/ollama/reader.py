"""An Ollama model (local store or Ollama-compatible registry) → a neutral model package.

Every layer becomes one file whose digest is the Ollama blob digest, so the ModelPack artifact
reuses the blobs as raw layers (HEAD-skipped or mounted, never re-uploaded). The Ollama
manifest and config are kept verbatim as two small weight.config files, which is what lets
an export restore the exact manifest.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, BinaryIO

from ocibridge.core import boundedjson
from ocibridge.errors import NotFound, OcibridgeError, SourceError, TooLarge
from ocibridge.kinds.ollama.manifest import (
    LayerType,
    OllamaLayer,
    OllamaManifest,
    parse_layer_type,
    parse_ollama_config,
    parse_ollama_manifest,
)
from ocibridge.kinds.ollama.mapping import (
    ANNOTATION_MANIFEST_DIGEST,
    ANNOTATION_NAME,
    CONFIG_FILE,
    MANIFEST_FILE,
    NAMED_KINDS,
    default_path,
    named_path,
    numbered,
)
from ocibridge.kinds.ollama.names import layer_names
from ocibridge.kinds.ollama.store import OllamaStore
from ocibridge.model.gguf_header import GGUFHeader, read_gguf_header
from ocibridge.model.package import ModelFile, ModelPackage
from ocibridge.oci.digest import CHUNK, is_digest
from ocibridge.oci.mediatypes import Kind
from ocibridge.oci.models import Descriptor
from ocibridge.oci.reference import OLLAMA_DEFAULT_NAMESPACE, OllamaName
from ocibridge.stores.base import MAX_MANIFEST_BYTES, Store

SMALL_JSON = 1 << 20  # an HF config.json layer read for the architecture, if no larger
#: blobs checked at once: a tensor-per-layer model has a thousand, each a HEAD from a registry
EXISTS_AT_ONCE = 8


def _descriptor(blob: OllamaLayer) -> Descriptor:
    media_type = blob.mediaType.split(";")[0].strip()
    return Descriptor(mediaType=media_type, digest=blob.digest, size=blob.size)


def _opener(store: Store, desc: Descriptor) -> Callable[[], BinaryIO]:
    return lambda: store.open_blob(desc)


def _layer_files(store: Store, manifest: OllamaManifest) -> list[ModelFile]:
    """Named layers take their names; the others take the fixed names of their kind."""
    files: list[ModelFile] = []
    names = layer_names(manifest)  # the checks every Ollama writer makes too
    used = {MANIFEST_FILE, CONFIG_FILE}
    counts: dict[str, int] = {}
    planned: list[tuple[OllamaLayer, str | None, str]] = []
    for layer, name in zip(manifest.layers, names, strict=True):
        lt = parse_layer_type(layer.mediaType)
        assert lt is not None  # parse_ollama_manifest checked it
        path = None if name is None else named_path(lt.kind, name, lt.params)
        if path is not None:
            if path in used:
                raise SourceError(f"Ollama manifest: two layers would both be the file {path!r}")
            used.add(path)
        planned.append((layer, path, lt.kind))
    for layer, named, kind in planned:
        if named is not None:
            path, mp_kind = named, NAMED_KINDS[kind]
        else:
            base, mp_kind = default_path(kind.replace("/", "_"))
            n = counts.get(kind, 0)
            while True:
                n += 1
                path = numbered(base, n)
                if path not in used:
                    break
            counts[kind] = n
            used.add(path)
        desc = _descriptor(layer)
        files.append(
            ModelFile(path, mp_kind, layer.size, opener=_opener(store, desc), digest=layer.digest)
        )
    return files


def _read_header(store: Store, layer: OllamaLayer) -> GGUFHeader:
    """The header. When it does not parse in a local store, a blob that is not what its digest
    says (a damaged file) is the real fault: that is checked, and reported instead. (A registry
    checked the digest on upload; reading a whole remote blob to report that is not worth it.)"""
    with store.open_blob(_descriptor(layer)) as reader:
        try:
            return read_gguf_header(reader, where=f"model layer {layer.digest}")
        except SourceError:
            if isinstance(store, OllamaStore):
                while reader.read(CHUNK):  # raises DigestMismatch at EOF if the blob is damaged
                    pass
            raise


def _json_blob(store: Store, layer: OllamaLayer, what: str) -> Any:
    data = store.fetch_bytes(_descriptor(layer))
    try:
        return boundedjson.loads(data)
    except ValueError as e:
        raise SourceError(f"{what} {layer.digest} is not valid JSON: {e}") from None


def _is_hf_config(lt: LayerType | None, layer: OllamaLayer) -> bool:
    return bool(lt and lt.kind == "json" and (layer.name or lt.params.get("name")) == "config.json")


def _model_config(store: Store, manifest: OllamaManifest, ollama_config: dict[str, Any]) -> dict[str, Any]:
    """format, architecture, paramSize, quantization: from the GGUF header, else the configs."""
    config: dict[str, Any] = {}
    kinds = [(parse_layer_type(layer.mediaType), layer) for layer in manifest.layers]
    model = next((layer for lt, layer in kinds if lt and lt.kind == "model"), None)
    if model is not None:
        header = _read_header(store, model)
        config["format"] = "gguf"
        for key, value in (
            ("architecture", header.architecture),
            ("paramSize", header.param_size),
            ("quantization", header.quantization),
        ):
            if value:
                config[key] = value
    elif any(lt and lt.kind == "tensor" for lt, _ in kinds):
        config["format"] = "safetensors"
        hf = next((layer for lt, layer in kinds if _is_hf_config(lt, layer)), None)
        if hf is not None and hf.size <= SMALL_JSON:
            doc = _json_blob(store, hf, "config.json layer")
            if isinstance(doc, dict) and isinstance(doc.get("model_type"), str):
                config["architecture"] = doc["model_type"]
    for key, field in (("paramSize", "model_type"), ("quantization", "file_type")):
        value = ollama_config.get(field)
        if key not in config and isinstance(value, str) and value:
            config[key] = value
    return config


def _check_blobs(store: Store, blobs: list[OllamaLayer]) -> None:
    """NotFound naming the first blob (in manifest order) the store lacks; checked
    ``EXISTS_AT_ONCE`` at a time."""
    with ThreadPoolExecutor(max(1, min(EXISTS_AT_ONCE, len(blobs))), thread_name_prefix="ollama-exists") as pool:
        present = list(pool.map(lambda blob: store.exists(_descriptor(blob)), blobs))
    for blob, ok in zip(blobs, present, strict=True):
        if not ok:
            raise NotFound(f"{store.describe()}: blob {blob.digest} of the model is missing "
                           f"(or is not the {blob.size} bytes the manifest gives)")


def read_ollama(store: Store, reference: str, name: OllamaName | None = None) -> ModelPackage:
    """Read the Ollama model ``reference`` (tag or digest) names in ``store``.

    ``name`` (default: an OllamaStore's own; none for other stores) names the model in the
    config and annotations.
    Every blob is checked to exist first, so a broken model fails before anything is written.
    """
    if name is None and isinstance(store, OllamaStore):
        name = store.name
    desc = store.resolve(reference)
    if desc.size > MAX_MANIFEST_BYTES:
        raise TooLarge(f"Ollama manifest {desc.digest} is too large ({desc.size} bytes)")
    data = store.fetch_bytes(desc)
    manifest = parse_ollama_manifest(data, where=f"Ollama manifest {desc.digest}")
    _check_blobs(store, ([manifest.config] if manifest.config else []) + manifest.layers)

    files = _layer_files(store, manifest)
    files.append(
        ModelFile.from_bytes(MANIFEST_FILE, data, Kind.WEIGHT_CONFIG, digest=desc.digest)
    )
    ollama_config: dict[str, Any] = {}
    if manifest.config is not None:
        cfg = manifest.config
        if cfg.size > MAX_MANIFEST_BYTES:
            raise TooLarge(f"Ollama config {cfg.digest} is too large ({cfg.size} bytes)")
        parsed = parse_ollama_config(store.fetch_bytes(_descriptor(cfg)),
                                     where=f"Ollama config {cfg.digest}")
        ollama_config = parsed.model_dump(exclude_none=True)
        cdesc = _descriptor(cfg)
        files.append(
            ModelFile(CONFIG_FILE, Kind.WEIGHT_CONFIG, cfg.size, opener=_opener(store, cdesc),
                      digest=cfg.digest)
        )
    try:
        config = _model_config(store, manifest, ollama_config)
    except OcibridgeError:
        raise
    except (OSError, ValueError) as e:
        raise SourceError(f"cannot read the model layer header: {e}") from None

    descriptor: dict[str, Any] = {}
    annotations = {ANNOTATION_MANIFEST_DIGEST: desc.digest}
    if name is not None:
        annotations[ANNOTATION_NAME] = str(name)
        short = name.model if name.namespace == OLLAMA_DEFAULT_NAMESPACE else name.repository
        descriptor["name"] = short
        if not is_digest(reference):
            descriptor["version"] = reference
    family = ollama_config.get("model_family")
    if isinstance(family, str) and family:
        descriptor["family"] = family
    return ModelPackage(
        files=files,
        descriptor=descriptor,
        config=config,
        annotations=annotations,
        source_format="ollama",
    )
