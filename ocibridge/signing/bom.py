"""The AI-BOM of a model artifact: a CycloneDX 1.6 ML-BOM, made with cyclonedx-python-lib.

What the BOM says is read from the artifact as it is stored (any family: ModelPack, ModelKit,
Docker model, ModelCar, Ollama), so ``push --sbom`` and ``attest REF --sbom`` say the same
thing of the same manifest:

* the model, as the ``machine-learning-model`` component the BOM describes (``metadata.component``),
  with its model card: architecture and family, task, datasets, and (as card properties) the
  format, parameter count, precision and quantization the config says; its licenses; the base
  model (``pedigree.ancestors``); where it came from (Hub repository and revision, carton model
  hash, Ollama name: the annotations the kinds write);
* every file the model holds, as a ``file`` component with its SHA-256 (a raw layer's digest is
  its file's; a tar layer is read through the one layer reader and each file hashed).

The library models everything but the ``modelCard`` (its ``Component.model_card`` is a TODO), so
that one field is added to the library's JSON output and the result checked with the library's
own JSON-schema validator for 1.6: the schema is the judge of the whole document.

Deterministic: the same artifact gives the same bytes. No timestamp unless asked; the serial
number is a UUID derived from the manifest digest (and the repository, when one is named);
bom-refs are the files' paths.
"""

from __future__ import annotations

import json
import uuid
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ocibridge.core import boundedjson
from ocibridge.errors import OcibridgeError
from ocibridge.oci.digest import split_digest
from ocibridge.oci.models import Descriptor
from ocibridge.stores.base import Store

if TYPE_CHECKING:
    from ocibridge.kinds.neutral import ModelView

BOM_MEDIA_TYPE = "application/vnd.cyclonedx+json"
#: The predicate type of a CycloneDX attestation (cosign ``attest --type cyclonedx``).
BOM_PREDICATE_TYPE = "https://cyclonedx.org/bom"
SPEC_VERSION = "1.6"
EXTRA = "evidence"
#: A Hub model card (README.md) read for its YAML front matter: at most this many bytes.
MAX_CARD = 1 << 20
#: A value read from the model (a dataset, a base model) longer than this is no name.
MAX_VALUE = 512
MAX_ITEMS = 64
MODEL_REF = "model"
#: Property names of what the CycloneDX schema has no field for.
NS = "ocibridge:"
SERIAL_NAMESPACE = uuid.UUID("5e0f4a3c-9c1e-4a8a-9a8e-0c1b2d3e4f50")

# the annotations the kinds write about where a model came from (kinds/hf, carton, ollama)
HUB_SOURCE = "org.opencontainers.image.source"
HUB_REVISION = "org.opencontainers.image.revision"
CARTON_MODEL_HASH = "io.carton.model.hash"
OLLAMA_NAME = "io.ollama.name"
OLLAMA_MANIFEST = "io.ollama.manifest.digest"
SOURCE_ANNOTATIONS = {
    HUB_SOURCE: "source:repository",
    HUB_REVISION: "source:revision",
    CARTON_MODEL_HASH: "source:carton-model-hash",
    OLLAMA_NAME: "source:ollama-name",
    OLLAMA_MANIFEST: "source:ollama-manifest-digest",
}


class MissingExtra(OcibridgeError):
    """The evidence extra (cyclonedx-python-lib) is not installed."""


@dataclass
class ModelFile:
    path: str
    sha256: str
    size: int
    kind: str


@dataclass
class ModelFacts:
    """What the BOM says of one model manifest, read from the store (no library needed)."""

    digest: str
    name: str
    family: str
    descriptor: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    files: list[ModelFile] = field(default_factory=list)
    card: dict[str, Any] = field(default_factory=dict)  # the Hub card's front matter fields
    repository: str | None = None  # where it is (a registry repository), for the purl


