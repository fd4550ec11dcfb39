"""The Ollama bridge as a user drives it: `ocibridge push/pull/copy` with ollama:NAME and
ollama://host/NAME. Bad input gives one error line, exit 1, and nothing written."""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path

import pytest
from ollama_fixtures import gguf_store, snapshot

from ocibridge.cli import main
from ocibridge.formats.ollama import CONFIG_FILE, MANIFEST_FILE
from ocibridge.oci.reference import parse_registry_reference
from ocibridge.stores.registry import open_repository

TINY = "manifests/registry.ollama.ai/library/tiny/latest"


def cli(capsys, *args: str) -> tuple[int, str]:
    """Exit code and stderr; a failure must be exactly one line."""
    code = main(list(args))
    err = capsys.readouterr().err
    if code:
        assert err.startswith("ocibridge: error: ") and err.count("\n") == 1, err
    return code, err


@pytest.fixture
def tiny(tmp_path, monkeypatch) -> Path:
    """An Ollama store holding library/tiny:latest; OLLAMA_MODELS points at it."""
    src = tmp_path / "models"
    gguf_store(src, tmp_path)
    monkeypatch.setenv("OLLAMA_MODELS", str(src))
    return src


def _layout_ref(tmp_path: Path, capsys) -> str:
    ref = f"oci:{tmp_path / 'layout'}:tiny"
    assert cli(capsys, "push", "ollama:tiny", ref)[0] == 0
    return ref


def test_directory_pull_keeps_the_ollama_files_and_round_trips_byte_identical(
        tiny, tmp_path, capsys, monkeypatch):
    """Deliberate: a directory pull writes ollama-manifest.json and ollama-config.json, so the
    directory pushed again restores the very same Ollama model (manifest and blob files)."""
    ref = _layout_ref(tmp_path, capsys)
    out = tmp_path / "dir"
    assert cli(capsys, "pull", ref, str(out))[0] == 0
    assert (out / MANIFEST_FILE).read_bytes() == (tiny / TINY).read_bytes()
    assert {MANIFEST_FILE, CONFIG_FILE, "model.gguf", "template"} <= {p.name for p in out.iterdir()}
    assert cli(capsys, "push", str(out), f"oci:{tmp_path / 'again'}:x")[0] == 0
    fresh = tmp_path / "fresh"
    monkeypatch.setenv("OLLAMA_MODELS", str(fresh))
    assert cli(capsys, "pull", f"oci:{tmp_path / 'again'}:x", "ollama:tiny")[0] == 0
    assert snapshot(fresh) == snapshot(tiny)
    # Edited in the directory, the model no longer matches ollama-manifest.json: told what to do.
    (out / "template").write_text("{{ .Prompt }}")
    assert cli(capsys, "push", str(out), f"oci:{tmp_path / 'edited'}:x")[0] == 0
    code, err = cli(capsys, "pull", f"oci:{tmp_path / 'edited'}:x", "ollama:edited")
    assert code == 1 and f"remove {MANIFEST_FILE}" in err
    (out / MANIFEST_FILE).unlink()
    (out / CONFIG_FILE).unlink()
    assert cli(capsys, "push", str(out), f"oci:{tmp_path / 'edited'}:y")[0] == 0
    assert cli(capsys, "pull", f"oci:{tmp_path / 'edited'}:y", "ollama:edited")[0] == 0
    written = json.loads((fresh / "manifests/registry.ollama.ai/library/edited/latest").read_bytes())
    template = next(la for la in written["layers"] if la["mediaType"].endswith(".template"))
    assert template["digest"] == "sha256:" + hashlib.sha256(b"{{ .Prompt }}").hexdigest()


@pytest.mark.parametrize("command", ["copy", "push"])
def test_modelpack_artifact_into_local_ollama_points_to_pull(tiny, tmp_path, capsys, monkeypatch,
                                                             command):
    ref = _layout_ref(tmp_path, capsys)
    dest = tmp_path / "dest"
    monkeypatch.setenv("OLLAMA_MODELS", str(dest))
    code, err = cli(capsys, command, ref, "ollama:copied")
    assert code == 1
    assert "takes Ollama models only" in err and "ocibridge pull REF ollama:copied" in err
    assert not dest.exists()
    assert cli(capsys, "pull", ref, "ollama:copied")[0] == 0  # the supported path
    assert (dest / "manifests/registry.ollama.ai/library/copied/latest").read_bytes() == (
        tiny / TINY).read_bytes()


def test_model_directory_pushed_to_ollama_is_refused_before_writing(tiny, tmp_path, capsys,
                                                                     monkeypatch):
    model = tmp_path / "plain"
    model.mkdir()
    (model / "model.gguf").write_bytes(next((tiny / "blobs").iterdir()).read_bytes())
    dest = tmp_path / "dest"
    monkeypatch.setenv("OLLAMA_MODELS", str(dest))
    code, err = cli(capsys, "push", str(model), "ollama:plain")
    assert code == 1 and "ocibridge pull REF ollama:plain" in err
    assert not dest.exists()


