"""KitOps ModelKits: ``application/vnd.kitops.modelkit.*``, the Kitfile (as JSON) in the config.

Layer types map to ModelPack kinds as kit's own ``--use-model-pack`` does: model → weight,
modelpart → weight.config (weight when the part is a weight file), code → code, dataset →
dataset, docs → doc. Layers keep their bytes: a tar stays the same tar, a raw layer the same
file. Written ModelKits follow kit's layer order (model, parts, code, datasets, docs) and its
config: the Kitfile with each element's ``digest`` and ``diffId``.
"""

from __future__ import annotations

import re
from typing import Any

from ocibridge.core import boundedjson
from ocibridge.errors import SourceError
from ocibridge.kinds.common import (
    compact_json,
    fetch_json,
    items,
    layer_file_path,
    layer_metadata,
    section,
    short,
    text_field,
)
from ocibridge.kinds.family import Reading, WriteOptions
from ocibridge.kinds.neutral import Loss, ModelView, Part, Written
from ocibridge.kinds.origin import can_keep, carried, strip
from ocibridge.layers.diffid import diff_id_of
from ocibridge.oci.mediatypes import ANNOTATION_CREATED, OCI_MANIFEST, Kind, Variant
from ocibridge.oci.models import Descriptor, Manifest
from ocibridge.stores.base import Store

MANIFEST_TYPE = "application/vnd.kitops.modelkit.manifest.v1+json"
CONFIG_TYPE = "application/vnd.kitops.modelkit.config.v1+json"
KITFILE_ANNOTATION = "ml.kitops.modelkit.kitfile"
CLI_VERSION_ANNOTATION = "ml.kitops.modelkit.cli-version"
MODELFILE_ANNOTATION = "org.cncf.modctl.modelfile"
FILEPATH = "org.cncf.model.filepath"
METADATA = "org.cncf.model.file.metadata+json"
MANIFEST_VERSION = "1.0.0"
_LAYER = re.compile(r"^application/vnd\.kitops\.modelkit\.(\w+)\.v1\.(\w+)(?:\+([\w-]+))?$")
_KINDS = {"model": Kind.WEIGHT, "modelpart": Kind.WEIGHT_CONFIG, "code": Kind.CODE,
          "dataset": Kind.DATASET, "docs": Kind.DOC}
_SECTIONS = {"code": "code", "dataset": "datasets", "docs": "docs"}
_WEIGHT_FILE = re.compile(r"\.(gguf|safetensors|bin|pt|pth|onnx|h5|ckpt|dduf|mmproj|tflite|npz)$", re.I)
#: Kitfile fields that ModelPack has no place for: reported as lost (or kept for the way back).
_ELEMENT_FIELDS = ("name", "description", "license", "framework", "type", "version", "parameters")


def _variant(fmt: str, compression: str | None) -> Variant:
    if fmt == "raw":
        if compression not in (None, "", "none"):
            raise SourceError(f"a raw ModelKit layer cannot be compressed ({compression})")
        return Variant.RAW
    if fmt != "tar":
        raise SourceError(f"unknown ModelKit layer format {fmt!r}")
    if compression in (None, "", "none"):
        return Variant.TAR
    if compression in ("gzip", "gzip-fastest"):
        return Variant.TAR_GZIP
    if compression == "zstd":
        return Variant.TAR_ZSTD
    raise SourceError(f"unknown ModelKit layer compression {compression!r}")


def layer_type(variant: Variant, base: str) -> str:
    fmt = "raw" if variant is Variant.RAW else "tar"
    suffix = {Variant.TAR_GZIP: "+gzip", Variant.TAR_ZSTD: "+zstd"}.get(variant, "")
    return f"application/vnd.kitops.modelkit.{base}.v1.{fmt}{suffix}"


