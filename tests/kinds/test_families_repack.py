"""Compressed ModelKit layers (kit pack --compression) into families that need plain tar."""

from __future__ import annotations

import io
import json
import shutil

import pytest
from support.data import data

from ocibridge.api import model_ops as api
from ocibridge.api.convert import convert
from ocibridge.cli import main
from ocibridge.oci.models import Descriptor
from ocibridge.stores.layout import LayoutStore
from tests.kit_compressed import KIT_DIGEST, compressed_kit
from tests.modelgen import tree


@pytest.mark.parametrize("compression", ["gzip", "zstd"])
def test_a_compressed_modelkit_becomes_a_docker_model_with_plain_tar_layers(tmp_path, compression, capsys):
    src = compressed_kit(tmp_path / "kit", compression)
    code = main(["convert", src, f"oci:{tmp_path / 'out'}:d", "--to", "docker-model", "--json"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    changed = {c["field"]: c["value"] for c in report["changed"]}
    assert set(changed) == {f"layers[{p}].compression" for p in
                            ("model/tiny-llama.gguf", "model/chat_template.jinja", "src", "data/eval.jsonl",
                             "README.md")}
    assert all(v.startswith(f"{compression} removed: sha256:") for v in changed.values())
    store = LayoutStore(tmp_path / "out")
    manifest = json.loads(store.fetch_bytes(store.resolve("d")))
    assert manifest["config"]["mediaType"].startswith("application/vnd.docker.ai.model.config.")
    assert not any("gzip" in layer["mediaType"] or "zstd" in layer["mediaType"] for layer in manifest["layers"])
    # the plain tar layers are exactly the uncompressed kit's (kit pack --compression none)
    shutil.copytree(data("kitops", "kit-latest-tar"), tmp_path / "plain")
    plain = LayoutStore(tmp_path / "plain")
    plain_layers = json.loads(plain.fetch_bytes(plain.resolve(KIT_DIGEST)))["layers"]
    assert {layer["digest"] for layer in manifest["layers"]} == {layer["digest"] for layer in plain_layers}
    assert report["blobsCopied"] == 6  # five decompressed layers and the new config
    # files are byte-identical, and the way back is a ModelKit of the same files (plain tar now)
    assert tree(_pulled(f"oci:{tmp_path / 'out'}:d", tmp_path / "a")) == tree(_pulled(src, tmp_path / "b"))
    back = convert(f"oci:{tmp_path / 'out'}:d", f"oci:{tmp_path / 'out'}:kit", "modelkit")
    assert not back.conversion.restored and not back.conversion.changes
    assert tree(_pulled(f"oci:{tmp_path / 'out'}:kit", tmp_path / "c")) == tree(tmp_path / "b")


def test_the_text_report_has_one_changed_line_per_layer(tmp_path, capsys):
    src = compressed_kit(tmp_path / "kit", "gzip")
    assert main(["convert", src, f"oci:{tmp_path / 'out'}:d", "--to", "docker-model"]) == 0
    lines = [line.strip() for line in capsys.readouterr().out.splitlines()]
    changed = [line for line in lines if line.startswith("changed: ")]
    assert len(changed) == 5
    assert changed[0].startswith("changed: layers[model/tiny-llama.gguf].compression: gzip removed: sha256:")


def test_into_modelpack_compressed_layers_stay_as_they_are(tmp_path):
    src = compressed_kit(tmp_path / "kit", "zstd")
    there = convert(src, f"oci:{tmp_path / 'kit'}:mp", "modelpack")
    assert not there.conversion.changes and there.stats.blobs_copied == 1  # the config only
    back = convert(f"oci:{tmp_path / 'kit'}:mp", f"oci:{tmp_path / 'out'}:kit", "modelkit")
    assert back.conversion.restored


def test_a_layer_whose_diff_id_lies_is_refused(tmp_path, capsys):
    compressed_kit(tmp_path / "kit", "gzip")
    store = LayoutStore(tmp_path / "kit")
    manifest = json.loads(store.fetch_bytes(store.resolve("v1")))
    cfg_desc = Descriptor.model_validate(manifest["config"])
    config = json.loads(store.fetch_bytes(cfg_desc))
    config["docs"][0]["diffId"] = "sha256:" + "1" * 64
    body = json.dumps(config).encode()
    new = Descriptor.for_bytes(cfg_desc.mediaType, body)
    store.push_blob(new, io.BytesIO(body))
    manifest["config"].update(digest=new.digest, size=new.size)
    data_ = json.dumps(manifest).encode()
    store.push_manifest(Descriptor.for_bytes(manifest["mediaType"], data_), data_, "bad")
    code = main(["convert", f"oci:{tmp_path / 'kit'}:bad", f"oci:{tmp_path / 'out'}:d", "--to", "docker-model"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and len(err) == 1 and "diffId" in err[0] and "README.md" in err[0], err
    assert not (tmp_path / "out").exists()


def _pulled(ref: str, out):
    api.pull(ref, str(out))
    return out


def _modelpack_with_weight_tar(tmp_path, entries: list[tuple[str, bytes]]) -> str:
    """A ModelPack artifact whose only layer is a weight tar holding ``entries`` (name, body)."""
    import hashlib
    import tarfile

    from ocibridge.oci.mediatypes import Family

    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, body in entries:
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    blob = out.getvalue()
    family = Family.CNAI
    layer = Descriptor.for_bytes("application/vnd.cnai.model.weight.v1.tar", blob)
    layer.annotations = {family.filepath_key: "model"}
    config = json.dumps({"descriptor": {}, "config": {}, "modelfs": {
        "type": "layers", "diffIds": ["sha256:" + hashlib.sha256(blob).hexdigest()]}}).encode()
    config_desc = Descriptor.for_bytes(family.config_media_type, config)
    store = LayoutStore(tmp_path / "mp", create=True)
    store.push_blob(layer, io.BytesIO(blob))
    store.push_blob(config_desc, io.BytesIO(config))
    manifest = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                           "artifactType": family.artifact_type,
                           "config": config_desc.model_dump(exclude_none=True),
                           "layers": [layer.model_dump(exclude_none=True)]}).encode()
    store.push_manifest(Descriptor.for_bytes("application/vnd.oci.image.manifest.v1+json", manifest), manifest, "v1")
    return f"oci:{tmp_path / 'mp'}:v1"


def test_into_ollama_a_weight_tar_is_unpacked_and_an_escaping_entry_refused(tmp_path, monkeypatch, capsys):
    from tests.ollama_fixtures import write_gguf

    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path / "ollama-models"))
    gguf = write_gguf(tmp_path / "w.gguf").read_bytes()
    good = _modelpack_with_weight_tar(tmp_path / "good", [("model/w.gguf", gguf), ("model/notes.txt", b"hi\n")])
    assert main(["convert", good, "ollama:w", "--to", "ollama", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["changed"] == [{"field": "layers[model].tar", "kept": False,
                                  "value": "unpacked into 2 raw layer(s): model/w.gguf, model/notes.txt"}]
    assert {"file model/notes.txt", "file model/w.gguf"} <= {loss["field"] for loss in report["lost"]}
    api.pull("ollama:w", str(tmp_path / "pulled"))
    assert (tmp_path / "pulled" / "model.gguf").read_bytes() == gguf
    bad = _modelpack_with_weight_tar(tmp_path / "bad", [("../w.gguf", gguf)])
    code = main(["convert", bad, "ollama:bad", "--to", "ollama"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and len(err) == 1 and err[0].startswith("ocibridge: error: ") and "escapes" in err[0], err
