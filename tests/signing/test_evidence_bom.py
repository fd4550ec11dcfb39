"""The AI-BOM (issue 44): ``push --sbom`` and ``attest REF --sbom`` write a CycloneDX 1.6 ML-BOM
made with cyclonedx-python-lib, validated by the library's own JSON-schema validator and parsed
back with it; the same artifact gives the same bytes."""

from __future__ import annotations

import builtins
import hashlib
import json
import uuid
from pathlib import Path

import pytest
from cyclonedx.model.bom import Bom
from cyclonedx.model.component import ComponentType
from cyclonedx.schema import SchemaVersion

from ocibridge.cli import main
from ocibridge.oci.models import Manifest, parse_manifest_bytes
from ocibridge.signing.bom import BOM_MEDIA_TYPE, front_matter, model_bom, serial_number
from ocibridge.stores.layout import LayoutStore
from tests.modelgen import make_model

CARD = """---
license: apache-2.0
base_model: example-org/base-7b
datasets:
  - squad
  - example-org/private-set
pipeline_tag: text-generation
library_name: transformers
---
# A model
"""


@pytest.fixture
def model(tmp_path: Path) -> Path:
    root = make_model(tmp_path / "m")
    (root / "README.md").write_text(CARD)
    (root / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
                                                  "torch_dtype": "bfloat16"}))
    return root


def _push(model: Path, layout: Path, *extra: str) -> str:
    assert main(["push", str(model), f"oci:{layout}:v1", "-q", *extra]) == 0
    return LayoutStore(layout).resolve("v1").digest


def _bom(layout: Path, digest: str) -> bytes:
    store = LayoutStore(layout)
    return model_bom(store, store.resolve(digest))


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_bom_describes_the_model_its_card_and_every_file(model, tmp_path):
    from cyclonedx.validation.json import JsonStrictValidator  # not at collection (it imports jsonschema)

    digest = _push(model, tmp_path / "store")
    data = _bom(tmp_path / "store", digest)
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(data.decode()) is None
    doc = json.loads(data)
    assert doc["specVersion"] == "1.6" and doc["bomFormat"] == "CycloneDX"
    component = doc["metadata"]["component"]
    assert component["type"] == "machine-learning-model" and component["name"] == "m"
    assert component["purl"] == f"pkg:oci/m@{digest}"
    card = component["modelCard"]["modelParameters"]
    assert card["modelArchitecture"] == "LlamaForCausalLM" and card["architectureFamily"] == "llama"
    assert card["task"] == "text-generation"
    assert {"type": "dataset", "name": "squad"} in card["datasets"]
    assert {"ref": "file:data.csv"} in card["datasets"]  # the model's own dataset file
    props = {p["name"]: p["value"] for p in component["modelCard"]["properties"]}
    assert props["ocibridge:model:format"] == "safetensors" and props["ocibridge:model:precision"] == "bf16"
    assert component["licenses"] == [{"license": {"id": "Apache-2.0"}}]
    (base,) = component["pedigree"]["ancestors"]
    assert base["name"] == "example-org/base-7b" and base["purl"] == "pkg:huggingface/example-org/base-7b"
    files = {c["name"]: c["hashes"][0]["content"] for c in component["components"]}
    on_disk = {p.relative_to(model).as_posix(): _sha(p) for p in model.rglob("*") if p.is_file()}
    assert files == on_disk
    assert all(c["type"] == "file" and c["hashes"][0]["alg"] == "SHA-256" for c in component["components"])
    assert "timestamp" not in doc["metadata"]  # none unless asked
    assert doc["serialNumber"] == f"urn:uuid:{serial_number(digest)}"
    assert uuid.UUID(doc["serialNumber"][9:]).version == 5


def test_the_bom_parses_back_with_the_library(model, tmp_path):
    digest = _push(model, tmp_path / "store")
    bom = Bom.from_json(json.loads(_bom(tmp_path / "store", digest)))
    component = bom.metadata.component
    assert component is not None and component.type is ComponentType.MACHINE_LEARNING_MODEL
    assert sorted(c.name for c in component.components) == sorted(
        p.relative_to(model).as_posix() for p in model.rglob("*") if p.is_file())
    assert str(bom.serial_number) == str(serial_number(digest))