def _elements(kitfile: dict[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    """Layer digest → (Kit layer type, the Kitfile element describing it)."""
    found: dict[str, tuple[str, dict[str, Any]]] = {}
    model = section(kitfile, "model")
    if model:
        if isinstance(model.get("digest"), str):
            found[model["digest"]] = ("model", model)
        for part in items(model, "parts"):
            if isinstance(part, dict) and isinstance(part.get("digest"), str):
                found[part["digest"]] = ("modelpart", part)
    for base, name in _SECTIONS.items():
        for element in items(kitfile, name):
            if isinstance(element, dict) and isinstance(element.get("digest"), str):
                found.setdefault(element["digest"], (base, element))
    return found


def _licenses(kitfile: dict[str, Any]) -> list[str]:
    """Every license the Kitfile names, sorted and unique (as kit's ModelPack config does)."""
    found: list[str] = []
    model = section(kitfile, "model")
    for element in [section(kitfile, "package"), model, *items(model, "parts"), *items(kitfile, "datasets"),
                    *items(kitfile, "code")]:
        value = text_field(element, "license")
        if value:
            found.append(value)
    return sorted(set(found))


def kitfile_extras(kitfile: dict[str, Any]) -> dict[str, Any]:
    """What a Kitfile says that ModelPack has no field for, under ``kitfile.*`` keys."""
    model, package = section(kitfile, "model"), section(kitfile, "package")
    extra: dict[str, Any] = {}
    for key in ("name", "framework", "version", "description", "license", "parameters"):
        if model.get(key) not in (None, "", [], {}):
            extra[f"kitfile.model.{key}"] = model[key]
    if text_field(package, "license"):
        extra["kitfile.package.license"] = package["license"]
    return extra


def kitfile_elements(kitfile: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(path, the element's own fields) of every Kitfile element, model parts and sections."""
    out = []
    model = section(kitfile, "model")
    for element in [*items(model, "parts"), *items(kitfile, "code"), *items(kitfile, "datasets"),
                    *items(kitfile, "docs"), *items(kitfile, "prompts")]:
        path = text_field(element, "path")
        if path:
            out.append((path.strip("/"), {k: element[k] for k in _ELEMENT_FIELDS
                                          if element.get(k) not in (None, "", [], {})}))
    return out


def apply_kitfile_annotation(view: ModelView) -> None:
    """A ModelPack artifact written from a Kitfile (kit --use-model-pack, ocibridge push -f)
    keeps it in an annotation: its Kit-only fields go back into the view."""
    text = view.annotations.get(KITFILE_ANNOTATION)
    if not text:
        return
    try:
        kitfile = boundedjson.loads(text)
    except ValueError:
        return
    if not isinstance(kitfile, dict):
        return
    for key, value in kitfile_extras(kitfile).items():
        view.extra.setdefault(key, value)
    elements = kitfile_elements(kitfile)
    for part in view.parts:
        for path, fields in elements:
            if part.path == path or part.path.startswith(path + "/") or path == ".":
                for key, value in fields.items():
                    part.extra.setdefault(key, value)
                break


class ModelKitFamily:
    name = "modelkit"
    title = "KitOps ModelKit"

    def matches(self, manifest: Manifest) -> bool:
        return manifest.artifactType == MANIFEST_TYPE or manifest.config.mediaType == CONFIG_TYPE

    def key(self, manifest: Manifest | None, options: WriteOptions) -> str:
        return self.name

    def read(self, store: Store, desc: Descriptor, data: bytes, manifest: Manifest) -> Reading:
        config_bytes, kitfile = fetch_json(store, manifest.config, "Kitfile config")
        if not isinstance(kitfile, dict):
            raise SourceError(f"Kitfile config {manifest.config.digest} is not a JSON object")
        elements = _elements(kitfile)
        parts: list[Part] = []
        for layer in manifest.layers:
            match = _LAYER.match(layer.mediaType)
            if match is None or match.group(1) not in _KINDS:
                raise SourceError(f"layer {layer.digest}: {layer.mediaType!r} is not a ModelKit layer type")
            base, fmt, compression = match.groups()
            variant = _variant(fmt, compression)
            element = elements.get(layer.digest, (base, {}))[1]
            path = layer.annotations and layer.annotations.get(FILEPATH) or text_field(element, "path")
            if not path:
                path = layer_file_path(layer)
            if not path:
                raise SourceError(f"ModelKit layer {layer.digest} has no path (no annotation, no Kitfile entry)")
            kind = _KINDS[base]
            if base == "modelpart" and _WEIGHT_FILE.search(path):
                kind = Kind.WEIGHT
            diff_id = text_field(element, "diffId") or (layer.digest if variant in (Variant.RAW, Variant.TAR)
                                                         else diff_id_of(store, layer, variant))
            meta, mode = layer_metadata(layer)
            fields = {k: element[k] for k in _ELEMENT_FIELDS if element.get(k) not in (None, "", [], {})}
            parts.append(Part(layer, kind, variant, path, diff_id, role=base, mode=mode,
                              file_metadata=meta, extra=fields))
        package = section(kitfile, "package")
        descriptor: dict[str, Any] = {}
        for field, key in (("name", "name"), ("version", "version"), ("description", "description")):
            value = text_field(package, key)
            if value:
                descriptor[field] = value
        authors = package.get("authors")
        if isinstance(authors, list) and authors and all(isinstance(a, str) for a in authors):
            descriptor["authors"] = list(authors)
        licenses = _licenses(kitfile)
        if licenses:
            descriptor["licenses"] = licenses
        if descriptor.get("name"):
            descriptor["title"] = descriptor["name"]
        annotations = dict(manifest.annotations or {})
        created = annotations.get(ANNOTATION_CREATED)
        if created:
            descriptor["createdAt"] = created
        config: dict[str, Any] = {}
        model = section(kitfile, "model")
        if text_field(model, "format"):
            config["format"] = model["format"]
        view = ModelView(
            family=self.name,
            parts=parts,
            descriptor=descriptor,
            config=config,
            extra=kitfile_extras(kitfile),
            annotations={k: v for k, v in annotations.items()
                         if k not in (CLI_VERSION_ANNOTATION, KITFILE_ANNOTATION)},
            manifest=data,
            config_bytes=config_bytes,
            manifest_media_type=desc.mediaType,
        )
        return Reading(view, store)

    def write(self, view: ModelView, options: WriteOptions) -> Written:
        ordered = _kit_order(view.parts)
        kitfile = _kitfile(view, ordered)
        config_bytes = compact_json(kitfile)
        layers = [part.bare_blob(layer_type(part.variant, base), _layer_annotations(part)) for base, part in ordered]
        kept = can_keep(view, self.name)
        annotations = carried(view, self.name, config_bytes)
        plain = {k: v for k, v in strip(view.annotations).items() if k != KITFILE_ANNOTATION}
        if view.descriptor.get("createdAt") and ANNOTATION_CREATED not in plain:
            plain[ANNOTATION_CREATED] = str(view.descriptor["createdAt"])
        manifest = Manifest(
            mediaType=OCI_MANIFEST,
            artifactType=MANIFEST_TYPE,
            config=Descriptor.for_bytes(CONFIG_TYPE, config_bytes),
            layers=layers,
            annotations={**plain, **annotations} or None,
        )
        losses = [Loss(f"config.{k}", short(view.config[k]), kept)
                  for k in ("architecture", "paramSize", "precision", "quantization", "capabilities")
                  if view.config.get(k) not in (None, "", [])]
        losses += [Loss(f"descriptor.{k}", short(view.descriptor[k]), kept)
                   for k in ("family", "docURL", "sourceURL", "datasetsURL", "revision", "vendor")
                   if view.descriptor.get(k) not in (None, "", [])]
        losses += [Loss(k, short(v), kept) for k, v in sorted(view.extra.items())
                   if not k.startswith("kitfile.")]
        if view.annotations.get(MODELFILE_ANNOTATION):
            losses.append(Loss("annotations.org.cncf.modctl.modelfile", "the Modelfile", kept))
        return Written(manifest.to_json_bytes(), OCI_MANIFEST, config_bytes, CONFIG_TYPE, MANIFEST_TYPE, losses)


def _layer_annotations(part: Part) -> dict[str, str]:
    """The path, and the file metadata when the source had it (kit ignores it; it keeps modes
    for a pull and for the way back)."""
    annotations = {FILEPATH: part.path}
    if part.file_metadata:
        annotations[METADATA] = part.file_metadata
    return annotations


def _kit_order(parts: list[Part]) -> list[tuple[str, Part]]:
    """(Kit layer type, part) in kit's order: the model, its parts, code, datasets, docs."""
    model = next((p for p in parts if p.role == "model"), None)
    if model is None:
        model = next((p for p in parts if p.kind is Kind.WEIGHT), None)
    out: list[tuple[str, Part]] = [("model", model)] if model is not None else []
    out += [("modelpart", p) for p in parts
            if p is not model and p.kind in (Kind.WEIGHT, Kind.WEIGHT_CONFIG)]
    for kind, base in ((Kind.CODE, "code"), (Kind.DATASET, "dataset"), (Kind.DOC, "docs")):
        out += [(base, p) for p in parts if p.kind is kind]
    return out


def _element(part: Part, first: tuple[str, ...]) -> dict[str, Any]:
    element: dict[str, Any] = {}
    for key in first:
        value = part.path if key == "path" else part.extra.get(key)
        if value not in (None, "", [], {}):
            element[key] = value
    element["digest"] = part.blob.digest
    element["diffId"] = part.diff_id
    return element


def _kitfile(view: ModelView, ordered: list[tuple[str, Part]]) -> dict[str, Any]:
    """The Kitfile as kit marshals it (field order of its Go structs, empty fields left out)."""
    d = view.descriptor
    package: dict[str, Any] = {}
    for key in ("name", "version", "description"):
        if isinstance(d.get(key), str) and d[key]:
            package[key] = d[key]
    licenses = d.get("licenses") if isinstance(d.get("licenses"), list) else []
    license_text = view.extra.get("kitfile.package.license") or (" AND ".join(licenses) if licenses else None)
    if license_text:
        package["license"] = license_text
    if isinstance(d.get("authors"), list) and d["authors"]:
        package["authors"] = list(d["authors"])
    kitfile: dict[str, Any] = {"manifestVersion": MANIFEST_VERSION, "package": package}
    models = [p for base, p in ordered if base == "model"]
    parts = [p for base, p in ordered if base == "modelpart"]
    if models or parts:
        model: dict[str, Any] = {}
        x = view.extra
        if x.get("kitfile.model.name") or d.get("name"):
            model["name"] = x.get("kitfile.model.name") or d.get("name")
        if models:
            model["path"] = models[0].path
        for key in ("license", "framework"):
            if x.get(f"kitfile.model.{key}"):
                model[key] = x[f"kitfile.model.{key}"]
        if view.config.get("format"):
            model["format"] = view.config["format"]
        for key in ("version", "description"):
            if x.get(f"kitfile.model.{key}"):
                model[key] = x[f"kitfile.model.{key}"]
        if parts:
            model["parts"] = [_element(p, ("name", "path", "license", "type")) for p in parts]
        if x.get("kitfile.model.parameters") not in (None, "", {}):
            model["parameters"] = x["kitfile.model.parameters"]
        if models:
            model["digest"] = models[0].blob.digest
            model["diffId"] = models[0].diff_id
        kitfile["model"] = model
    for base, key, fields in (("code", "code", ("path", "description", "license")),
                                  ("dataset", "datasets", ("name", "path", "description", "license", "parameters")),
                                  ("docs", "docs", ("path", "description"))):
        elements = [_element(p, fields) for b, p in ordered if b == base]
        if elements:
            kitfile[key] = elements
    return kitfile
