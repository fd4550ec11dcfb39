"""SDK-built .mlarchive files through the real registry (docker-registry): push, export, same
files; by the API and by the CLI as a user types it."""

from __future__ import annotations

import json
import uuid

import pytest
from mlsteam_model_sdk.core.dev.archive import build_archive

from ocibridge.errors import NotFound
from ocibridge.kinds.mlsteam import (
    ANNOTATION_MODELS,
    ANNOTATION_SERVICES,
    export_mlarchive,
    read_mlarchive,
)
from ocibridge.model.builder import ARTIFACT_TAG, build
from ocibridge.places.locate import open_target as open_store_target
from ocibridge.transfer.copy import copy
from tests.kinds.test_mlsteam import make_sdk_archive_v2023, make_sdk_archive_v2024, zip_files
from tests.kinds.test_mlsteam_bad import archive_with


def test_sdk_archives_round_trip_through_the_registry(registry, tmp_path):
    repo = f"mlsteam/{uuid.uuid4().hex[:8]}"
    for tag, make in (("v2024", make_sdk_archive_v2024), ("v2023", make_sdk_archive_v2023)):
        archive = make(tmp_path / tag)
        art = build(read_mlarchive(archive))
        target = open_store_target(f"{registry.host}/{repo}:{tag}", for_write=True)
        copy(art, ARTIFACT_TAG, target.store, target.tag)

        reader = open_store_target(f"{registry.host}/{repo}:{tag}")
        desc = reader.store.resolve(reader.reference)
        assert desc.digest == art.descriptor.digest  # same manifest digest as built locally
        out = tmp_path / f"{tag}-back.mlarchive"
        export_mlarchive(reader.store, desc, out)
        assert zip_files(out) == zip_files(archive)
        # A second build of the same archive is already there: same digest, nothing new.
        assert build(read_mlarchive(archive)).descriptor.digest == desc.digest


def _cli(capsys, *args: str) -> tuple[int, str, str]:
    from ocibridge.cli import main

    code = main(list(args))
    out, err = capsys.readouterr()
    if code:
        assert err.startswith("ocibridge: error: ") and err.count("\n") == 1, err
    return code, out, err


def test_cli_push_and_pull_through_the_registry(registry, tmp_path, capsys):
    """What a user types: `ocibridge push x.mlarchive HOST/REPO:TAG`, `ocibridge pull … y.mlarchive`;
    the same files come back, and pushing the export again gives the same artifact."""
    repo = f"{registry.host}/mlsteam/{uuid.uuid4().hex[:8]}"
    for tag, make in (("v2024", make_sdk_archive_v2024), ("v2023", make_sdk_archive_v2023)):
        archive = make(tmp_path / tag)
        code, out, _ = _cli(capsys, "push", str(archive), f"{repo}:{tag}", "--json")
        assert code == 0
        digest = json.loads(out)["digest"]
        back = tmp_path / "pulled" / f"{tag}.mlarchive"
        assert _cli(capsys, "pull", f"{repo}:{tag}", str(back))[0] == 0
        assert zip_files(back) == zip_files(archive)
        code, out, _ = _cli(capsys, "push", str(back), f"{repo}:{tag}-again", "--json")
        assert code == 0 and json.loads(out)["digest"] == digest


def test_unknown_manifest_fields_survive_the_registry(registry, tmp_path, capsys):
    """Fields no schema knows (the SDK's own validator refuses them, its archive builder zips
    them): read, pushed, pulled back byte for byte; per-model ones are in the annotation too."""
    proj = tmp_path / "proj"
    (proj / "hooks").mkdir(parents=True)
    (proj / "hooks" / "load.py").write_text("def load(env):\n    return env\n")
    (proj / "w.pt").write_bytes(b"\1" * 5000)
    manifest = {
        "schema": "v2024.1", "name": "future", "version": "2", "x_top": {"a": [1, 2]},
        "models": [{"name": "a", "framework": "pytorch", "loader": "load.py", "x_model": "keep"}],
        "services": [{"name": "main", "predictor": {"built-in": "echo"}, "x_service": True}],
    }
    (proj / "manifest.json").write_text(json.dumps(manifest, indent=3))
    archive = tmp_path / "future.mlarchive"
    build_archive(archive_file=str(archive), submodels=[("a", str(proj / "w.pt"))],
                  manifest_file=str(proj / "manifest.json"), src_dir=None,
                  hooks_dir=str(proj / "hooks"), preserve_model_files_in_src=False,
                  preserve_hooks_dir_in_src=False, default_exclude_patterns=None)
    ref = f"{registry.host}/mlsteam/{uuid.uuid4().hex[:8]}:future"
    assert _cli(capsys, "push", str(archive), ref)[0] == 0
    code, out, _ = _cli(capsys, "inspect", ref, "--json")
    assert code == 0
    annotations = json.loads(out)["annotations"]
    assert json.loads(annotations[ANNOTATION_MODELS])[0]["x_model"] == "keep"
    assert json.loads(annotations[ANNOTATION_SERVICES])[0]["x_service"] is True
    back = tmp_path / "back.mlarchive"
    assert _cli(capsys, "pull", ref, str(back))[0] == 0
    assert zip_files(back) == zip_files(archive)
    assert json.loads(zip_files(back)["manifest.json"])["x_top"] == {"a": [1, 2]}


def test_bad_archive_pushed_to_the_registry_tags_nothing(registry, tmp_path, capsys):
    """Entry data damaged after a good first file: one error line, exit 1, no tag (the blobs
    sent before the failure stay unreferenced, as on any registry)."""
    weights = bytes(range(256)) * 4000
    archive = archive_with(tmp_path / "c.mlarchive",
                           model_files=[("models/a/a.pt", b"a" * 100), ("models/a/w.pt", weights)])
    raw = bytearray(archive.read_bytes())
    at = raw.find(b"models/a/w.pt") + 200  # inside the weight's compressed data
    raw[at:at + 8] = bytes(b ^ 0x5A for b in raw[at:at + 8])
    archive.write_bytes(bytes(raw))
    repo = f"mlsteam/{uuid.uuid4().hex[:8]}"
    code, _, err = _cli(capsys, "push", str(archive), f"{registry.host}/{repo}:bad")
    assert code == 1 and "models/a/w.pt: corrupt entry data" in err
    store = open_store_target(f"{registry.host}/{repo}:bad").store
    with pytest.raises(NotFound):
        store.resolve("bad")
