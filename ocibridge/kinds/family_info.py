"""What ``inspect`` says about a model beyond its manifest: the family in words, the family's own
fields (a Kitfile's package/model/code/datasets/docs, a Docker model's config), and each layer's
kind and path as its family reads them (a ModelKit or a Docker model layer carries no ModelPack
media type, so the manifest alone gives ``-``)."""

from __future__ import annotations

from typing import Any

from ocibridge.errors import OcibridgeError
from ocibridge.kinds.families import NotAModel, identify_read
from ocibridge.oci.cnaidraft import is_draft
from ocibridge.oci.models import ManifestRead
from ocibridge.stores.base import Store

#: family name → how a person calls it
FAMILY_WORDS = {
    "modelpack": "ModelPack", "modelkit": "KitOps ModelKit", "docker-model": "Docker model",
    "modelcar": "ModelCar", "ollama": "Ollama",
}
#: family name → (label, top-level config keys that are the family's own fields)
FAMILY_FIELDS = {
    "modelkit": ("Kitfile", ("manifestVersion", "package", "model", "code", "datasets", "docs", "prompts")),
    "docker-model": ("Docker model", ("descriptor", "config")),
    "ollama": ("Ollama config", ("model_format", "model_family", "model_families", "model_type", "file_type")),
}


def describe(store: Store, read: ManifestRead, info: dict[str, Any]) -> None:
    """Add ``family``, ``familyName`` and ``familyFields`` to an inspect result and fill the
    layers' kind, variant and path from the family's reading of ``read`` (the manifest inspect
    read, judged as it is). A manifest of no known family, or one its family cannot read, is
    left as the manifest says (inspect shows what is there)."""
    try:
        found = identify_read(store, read.desc, read.data, read.manifest, shown=read.desc.digest)
    except (NotAModel, OcibridgeError):
        return
    name = found.family.name
    info["family"] = name
    info["familyName"] = FAMILY_WORDS.get(name, found.family.title)
    if is_draft(found.manifest):  # its metadata is in the annotations inspect lists
        info["familyName"] = "ModelPack, the early CNAI draft (2024): convert --to modelpack for the current form"
    label, keys = FAMILY_FIELDS.get(name, ("", ()))
    config = info.get("config")
    if keys and isinstance(config, dict):
        info["familyFields"] = {"label": label, "fields": {k: config[k] for k in keys if k in config}}
    if name == "modelpack":
        return
    try:
        reading = found.family.read(store, found.desc, found.data, found.manifest)
    except OcibridgeError:
        return
    parts = {p.blob.digest: p for p in reading.view.parts}
    for layer in info.get("layers", []):
        part = parts.get(layer.get("digest"))
        if part is None:
            continue
        if layer.get("kind") in (None, "-"):
            layer["kind"] = part.kind.value
        if layer.get("variant") in (None, "-"):
            layer["variant"] = part.variant.value
        if not layer.get("path"):
            layer["path"] = part.path