def test_ollama_registry_destination_takes_ollama_models_only(registry, tiny, tmp_path, capsys):
    ref = _layout_ref(tmp_path, capsys)
    model = f"m{uuid.uuid4().hex[:8]}"
    dest = f"ollama://{registry.host}/{model}:copied"
    code, err = cli(capsys, "copy", ref, dest)
    assert code == 1 and f"ocibridge pull REF {dest}" in err
    # Already in that repository (pushed as ModelPack on purpose): tagging it is refused too.
    assert cli(capsys, "copy", ref, f"{registry.host}/library/{model}:modelpack")[0] == 0
    code, err = cli(capsys, "copy", ref, dest)
    assert code == 1 and "not an Ollama model manifest" in err
    repo = open_repository(parse_registry_reference(f"{registry.host}/library/{model}"))
    assert repo.tags() == ["modelpack"]
    # An Ollama model goes through copy; a ModelPack artifact through pull.
    assert cli(capsys, "copy", "ollama:tiny", f"ollama://{registry.host}/{model}:ollama")[0] == 0
    assert cli(capsys, "pull", ref, f"ollama://{registry.host}/{model}:pulled")[0] == 0
    for tag in ("ollama", "pulled"):
        assert repo.fetch_bytes(repo.resolve(tag)) == (tiny / TINY).read_bytes()


def _damage_layout(layout: Path, mutate) -> None:
    """Rewrite the tagged manifest with ``mutate(manifest, blob_path)``; fix the index."""
    index = json.loads((layout / "index.json").read_bytes())
    entry = next(m for m in index["manifests"]
                 if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == "tiny")

    def blob(digest: str) -> Path:
        return layout / "blobs" / "sha256" / digest.split(":")[1]

    manifest = json.loads(blob(entry["digest"]).read_bytes())
    mutate(manifest, blob)
    data = json.dumps(manifest).encode()
    entry["digest"], entry["size"] = "sha256:" + hashlib.sha256(data).hexdigest(), len(data)
    blob(entry["digest"]).write_bytes(data)
    (layout / "index.json").write_text(json.dumps(index))


def _model_layer(manifest: dict) -> dict:
    return next(la for la in manifest["layers"]
                if la["annotations"]["org.cnai.model.filepath"] == "model.gguf")


def _escape(m, blob):
    _model_layer(m)["annotations"]["org.cnai.model.filepath"] = "../model.gguf"


def _absolute(m, blob):
    _model_layer(m)["annotations"]["org.cnai.model.filepath"] = "/tmp/model.gguf"


def _missing(m, blob):
    blob(_model_layer(m)["digest"]).unlink()


def _corrupt(m, blob):
    path = blob(_model_layer(m)["digest"])
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))


def _shape(m, blob):
    m["layers"] = {"not": "a list"}


BAD_ARTIFACTS = {
    "path escape": (_escape, "escapes its tree"),
    "absolute path": (_absolute, "absolute layer file path"),
    "missing blob": (_missing, "not found"),
    "digest mismatch": (_corrupt, "content has digest"),
    "malformed manifest": (_shape, "malformed manifest"),
}


@pytest.mark.parametrize("case", list(BAD_ARTIFACTS))
def test_bad_artifact_pulled_into_ollama(tiny, tmp_path, capsys, monkeypatch, case):
    mutate, message = BAD_ARTIFACTS[case]
    ref = _layout_ref(tmp_path, capsys)
    _damage_layout(tmp_path / "layout", mutate)
    dest = tmp_path / "dest"
    monkeypatch.setenv("OLLAMA_MODELS", str(dest))
    code, err = cli(capsys, "pull", ref, "ollama:tiny")
    assert code == 1 and message in err
    assert not dest.exists()


def test_damaged_ollama_model_is_named_as_such(tiny, tmp_path, capsys):
    """A model blob whose bytes changed: reported as a digest mismatch of that blob (not as
    whatever the GGUF header parser trips over), and no artifact is written."""
    manifest = json.loads((tiny / TINY).read_bytes())
    model = manifest["layers"][0]
    path = tiny / "blobs" / model["digest"].replace(":", "-")
    data = bytearray(path.read_bytes())
    data[30:40] = b"\xff" * 10  # inside the header's key/value section
    path.write_bytes(bytes(data))
    code, err = cli(capsys, "push", "ollama:tiny", f"oci:{tmp_path / 'out'}:x")
    assert code == 1 and f"blob {model['digest']}: content has digest" in err
    assert not (tmp_path / "out").exists()
    path.write_bytes(bytes(data[:-5]))  # now shorter than the manifest says
    code, err = cli(capsys, "push", "ollama:tiny", f"oci:{tmp_path / 'out'}:x")
    assert code == 1 and f"is not the {model['size']} bytes the manifest gives" in err
    assert not (tmp_path / "out").exists()
