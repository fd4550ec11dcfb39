"""The door: one table of source formats. A toy format registered here (tests/toy_format.py
plus one registration line) is read by push, written by pull, offered by --format and found by
content, with no other change; and the table's own formats are recognised in its order."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from ocibridge.cli import main
from ocibridge.errors import InvalidReference, OcibridgeError
from ocibridge.kinds import dispatch, table
from ocibridge.kinds.hf.locator import HubReference
from ocibridge.oci.reference import LayoutReference, OllamaReference, PathReference, RegistryReference
from ocibridge.places.locate import Role, locate, on_registry, on_this_machine

TOY = table.Line("toy", format="toy", source=("tests.toy_format", "ToyFormat"), sniffs=True, suffixes=(".toy",))
FILES = {"model.safetensors": b"\x00weights" * 100, "config.json": b'{"model_type": "toy"}', "README.md": b"# toy\n"}


@pytest.fixture
def toy():
    table.register(TOY)
    yield
    table.unregister("toy")


def _toy_file(path: Path, name: str = "tiny") -> Path:
    doc = {"toy": name, "files": {p: base64.b64encode(d).decode() for p, d in FILES.items()}}
    path.write_text(json.dumps(doc))
    return path


def _files(path: Path) -> dict[str, bytes]:
    doc = json.loads(path.read_bytes())
    return {p: base64.b64decode(d) for p, d in doc["files"].items()}


def test_a_registered_format_is_pushed_and_pulled_end_to_end(toy, tmp_path, capsys):
    src = _toy_file(tmp_path / "tiny.toy")
    layout = f"oci:{tmp_path}/store"
    assert main(["push", str(src), f"{layout}:v1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["blobsCopied"] >= 3
    # back into the same format: the same files
    assert main(["pull", f"{layout}:v1", str(tmp_path / "back.toy")]) == 0
    assert _files(tmp_path / "back.toy") == FILES
    # and into a directory: the toy's files are an ordinary ModelPack artifact
    assert main(["pull", f"{layout}:v1", str(tmp_path / "out")]) == 0
    assert {p: (tmp_path / "out" / p).read_bytes() for p in FILES} == FILES


def test_a_registered_format_is_a_format_choice_and_is_found_by_content(toy, tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["push", "--help"])
    assert "{auto,directory,carton,mlarchive,toy}" in capsys.readouterr().out
    plain = _toy_file(tmp_path / "no-suffix")  # no .toy: found by its first bytes
    assert dispatch.source_format(str(plain)).name == "toy"
    assert main(["push", str(plain), f"oci:{tmp_path}/store:sniffed"]) == 0
    assert main(["pull", f"oci:{tmp_path}/store:sniffed", str(tmp_path / "x.json"), "--format", "toy"]) == 0
    assert _files(tmp_path / "x.json") == FILES


def test_a_format_that_picks_no_files_refuses_include(toy, tmp_path, capsys):
    src = _toy_file(tmp_path / "tiny.toy")
    assert main(["push", str(src), f"oci:{tmp_path}/store:v1"]) == 0
    capsys.readouterr()
    assert main(["pull", f"oci:{tmp_path}/store:v1", str(tmp_path / "b.toy"), "--include", "*.md"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ocibridge: error:") and err.count("\n") == 1
    assert not (tmp_path / "b.toy").exists()


def test_unregistered_the_toy_is_unknown(tmp_path, capsys):
    assert "toy" not in table.format_choices()
    src = _toy_file(tmp_path / "tiny.toy")
    assert dispatch.source_format(str(src)).name == "directory"  # the fallback, which then refuses a file
    assert main(["push", str(src), f"oci:{tmp_path}/store:v1"]) == 1
    assert capsys.readouterr().err.startswith("ocibridge: error:")


def test_registering_a_name_twice_is_refused(toy):
    with pytest.raises(ValueError, match="twice"):
        table.register(TOY)


@pytest.mark.parametrize("text, expected", [
    ("model.carton", "carton"), ("dir.d/Model.CARTON", "carton"), ("x.mlarchive", "mlarchive"),
    ("ollama:tiny", "ollama"), ("ollama://localhost:5000/tiny", "ollama"), ("models/tiny", "directory"),
])
def test_formats_are_recognised_by_scheme_then_suffix_then_fallback(text, expected):
    assert dispatch.source_format(text).name == expected


def _out(text):
    return locate(text, Role.OUTPUT)


def test_pull_destinations_come_from_the_table():
    assert dispatch.destination_format(_out("out.carton")).name == "carton"
    assert dispatch.destination_format(_out("ollama:tiny")).name == "ollama"
    assert dispatch.destination_format(_out("out/dir")).name == "directory"
    assert dispatch.destination_format(_out("localhost:5000/repo:v1")) is None  # a store: a copy
    assert dispatch.destination_format(_out("oci:/srv/store:v1")) is None
    assert dispatch.destination_format(_out("registry.example/x.carton")).name == "carton"  # an archive file
    assert dispatch.destination_format(_out("localhost:5000/repo:v1"), "carton").name == "carton"  # --format wins
    assert dispatch.exports_quietly(_out("out.mlarchive")) and not dispatch.exports_quietly(_out("out/dir"))


@pytest.mark.parametrize("text, role, kind", [
    ("oci:/srv/store:v1", Role.SOURCE, LayoutReference),
    ("registry.example/team/m:v1", Role.SOURCE, RegistryReference),
    ("localhost:5000/m", Role.SOURCE, RegistryReference), ("ollama:tiny:q8", Role.SOURCE, OllamaReference),
    ("ollama://localhost:5000/library/tiny", Role.SOURCE, OllamaReference),
    ("./models/tiny", Role.SOURCE, PathReference),
    ("models/tiny", Role.SOURCE, PathReference), ("registry.example/m.carton", Role.SOURCE, PathReference),
    ("hf:org/name@main", Role.SOURCE, HubReference), ("hf:org/name", Role.MODEL, HubReference),
    ("registry.example/m.carton", Role.MODEL, RegistryReference), ("ubuntu", Role.MODEL, RegistryReference),
    ("models/tiny", Role.OUTPUT, PathReference), ("localhost:5000/m", Role.OUTPUT, RegistryReference),
    ("localhost:5000/m", Role.DESTINATION, RegistryReference), ("mymodel:v2", Role.DESTINATION, LayoutReference),
    ("localhost:5000/m", Role.REGISTRY, RegistryReference), ("ubuntu", Role.JOB, RegistryReference),
])
def test_one_locator_reads_every_scheme_in_every_role(text, role, kind):
    assert isinstance(locate(text, role), kind)


def test_reference_details():
    local = locate("ollama:me/tiny:q8", Role.MODEL)
    assert isinstance(local, OllamaReference) and not local.remote
    assert (local.name.namespace, local.name.model, local.reference) == ("me", "tiny", "q8")
    remote = locate("ollama://localhost:5000/tiny", Role.MODEL)
    assert isinstance(remote, OllamaReference) and remote.remote
    assert str(remote.registry_reference()) == "localhost:5000/library/tiny:latest"
    assert on_registry(remote) and on_registry(locate("localhost:5000/m", Role.MODEL))
    assert not on_registry(local) and not on_registry(locate("oci:/srv/x", Role.MODEL))
    assert on_this_machine(local) and on_this_machine(locate("oci:/srv/x", Role.MODEL))
    assert not on_this_machine(remote) and not on_this_machine(locate("localhost:5000/m", Role.MODEL))
    assert locate("host.example/repo:v1", Role.JOB).names_version
    assert locate("repo@sha256:" + "a" * 64, Role.JOB).names_version
    assert not locate("localhost:5000/repo", Role.JOB).names_version
    assert local.name.names_version and not locate("ollama:tiny", Role.MODEL).name.names_version
    with pytest.raises(InvalidReference):
        locate("ollama:../etc", Role.MODEL)


@pytest.mark.parametrize("text, role", [
    ("hf:org/name", Role.REGISTRY), ("oci:/srv/x:v1", Role.REGISTRY), ("hf:org/name", Role.DESTINATION),
    ("hf:org/name", Role.JOB), ("./models/tiny", Role.MODEL), ("./models/tiny", Role.DESTINATION),
])
def test_a_role_refuses_what_it_cannot_take_in_one_line(text, role):
    with pytest.raises(OcibridgeError) as refused:
        locate(text, role)
    assert "\n" not in str(refused.value) and text in str(refused.value)


def test_an_ollama_model_in_any_store_is_converted_by_what_it_is(tmp_path, monkeypatch, capsys):
    """Not by the ollama: prefix: an Ollama model copied as it is into a layout is converted
    by push (as push ollama:NAME converts it), and goes back into an Ollama store unchanged."""
    from ollama_fixtures import gguf_store, snapshot

    from ocibridge.oci.mediatypes import DOCKER_MANIFEST, Family
    from ocibridge.oci.models import Manifest, parse_manifest_bytes
    from ocibridge.stores.layout import LayoutStore

    src = tmp_path / "models"
    gguf_store(src, tmp_path)
    monkeypatch.setenv("OLLAMA_MODELS", str(src))
    assert main(["copy", "ollama:tiny", f"oci:{tmp_path}/raw:tiny"]) == 0
    assert LayoutStore(tmp_path / "raw").resolve("tiny").mediaType == DOCKER_MANIFEST
    assert main(["push", f"oci:{tmp_path}/raw:tiny", f"oci:{tmp_path}/mp:from-layout"]) == 0
    assert main(["push", "ollama:tiny", f"oci:{tmp_path}/mp:from-ollama"]) == 0
    mp = LayoutStore(tmp_path / "mp")
    converted = []
    for tag in ("from-layout", "from-ollama"):
        desc = mp.resolve(tag)
        manifest = parse_manifest_bytes(mp.fetch_bytes(desc), desc.mediaType)
        assert isinstance(manifest, Manifest) and manifest.artifactType == Family.CNAI.artifact_type
        converted.append({layer.digest for layer in manifest.layers})
    assert converted[0] == converted[1]  # the same blobs either way
    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path / "back"))
    assert main(["pull", f"oci:{tmp_path}/raw:tiny", "ollama:tiny"]) == 0
    assert snapshot(tmp_path / "back") == snapshot(src)


def test_archives_without_their_suffix_are_found_by_content(tmp_path, capsys):
    """A .carton or .mlarchive renamed (a download saved as 'model.bin') is still read as what
    it is; a zip of neither and a file of no format go to the fallback, which refuses a file."""
    import shutil
    import zipfile

    from tests.kinds.test_mlsteam import make_sdk_archive_v2024
    from tests.support.data import data

    carton = shutil.copy(data() / "carton" / "python_runner_doubler.carton", tmp_path / "doubler.bin")
    mlarchive = make_sdk_archive_v2024(tmp_path / "sdk")
    renamed = mlarchive.rename(tmp_path / "demo.zip")
    assert dispatch.source_format(str(carton)).name == "carton"
    assert dispatch.source_format(str(renamed)).name == "mlarchive"
    other = tmp_path / "other.zip"
    with zipfile.ZipFile(other, "w") as z:
        z.writestr("manifest.json.bak", "{}")
    (tmp_path / "text").write_text("PK\x03\x04 but no zip")
    assert dispatch.source_format(str(other)).name == "directory"
    assert dispatch.source_format(str(tmp_path / "text")).name == "directory"
    for path in (carton, renamed):
        assert main(["push", str(path), f"oci:{tmp_path}/store:{Path(path).stem}"]) == 0
    assert main(["push", str(other), f"oci:{tmp_path}/store:other"]) == 1
    assert capsys.readouterr().err.startswith("ocibridge: error:")


def test_the_adding_a_format_recipe_runs_as_written(tmp_path):
    """docs/architecture-kinds.md's example registers a format at run time and round-trips a model."""
    import os
    import re
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    text = (root / "docs" / "architecture-kinds.md").read_text()
    section = text.split("## Adding a kind", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```python\n(.*?)^```", section, re.S | re.M)
    assert blocks
    for code in blocks:
        done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": str(root)}, timeout=120)
        assert done.returncode == 0, done.stderr
        assert "oci:notes-store:tiny@sha256:" in done.stdout
    assert (tmp_path / "back.notes").is_file()


def test_a_broken_model_in_the_ollama_store_is_refused_by_its_reader_not_copied(tmp_path, monkeypatch, capsys):
    """ollama:NAME is the Ollama format's own store: a manifest there that is no Ollama model is
    reported by the Ollama reader, and nothing is copied as it is."""
    import hashlib

    models = tmp_path / "models"
    blob = b"not an ollama layer"
    digest = "sha256:" + hashlib.sha256(blob).hexdigest()
    (models / "blobs").mkdir(parents=True)
    (models / "blobs" / digest.replace(":", "-")).write_bytes(blob)
    manifest = {"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
                "layers": [{"mediaType": "application/vnd.example.other", "digest": digest, "size": len(blob)}]}
    folder = models / "manifests" / "registry.ollama.ai" / "library" / "odd"
    folder.mkdir(parents=True)
    (folder / "latest").write_text(json.dumps(manifest))
    monkeypatch.setenv("OLLAMA_MODELS", str(models))
    assert main(["push", "ollama:odd", f"oci:{tmp_path}/store:odd"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ocibridge: error:") and err.count("\n") == 1 and "vnd.example.other" in err
    assert not (tmp_path / "store").exists()