def test_same_artifact_same_bytes_and_another_artifact_another_serial(model, tmp_path):
    digest = _push(model, tmp_path / "a")
    assert _bom(tmp_path / "a", digest) == _bom(tmp_path / "a", digest)
    assert _push(model, tmp_path / "b") == digest  # a reproducible push: the same manifest
    assert _bom(tmp_path / "b", digest) == _bom(tmp_path / "a", digest)
    (model / "extra.txt").write_text("more\n")
    other = _push(model, tmp_path / "c")
    assert json.loads(_bom(tmp_path / "c", other))["serialNumber"] != json.loads(_bom(tmp_path / "a", digest))[
        "serialNumber"]


def test_a_timestamp_only_when_asked(model, tmp_path):
    digest = _push(model, tmp_path / "store")
    store = LayoutStore(tmp_path / "store")
    data = model_bom(store, store.resolve(digest), timestamp="2025-01-02T03:04:05Z")
    assert json.loads(data)["metadata"]["timestamp"] == "2025-01-02T03:04:05Z"


def test_files_inside_tar_layers_are_listed_each_with_its_digest(model, tmp_path):
    digest = _push(model, tmp_path / "store", "--layer", "code=tar", "--layer", "doc=tar+gzip")
    doc = json.loads(_bom(tmp_path / "store", digest))
    files = {c["name"]: c["hashes"][0]["content"] for c in doc["metadata"]["component"]["components"]}
    assert files["scripts/run.sh"] == _sha(model / "scripts" / "run.sh")
    assert files["README.md"] == _sha(model / "README.md")


def test_sources_the_kinds_record_are_in_the_bom(model, tmp_path):
    """The Hub repository and revision, carton model hash, Ollama name: as the kinds annotate them."""
    notes = {"org.opencontainers.image.source": "https://huggingface.co/example-org/m",
             "org.opencontainers.image.revision": "0123456789abcdef0123456789abcdef01234567",
             "io.carton.model.hash": "abc123", "io.ollama.name": "registry.ollama.ai/library/m:latest"}
    digest = _push(model, tmp_path / "store", *[x for k, v in notes.items() for x in ("-a", f"{k}={v}")])
    component = json.loads(_bom(tmp_path / "store", digest))["metadata"]["component"]
    props = {p["name"]: p["value"] for p in component["properties"]}
    assert props["ocibridge:source:repository"] == notes["org.opencontainers.image.source"]
    assert props["ocibridge:source:revision"] == notes["org.opencontainers.image.revision"]
    assert props["ocibridge:source:carton-model-hash"] == "abc123"
    assert props["ocibridge:source:ollama-name"] == notes["io.ollama.name"]
    assert props["ocibridge:oci:manifest-digest"] == digest
    (ref,) = [r for r in component["externalReferences"] if r["type"] == "distribution"]
    assert ref["url"] == notes["org.opencontainers.image.source"] and notes[
        "org.opencontainers.image.revision"] in ref["comment"]


def test_push_sbom_attaches_the_bom_as_a_referrer(model, tmp_path, capsys):
    digest = _push(model, tmp_path / "store", "--sbom")
    store = LayoutStore(tmp_path / "store")
    subject = store.resolve(digest)
    (ref,) = store.referrers(subject)
    assert ref.artifactType == BOM_MEDIA_TYPE
    node = parse_manifest_bytes(store.fetch_bytes(ref), ref.mediaType)
    assert isinstance(node, Manifest) and node.subject is not None and node.subject.digest == digest
    assert store.fetch_bytes(node.layers[0]) == model_bom(store, subject)
    capsys.readouterr()
    assert main(["push", str(model), f"oci:{tmp_path}/store:v1", "-q", "--sbom", "--json"]) == 0  # again: nothing new
    assert json.loads(capsys.readouterr().out)["evidence"]["unchanged"] == ["sbom"]
    assert len(store.referrers(subject)) == 1


def test_front_matter_takes_strings_and_lists_of_strings_only():
    assert front_matter("# no front matter\n") == {}
    assert front_matter("---\nlicense: [1, 2]\ndatasets: {a: b}\nbase_model: x\n---\n") == {"base_model": ["x"]}
    assert front_matter("---\n: : bad yaml [\n---\n") == {}
    assert front_matter("---\nlicense: mit\n") == {}  # never closed


def test_without_the_library_one_line_names_the_extra(model, tmp_path, capsys, monkeypatch):
    real = builtins.__import__

    def no_cyclonedx(name, *args, **kwargs):
        if name.startswith("cyclonedx"):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_cyclonedx)
    assert main(["push", str(model), f"oci:{tmp_path}/store:v1", "-q", "--sbom"]) != 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'ocibridge[evidence]'" in err, err
    assert not (tmp_path / "store").exists()  # refused before anything was written