def read_facts(store: Store, subject: Descriptor, repository: str | None = None) -> ModelFacts:
    """The model ``subject`` names in ``store``, of any family, and its files' SHA-256."""
    from ocibridge.kinds.families import identify

    found = identify(store, subject.digest)
    reading = found.family.read(store, found.desc, found.data, found.manifest)
    view = reading.view
    facts = ModelFacts(found.desc.digest, view.name or _last(repository) or "model", view.family,
                       dict(view.descriptor), dict(view.config), dict(view.annotations or {}),
                       dict(view.extra), repository=repository)
    if found.manifest.annotations:
        for key, value in found.manifest.annotations.items():
            facts.annotations.setdefault(key, value)
    facts.files = _files(reading.blobs, view)
    facts.card = _card(reading.blobs, view)
    return facts


def _last(repository: str | None) -> str | None:
    return repository.rstrip("/").rsplit("/", 1)[-1] if repository else None


def _files(store: Store, view: ModelView) -> list[ModelFile]:
    from ocibridge.core.fsutil import is_root_entry, safe_relpath
    from ocibridge.oci.mediatypes import Variant

    files: dict[str, ModelFile] = {}
    for part in view.parts:
        kind = part.kind.value
        if part.variant is Variant.RAW:
            algorithm, hexpart = split_digest(part.blob.digest)
            if algorithm == "sha256" and part.path:
                rel = safe_relpath(part.path, "layer file path")
                files.setdefault(rel, ModelFile(rel, hexpart, part.blob.size, kind))
                continue
        for rel, hexpart, size in _tar_files(store, part.blob):
            if not is_root_entry(rel):
                rel = safe_relpath(rel, "tar entry")
                files.setdefault(rel, ModelFile(rel, hexpart, size, kind))
    return sorted(files.values(), key=lambda f: f.path.encode())


def _tar_files(store: Store, layer: Descriptor) -> list[tuple[str, str, int]]:
    import hashlib

    from ocibridge.core.streams import open_tar_stream
    from ocibridge.layers.reader import open_layer
    from ocibridge.layers.tarwalk import tar_members
    from ocibridge.oci.digest import CHUNK

    found: list[tuple[str, str, int]] = []
    with open_layer(store, layer) as stream, open_tar_stream(stream) as tar:
        for member in tar_members(tar):
            if not member.isfile():
                continue
            src = tar.extractfile(member)
            assert src is not None
            h = hashlib.sha256()
            while chunk := src.read(CHUNK):
                h.update(chunk)
            found.append((member.name, h.hexdigest(), member.size))
        while stream.read(CHUNK):  # to the end: the layer's digest is verified there
            pass
    return found


def _card(store: Store, view: ModelView) -> dict[str, Any]:
    """The YAML front matter of the model's own README.md (a Hub model card), bounded."""
    from ocibridge.oci.mediatypes import Variant

    readme = next((p for p in view.parts if p.variant is Variant.RAW and p.path
                   and p.path.lower() == "readme.md"), None)
    if readme is None or readme.blob.size > MAX_CARD:
        return {}
    try:
        text = store.fetch_bytes(readme.blob).decode("utf-8")
    except (OcibridgeError, UnicodeDecodeError):
        return {}
    return front_matter(text)


def front_matter(text: str) -> dict[str, Any]:
    """The fields of a Hub model card's front matter the BOM uses: license, base_model,
    datasets, pipeline_tag, library_name (strings or lists of strings; anything else dropped)."""
    import yaml

    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        return {}
    try:
        end = next(i for i, line in enumerate(lines[1:], 1) if line.strip() in ("---", "..."))
        doc = yaml.safe_load("\n".join(lines[1:end]))
    except (StopIteration, yaml.YAMLError, RecursionError):
        return {}
    if not isinstance(doc, dict):
        return {}
    out: dict[str, Any] = {}
    for key in ("license", "license_name", "pipeline_tag", "library_name"):
        value = doc.get(key)
        if _name(value):
            out[key] = value
    for key in ("base_model", "datasets"):
        values = _names(doc.get(key))
        if values:
            out[key] = values
    return out


def _name(value: object) -> bool:
    return isinstance(value, str) and 0 < len(value) <= MAX_VALUE and value.isprintable()


def _names(value: object) -> list[str]:
    items = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    return [v for v in items[:MAX_ITEMS] if _name(v)]


