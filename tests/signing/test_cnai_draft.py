"""Artifacts of the early CNAI model draft (issue 54), built in the tests (tests/support/cnaidraft.py):
read everywhere a ModelPack artifact is read, named by validate, converted to the current form."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from huggingface_hub import hf_hub_download
from serving import files_of, point_hub_at, serving
from support.cnaidraft import SAMPLE_FILES, DraftLayer, sample_layers, write_draft

from ocibridge.cli import main


@pytest.fixture
def draft(tmp_path) -> str:
    write_draft(tmp_path / "draft", sample_layers())
    return f"oci:{tmp_path / 'draft'}:draft"


def _json(capsys, argv: list[str]) -> dict:
    assert main([*argv, "--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_pull_gives_exactly_the_files_the_layers_leave(draft, tmp_path, capsys):
    # tar and tar+gzip layers, weight/doc/config artifact types, with and without a filepath,
    # and a later layer whose whiteout deletes shards/stale.bin of an earlier one
    pulled = _json(capsys, ["pull", draft, str(tmp_path / "out")])
    assert files_of(tmp_path / "out") == SAMPLE_FILES
    assert pulled["files"] == sorted(SAMPLE_FILES)
    assert pulled["bytes"] == sum(map(len, SAMPLE_FILES.values()))  # not the deleted file's


def test_links_inside_the_model_are_kept_through_pull_and_convert(tmp_path, capsys):
    write_draft(tmp_path / "d", [DraftLayer({"weights/model.bin": b"w" * 100}, links={"model.bin": "weights/model.bin"},
                                            filepath="weights")])
    assert main(["pull", f"oci:{tmp_path / 'd'}:draft", str(tmp_path / "out"), "-q"]) == 0, capsys.readouterr().err
    assert (tmp_path / "out" / "model.bin").readlink() == Path("weights/model.bin")
    assert main(["convert", "--to", "modelpack", f"oci:{tmp_path / 'd'}:draft", f"oci:{tmp_path / 'new'}:v1",
                 "-q"]) == 0, capsys.readouterr().err
    assert main(["pull", f"oci:{tmp_path / 'new'}:v1", str(tmp_path / "again"), "-q"]) == 0
    assert (tmp_path / "again" / "model.bin").readlink() == Path("weights/model.bin")
    assert (tmp_path / "again" / "weights" / "model.bin").read_bytes() == b"w" * 100


def test_opaque_marker_and_a_file_replacing_a_lower_one(tmp_path, capsys):
    write_draft(tmp_path / "d", [
        DraftLayer({"a/old.txt": b"old", "a/keep/x": b"x", "b.txt": b"one"}),
        DraftLayer({"a/.wh..wh..opq": b"", "a/new.txt": b"new", "b.txt": b"two"}, kind="config", gzip=True),
    ])
    assert main(["pull", f"oci:{tmp_path / 'd'}:draft", str(tmp_path / "out"), "-q"]) == 0, capsys.readouterr().err
    assert files_of(tmp_path / "out") == {"a/new.txt": b"new", "b.txt": b"two"}


@pytest.mark.parametrize("layer", [
    DraftLayer({"../escape.txt": b"x"}),
    DraftLayer({"/etc/evil": b"x"}),
    DraftLayer({}, links={"out": "../../etc/passwd"}),
    DraftLayer({"a": b"x"}, hardlinks={"b": "a"}),
    DraftLayer({".wh...": b""}),
], ids=["climbing", "absolute", "symlink-out", "hardlink", "whiteout-of-parent"])
def test_hostile_tar_entries_are_refused_and_nothing_is_written(layer, tmp_path, capsys):
    # with a filepath, as the draft writes one: read as a changeset, not written whole as that file
    layer.filepath = "weights.bin"
    write_draft(tmp_path / "d", [DraftLayer({"ok.txt": b"fine"}, filepath="ok.txt"), layer])
    out = tmp_path / "out"
    assert main(["pull", f"oci:{tmp_path / 'd'}:draft", str(out), "-q"]) != 0
    err = capsys.readouterr().err
    assert err.startswith("ocibridge: error: ") and "Traceback" not in err
    assert not out.exists() or not any(out.iterdir())
    assert not (tmp_path / "escape.txt").exists()


@pytest.mark.parametrize("later", [
    [DraftLayer({".wh.a": b""}, links={"a": "../.."}, filepath="b"), DraftLayer({"a/evil.txt": b"x"}, filepath="c")],
    [DraftLayer({".wh.a": b"", "a/evil.txt": b"x"}, links={"a": "/tmp"}, filepath="b")],
    [DraftLayer({"a/.wh...": b""}, filepath="b")],
], ids=["dir-then-link-out-then-through", "link-out-and-through-in-one-layer", "whiteout-dotdot-in-a-dir"])
def test_a_directory_replaced_by_a_link_out_is_refused_before_anything_is_written_through(later, tmp_path, capsys):
    """Issue 62, red team: a directory of a lower layer whited out and replaced by a link
    leaving the model, then written through; a whiteout naming ``..`` inside a directory."""
    write_draft(tmp_path / "d", [DraftLayer({"a/x.txt": b"x", "ok.txt": b"fine"}, filepath="a"), *later])
    out = tmp_path / "out"
    assert main(["pull", f"oci:{tmp_path / 'd'}:draft", str(out), "-q"]) == 1
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("ocibridge: error: ") and "Traceback" not in err
    assert not out.exists() or not any(out.iterdir())
    assert not (tmp_path.parent / "evil.txt").exists() and not any(Path("/tmp").glob("evil.txt"))


def test_inspect_shows_each_layers_kind_and_the_metadata(draft, capsys):
    info = _json(capsys, ["inspect", draft])
    assert [(x["kind"], x["variant"]) for x in info["layers"]] == [
        ("weight", "tar"), ("weight", "tar+gzip"), ("doc", "tar"), ("doc", "tar+gzip"), ("weight.config", "tar"),
        ("weight", "tar")]
    assert info["annotations"]["org.cnai.model.name"] == "draft-llama"
    assert "early CNAI draft (2024)" in info["familyName"]
    assert main(["ls", draft.rsplit(":", 1)[0]]) == 0
    assert "draft-llama" in capsys.readouterr().out


def test_validate_names_the_draft_and_strict_refuses_it(draft, capsys):
    assert main(["validate", draft]) == 0
    out = capsys.readouterr().out
    assert "an artifact of the early CNAI draft (2024)" in out and "ocibridge convert --to modelpack" in out
    assert main(["validate", "--strict", draft]) == 1
    assert "(strict) an artifact of the early CNAI draft (2024)" in capsys.readouterr().err


def test_convert_to_modelpack_is_valid_strict_with_the_metadata_and_the_same_files(draft, tmp_path, capsys):
    new = f"oci:{tmp_path / 'new'}:v1"
    done = _json(capsys, ["convert", "--to", "modelpack", draft, new])
    assert any("early CNAI draft" in x["value"] for x in done["lost"])
    assert main(["validate", "--strict", new]) == 0, capsys.readouterr().out
    capsys.readouterr()
    info = _json(capsys, ["inspect", new])
    assert info["config"]["descriptor"]["name"] == "draft-llama"
    assert info["config"]["descriptor"]["createdAt"] == "2024-11-05T10:00:00Z"
    assert info["config"]["descriptor"]["authors"] == ["Draft Authors <draft@example.com>"]
    assert info["config"]["descriptor"]["licenses"] == ["Apache-2.0"]
    assert info["config"]["config"] == {"architecture": "transformer", "format": "safetensors", "paramSize": "8b",
                                        "precision": "bf16", "quantization": "awq"}
    # what has no place in the config stays an annotation, nothing silently dropped
    assert info["annotations"] == {"org.cnai.model.ref.name": "draft-model:1.0",
                                   "org.cnai.model.url": "https://example.com/draft-model"}
    kinds = {x["path"]: x["kind"] for x in info["layers"]}
    assert kinds["README.md"] == kinds["LICENSE"] == "doc"
    assert kinds["config.json"] == kinds["tokenizer.json"] == "weight.config"
    assert kinds["model.safetensors"] == kinds["shards/part-1.bin"] == "weight"
    assert main(["pull", new, str(tmp_path / "out"), "-q"]) == 0
    assert files_of(tmp_path / "out") == SAMPLE_FILES


@pytest.mark.parametrize("family", ["modelkit", "docker-model"])
def test_convert_to_other_families_gives_the_same_files(family, draft, tmp_path, capsys):
    new = f"oci:{tmp_path / family}:v1"
    assert main(["convert", "--to", family, draft, new, "-q"]) == 0, capsys.readouterr().err
    assert main(["pull", new, str(tmp_path / "out"), "-q"]) == 0, capsys.readouterr().err
    assert {k: v for k, v in files_of(tmp_path / "out").items() if k != "Kitfile"} == SAMPLE_FILES


def test_through_a_registry_pull_path_serve_and_convert(draft, tmp_path, capsys, registry, unique_repo, monkeypatch):
    ref = f"{registry.host}/{unique_repo}/acme/draft"
    assert main(["copy", draft, f"{ref}:latest", "-q"]) == 0, capsys.readouterr().err
    assert main(["pull", f"{ref}:latest", str(tmp_path / "out"), "-q"]) == 0, capsys.readouterr().err
    assert files_of(tmp_path / "out") == SAMPLE_FILES
    capsys.readouterr()
    assert main(["path", f"{ref}:latest"]) == 0
    assert files_of(Path(capsys.readouterr().out.strip())) == SAMPLE_FILES
    info = _json(capsys, ["inspect", f"{ref}:latest"])
    assert [x["kind"] for x in info["layers"]][:3] == ["weight", "weight", "doc"]
    assert main(["validate", f"{ref}:latest"]) == 0
    assert "early CNAI draft (2024)" in capsys.readouterr().out
    assert main(["convert", "--to", "modelpack", f"{ref}:latest", f"{ref}:current", "-q"]) == 0
    assert main(["validate", "--strict", f"{ref}:current"]) == 0
    assert main(["pull", f"{ref}:current", str(tmp_path / "again"), "-q"]) == 0
    assert files_of(tmp_path / "again") == SAMPLE_FILES
    with serving([f"{registry.host}/{unique_repo}"]) as served:
        point_hub_at(monkeypatch, served.url, tmp_path / "hf-home" / "hub")
        for name in ("model.safetensors", "shards/part-1.bin", "README.md"):
            assert Path(hf_hub_download("acme/draft", name)).read_bytes() == SAMPLE_FILES[name]


def test_the_format_docs_example_runs_and_gives_its_digests(tmp_path, capsys, monkeypatch):
    doc = (Path(__file__).resolve().parents[2] / "docs" / "formats" / "cnai-draft.md").read_text()
    block = re.search(r"<!-- example[^>]*-->\s*```sh\n(.*?)```", doc, re.S)
    assert block is not None
    monkeypatch.chdir(tmp_path)
    write_draft(tmp_path / "draft", sample_layers())
    out = ""
    for line in block.group(1).splitlines():
        assert main(shlex.split(line)[1:]) == 0, capsys.readouterr().err
        out += capsys.readouterr().out
    for digest in re.findall(r"sha256:[0-9a-f]{64}", doc):
        assert digest in out
    assert "an artifact of the early CNAI draft (2024)" in out
    assert files_of(tmp_path / "files") == SAMPLE_FILES


def test_save_and_load_carry_the_draft_as_it_is_and_it_still_pulls(draft, tmp_path, capsys):
    bundle = tmp_path / "draft.bundle"
    assert main(["save", draft, "-o", str(bundle), "-q"]) == 0, capsys.readouterr().err
    capsys.readouterr()
    [ref] = _json(capsys, ["load", str(bundle), f"oci:{tmp_path / 'loaded'}"])["destinations"]
    assert ref.endswith("@" + json.loads((tmp_path / "draft" / "index.json").read_text())["manifests"][0]["digest"])
    assert main(["pull", ref.split("@")[0], str(tmp_path / "out"), "-q"]) == 0, capsys.readouterr().err
    assert files_of(tmp_path / "out") == SAMPLE_FILES
