"""The Ollama bridge as a user drives it: `ocibridge push/pull/copy` with ollama:NAME and
ollama://host/NAME. Bad input gives one error line, exit 1, and nothing written."""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path

import pytest
from ollama_fixtures import gguf_store, snapshot
from support.cli_run import cli
from support.ocilayout import rewrite_manifest

from ocibridge.cli import main
from ocibridge.kinds.ollama import CONFIG_FILE, MANIFEST_FILE
from ocibridge.oci.reference import parse_registry_reference
from ocibridge.stores.registry import open_repository
from tests.support.data import data

TINY = "manifests/registry.ollama.ai/library/tiny/latest"


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
    rewrite_manifest(tmp_path / "layout", "tiny", mutate)
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


# -- the whole path as a user runs it, on the real registry ------------------------------------
REFERENCE_STORE = data("ollama", "safetensors-store")


def _json(capsys, *args: str) -> dict:
    assert main([*args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_reference_store_through_the_registry_with_mounts(registry, tmp_path, capsys, monkeypatch):
    """The reference safetensors store: ollama:NAME → registry → a fresh ollama:NAME, byte for
    byte; served as an Ollama model, `push ollama://…` mounts its blobs and says so."""
    import shutil

    src = tmp_path / "models"
    shutil.copytree(REFERENCE_STORE, src)
    monkeypatch.setenv("OLLAMA_MODELS", str(src))
    repo = f"{registry.host}/st/m{uuid.uuid4().hex[:8]}"
    pushed = _json(capsys, "push", "ollama:tiny-safetensors", f"{repo}:direct")
    assert pushed["blobsCopied"] == 11  # 8 layers + Ollama config + its manifest + ModelPack config
    fresh = tmp_path / "fresh"
    monkeypatch.setenv("OLLAMA_MODELS", str(fresh))
    assert cli(capsys, "pull", f"{repo}:direct", "ollama:tiny-safetensors")[0] == 0
    assert snapshot(fresh) == snapshot(REFERENCE_STORE)

    served = f"ollama://{registry.host}/library/m{uuid.uuid4().hex[:8]}"
    assert cli(capsys, "copy", "ollama:tiny-safetensors", served)[0] == 0
    other = f"{registry.host}/st/m{uuid.uuid4().hex[:8]}:mounted"
    mounted = _json(capsys, "push", served, other)
    # 9 Ollama blobs mounted from the served repository; the ModelPack config, pushed to
    # repo:direct earlier in this process, mounted from there; only ollama-manifest.json is sent
    assert (mounted["blobsMounted"], mounted["blobsSkipped"], mounted["blobsCopied"]) == (10, 0, 1)
    assert mounted["bytesCopied"] < 4096
    back = tmp_path / "back"
    monkeypatch.setenv("OLLAMA_MODELS", str(back))
    assert cli(capsys, "pull", other, "ollama:tiny-safetensors")[0] == 0
    assert snapshot(back) == snapshot(REFERENCE_STORE)


def test_push_between_ollama_places_copies_the_model(registry, tiny, tmp_path, capsys, monkeypatch):
    """Nothing to convert: `push ollama:A ollama://…` / `ollama:B` copies the Ollama model."""
    model = f"m{uuid.uuid4().hex[:8]}"
    assert cli(capsys, "push", "ollama:tiny", f"ollama://{registry.host}/{model}:v1")[0] == 0
    repo = open_repository(parse_registry_reference(f"{registry.host}/library/{model}"))
    assert repo.fetch_bytes(repo.resolve("v1")) == (tiny / TINY).read_bytes()
    assert cli(capsys, "push", "ollama:tiny", "ollama:me/other:v2")[0] == 0
    assert (tiny / "manifests/registry.ollama.ai/me/other/v2").read_bytes() == (tiny / TINY).read_bytes()


def test_pull_an_ollama_model_into_a_directory(tiny, tmp_path, capsys):
    """`pull ollama:NAME DIR` converts as push would: the same files as pulling the artifact."""
    out = tmp_path / "direct"
    assert cli(capsys, "pull", "ollama:tiny", str(out))[0] == 0
    via = tmp_path / "via"
    assert cli(capsys, "pull", _layout_ref(tmp_path, capsys), str(via))[0] == 0
    files = {p.name: p.read_bytes() for p in out.iterdir()}
    assert files == {p.name: p.read_bytes() for p in via.iterdir()}
    assert files[MANIFEST_FILE] == (tiny / TINY).read_bytes()
    assert "model.gguf" in files and "template" in files


def test_a_missing_digest_is_named_plainly(tiny, tmp_path, capsys):
    digest = "sha256:" + "ab" * 32
    code, err = cli(capsys, "push", f"ollama:tiny@{digest}", f"oci:{tmp_path / 'out'}:x")
    assert code == 1 and f"ollama:tiny ({tiny}): no manifest with digest {digest}" in err
    assert not (tmp_path / "out").exists()


def test_without_ollama_models_the_home_store_is_used(tmp_path, capsys, monkeypatch):
    home = tmp_path / "home"
    gguf_store(home / ".ollama" / "models", tmp_path)
    monkeypatch.delenv("OLLAMA_MODELS", raising=False)
    monkeypatch.setenv("HOME", str(home))
    assert cli(capsys, "push", "ollama:tiny", f"oci:{tmp_path / 'layout'}:t")[0] == 0
    assert cli(capsys, "pull", f"oci:{tmp_path / 'layout'}:t", "ollama:copy")[0] == 0
    assert (home / ".ollama/models/manifests/registry.ollama.ai/library/copy/latest").read_bytes() == (
        home / ".ollama/models" / TINY).read_bytes()