def serial_number(digest: str, repository: str | None = None) -> uuid.UUID:
    """The BOM's serial number: a UUID (v5) of the manifest digest and repository."""
    return uuid.uuid5(SERIAL_NAMESPACE, f"{repository or ''}@{digest}")


def model_bom(store: Store, subject: Descriptor, *, repository: str | None = None,
              timestamp: str | None = None) -> bytes:
    """The CycloneDX 1.6 JSON of the model ``subject`` names, validated."""
    _library()  # before any byte of the model is read
    return make_bom(read_facts(store, subject, repository), timestamp=timestamp)


def _library() -> None:
    import importlib.util

    try:
        import cyclonedx.model.bom  # noqa: F401
    except ImportError:
        found = False
    else:  # the library's validator needs jsonschema (its json-validation extra)
        found = importlib.util.find_spec("jsonschema") is not None
    if not found:
        raise MissingExtra(f"the AI-BOM needs cyclonedx-python-lib: pip install 'ocibridge[{EXTRA}]'")


def make_bom(facts: ModelFacts, *, timestamp: str | None = None) -> bytes:
    """The BOM of ``facts`` as JSON bytes (sorted keys, two-space indent, final newline)."""
    _library()
    from cyclonedx.model.bom import Bom
    from cyclonedx.output.json import JsonV1Dot6

    bom = Bom(serial_number=serial_number(facts.digest, facts.repository))
    model = _model_component(facts)
    bom.metadata.component = model
    bom.metadata.tools.components.add(_tool())
    with warnings.catch_warnings():  # the library warns of graphs it finds incomplete: not for users
        warnings.simplefilter("ignore")
        bom.register_dependency(model, list(model.components))
        text = JsonV1Dot6(bom).output_as_string()
    doc = boundedjson.loads(text)
    metadata = doc["metadata"]
    if timestamp is None:
        metadata.pop("timestamp", None)
    else:
        metadata["timestamp"] = timestamp
    card = model_card(facts)
    if card:
        metadata["component"]["modelCard"] = card
    data = (json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()
    validate(data)
    return data


def validate(data: bytes) -> None:
    """Raise unless ``data`` is valid CycloneDX 1.6 JSON (the library's own strict validator)."""
    _library()
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    error = JsonStrictValidator(SchemaVersion.V1_6).validate_str(data.decode())
    if error is not None:
        raise OcibridgeError(f"the AI-BOM does not validate against CycloneDX {SPEC_VERSION}: "
                             f"{str(error.data)[:300]}")


def _tool() -> Any:
    from cyclonedx.model.component import Component, ComponentType

    from ocibridge.version import __version__

    return Component(type=ComponentType.APPLICATION, name="ocibridge", version=__version__,
                     bom_ref="tool:ocibridge")


def _prop(name: str, value: object) -> Any:
    from cyclonedx.model import Property

    return Property(name=NS + name, value=str(value))


def _model_component(facts: ModelFacts) -> Any:
    from cyclonedx.model import ExternalReference, ExternalReferenceType, HashAlgorithm, HashType, XsUri
    from cyclonedx.model.component import Component, ComponentType, Pedigree

    descriptor, notes = facts.descriptor, facts.annotations
    files = [Component(type=ComponentType.FILE, name=f.path, bom_ref=f"file:{f.path}",
                       hashes=[HashType(alg=HashAlgorithm.SHA_256, content=f.sha256)],
                       properties=[_prop("file:size", f.size), _prop("file:kind", f.kind)])
             for f in facts.files]
    properties = [_prop("oci:manifest-digest", facts.digest), _prop("oci:family", facts.family)]
    for key, name in SOURCE_ANNOTATIONS.items():
        if _name(notes.get(key)):
            properties.append(_prop(name, notes[key]))
    for key in ("kitfile.model.framework", "kitfile.model.version", "kitfile.model.name"):
        if _name(facts.extra.get(key)):
            properties.append(_prop(key, facts.extra[key]))
    if _name(facts.card.get("library_name")):
        properties.append(_prop("card:library", facts.card["library_name"]))
    references = []
    for key, kind in (("sourceURL", ExternalReferenceType.VCS), ("docURL", ExternalReferenceType.DOCUMENTATION)):
        if _url(descriptor.get(key)):
            references.append(ExternalReference(type=kind, url=XsUri(descriptor[key])))
    if _url(notes.get(HUB_SOURCE)) and notes[HUB_SOURCE] != descriptor.get("sourceURL"):
        revision = notes.get(HUB_REVISION)
        references.append(ExternalReference(type=ExternalReferenceType.DISTRIBUTION, url=XsUri(notes[HUB_SOURCE]),
                                            comment=f"revision {revision}" if _name(revision) else None))
    bases = [Component(type=ComponentType.MACHINE_LEARNING_MODEL, name=base, bom_ref=f"base-model:{base}",
                       purl=_hub_purl(base)) for base in facts.card.get("base_model", [])]
    version = descriptor.get("version")
    return Component(
        type=ComponentType.MACHINE_LEARNING_MODEL,
        name=facts.name,
        version=version if _name(version) else None,
        description=descriptor["description"] if _name(descriptor.get("description")) else None,
        bom_ref=MODEL_REF,
        purl=_oci_purl(facts),
        licenses=_licenses(facts),
        external_references=references,
        properties=properties,
        pedigree=Pedigree(ancestors=bases) if bases else None,
        components=files,
    )


def _url(value: object) -> bool:
    return _name(value) and isinstance(value, str) and "://" in value and " " not in value


def _oci_purl(facts: ModelFacts) -> Any:
    """``pkg:oci/NAME@DIGEST?repository_url=REPO`` (the purl spec's OCI type)."""
    from packageurl import PackageURL

    name = (_last(facts.repository) or facts.name).lower()
    qualifiers = {"repository_url": facts.repository} if facts.repository else None
    return PackageURL(type="oci", name=name, version=facts.digest, qualifiers=qualifiers)


def _hub_purl(repo: str) -> Any:
    from packageurl import PackageURL

    if repo.count("/") != 1 or "://" in repo:
        return None
    namespace, name = repo.split("/")
    return PackageURL(type="huggingface", namespace=namespace, name=name)


def _licenses(facts: ModelFacts) -> list[Any]:
    from cyclonedx.model.license import DisjunctiveLicense
    from cyclonedx.spdx import fixup_id

    names = [v for v in facts.descriptor.get("licenses") or [] if _name(v)]
    for value in (facts.card.get("license"), facts.extra.get("kitfile.model.license"),
                  facts.extra.get("kitfile.package.license")):
        if _name(value):
            names.append(value)
    out = []
    for value in dict.fromkeys(names):
        spdx = fixup_id(value)
        out.append(DisjunctiveLicense(id=spdx) if spdx else DisjunctiveLicense(name=value))
    return out


def model_card(facts: ModelFacts) -> dict[str, Any]:
    """The component's ``modelCard``: what the model is (architecture, family, task, datasets)
    and, as card properties, its format, parameter count, precision and quantization."""
    config, descriptor = facts.config, facts.descriptor
    parameters: dict[str, Any] = {}
    if _name(config.get("architecture")):
        parameters["modelArchitecture"] = config["architecture"]
    if _name(descriptor.get("family")):
        parameters["architectureFamily"] = descriptor["family"]
    if _name(facts.card.get("pipeline_tag")):
        parameters["task"] = facts.card["pipeline_tag"]
    datasets: list[dict[str, Any]] = [{"type": "dataset", "name": name} for name in facts.card.get("datasets", [])]
    datasets += [{"type": "dataset", "name": url, "contents": {"url": url}}
                 for url in descriptor.get("datasetsURL") or [] if _url(url)]
    datasets += [{"ref": f"file:{f.path}"} for f in facts.files if f.kind == "dataset"]
    if datasets:
        parameters["datasets"] = datasets
    properties = [{"name": NS + "model:" + name, "value": str(config[key])}
                  for key, name in (("format", "format"), ("paramSize", "parameter-count"),
                                    ("precision", "precision"), ("quantization", "quantization"))
                  if isinstance(config.get(key), (str, int)) and _name(str(config[key]))]
    card: dict[str, Any] = {}
    if parameters:
        card["modelParameters"] = parameters
    if properties:
        card["properties"] = properties
    return card

