"""Bad .mlarchive input and bad artifacts as the CLI user meets them: one error line, exit 1,
nothing written (no layout, no tag, no output archive, no temporary file)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from support.cli_run import cli
from support.ocilayout import rewrite_manifest

from tests.kinds.test_mlsteam import make_sdk_archive_v2024
from tests.kinds.test_mlsteam_bad import CASES, archive_with


@pytest.mark.parametrize("case", ["not json", "bad framework", "missing model dir",
                                  "loader escape", "dot-dot entry", "absolute entry",
                                  "symlink entry"])
def test_bad_archive_push_writes_nothing(tmp_path, capsys, case):
    kwargs, _error, match = CASES[case]
    archive = archive_with(tmp_path / "bad.mlarchive", **kwargs)
    layout = tmp_path / "layout"
    code, err = cli(capsys, "push", str(archive), f"oci:{layout}:t")
    assert code == 1 and str(archive) in err
    assert not layout.exists()


def test_damaged_entry_data_tags_nothing(tmp_path, capsys):
    weights = bytes(range(256)) * 4000
    archive = archive_with(tmp_path / "c.mlarchive", model_files=[("models/a/w.pt", weights)])
    raw = bytearray(archive.read_bytes())
    at = raw.find(b"models/a/w.pt") + 200  # inside the weight's compressed data
    raw[at:at + 8] = bytes(b ^ 0x5A for b in raw[at:at + 8])
    archive.write_bytes(bytes(raw))
    layout = tmp_path / "layout"
    code, err = cli(capsys, "push", str(archive), f"oci:{layout}:t")
    assert code == 1 and "models/a/w.pt" in err
    index = json.loads((layout / "index.json").read_bytes()) if layout.exists() else {}
    assert not index.get("manifests")
    assert not [p for p in tmp_path.rglob("*") if ".ocibridge-tmp-" in p.name]


def _damage(layout: Path, how: str) -> None:
    """Change the tagged artifact of a layout in one way, keeping the index consistent."""

    def mutate(manifest: dict, blob) -> None:
        weight = max(manifest["layers"], key=lambda la: la["size"])
        if how == "missing blob":
            blob(weight["digest"]).unlink()
        elif how == "digest mismatch":
            data = bytearray(blob(weight["digest"]).read_bytes())
            data[len(data) // 2] ^= 1
            blob(weight["digest"]).write_bytes(bytes(data))
        elif how == "path escape":
            weight["annotations"]["org.cnai.model.filepath"] = "../../evil.pt"
        elif how == "malformed manifest":
            manifest["layers"] = "nope"

    rewrite_manifest(layout, "v1", mutate)


@pytest.mark.parametrize("how,message", [
    ("missing blob", "not found"),
    ("digest mismatch", "content has digest"),
    ("path escape", "escapes its tree"),
    ("malformed manifest", "malformed manifest"),
])
def test_bad_artifact_pull_keeps_the_old_archive(tmp_path, capsys, how, message):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        archive = make_sdk_archive_v2024(tmp_path)
    assert cli(capsys, "push", str(archive), f"oci:{tmp_path / 'layout'}:v1")[0] == 0
    _damage(tmp_path / "layout", how)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    (out_dir / "demo.mlarchive").write_bytes(b"previous export")
    code, err = cli(capsys, "pull", f"oci:{tmp_path / 'layout'}:v1", str(out_dir / "demo.mlarchive"),
                    "--overwrite")  # asked to replace it: a failed export still keeps it
    assert code == 1 and message in err
    assert [p.name for p in out_dir.iterdir()] == ["demo.mlarchive"]
    assert (out_dir / "demo.mlarchive").read_bytes() == b"previous export"
    assert not (tmp_path / "evil.pt").exists()
    code, _ = cli(capsys, "pull", f"oci:{tmp_path / 'layout'}:v1", str(tmp_path / "new/sub/x.mlarchive"))
    assert code == 1 and not (tmp_path / "new").exists()  # no folders left behind either
