"""Found by trying what a hostile artifact can still do after issue 13's first round:

- a pull that replaces files put the old versions aside *inside the staging tree*, under names an
  artifact file can bear (``.replaced/0``): the staged file was overwritten by the user's old file
  (a pull "succeeded" with content matching no digest), and a failed pull lost the user's file;
- ``.carton`` and ``.mlarchive`` exports wrote archives their own readers refuse (a link chain
  leaving ``model/``; a name that is a file and a directory).

Each test snapshots the folder around the target (issue 13, classes 3 and 7)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ocibridge.cli import main
from ocibridge.kinds.carton import format_manifest
from tests.hostile.test_hostile_trees import snapshot
from tests.hostile.test_hostile_trees import titled_artifact as _artifact
from tests.k8s.test_k8s import _tar
from tests.kinds.test_carton import TOML, sha

RAW = "application/vnd.cnai.model.weight.v1.raw"
TAR = "application/vnd.cnai.model.weight.v1.tar"


def test_a_staged_file_named_like_a_backup_keeps_its_own_content(tmp_path, capsys) -> None:
    """'!a' sorts first and replaces the user's file; the artifact's own '.replaced/0' must
    still be what the artifact holds, not the user's old '!a'."""
    ref = _artifact(tmp_path / "l", [(RAW, b"new a", "!a"), (RAW, b"the artifact's", ".replaced/0")])
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "!a").write_text("the user's a")
    assert main(["pull", ref, str(dest), "-q", "--overwrite"]) == 0, capsys.readouterr().err
    assert snapshot(dest) == {"!a": ("file", b"new a"), ".replaced": ("dir", b""),
                              ".replaced/0": ("file", b"the artifact's")}


def test_a_failed_pull_puts_back_a_file_whose_backup_name_an_artifact_file_bears(tmp_path, capsys) -> None:
    ref = _artifact(tmp_path / "l", [(RAW, b"new a", "!a"), (RAW, b"x", ".replaced/0"),
                                     (RAW, b"a file where a directory is", "zz")])
    around = tmp_path / "around"
    dest = around / "dest"
    (dest / "zz").mkdir(parents=True)
    (dest / "!a").write_text("the user's a")
    before = snapshot(around)
    code = main(["pull", ref, str(dest), "-q", "--overwrite"])
    err = capsys.readouterr().err
    assert code == 1 and err == f"ocibridge: error: {dest}/zz is a directory; cannot replace it with a file\n"
    assert snapshot(around) == before


def test_carton_export_refuses_a_link_chain_its_reader_refuses(tmp_path, capsys) -> None:
    """model/d/a -> .. and model/d/b -> a/../x each stay in model/ read lexically; followed
    through a, b reaches the archive root. The export writes nothing."""
    manifest = format_manifest({"carton.toml": sha(TOML), "model/d/x": sha(b"x"), "x": sha(b"x"),
                                "model/d/a": sha(b"x"), "model/d/b": sha(b"x")})
    tar = _tar([("model/d/x", "file", b"x"), ("x", "file", b"x"),
                ("model/d/a", "sym", ".."), ("model/d/b", "sym", "a/../x")])
    ref = _artifact(tmp_path / "l", [(RAW, manifest, "MANIFEST"), (RAW, TOML, "carton.toml"), (TAR, tar, None)])
    out = tmp_path / "around" / "out"
    out.mkdir(parents=True)
    before = snapshot(tmp_path / "around")
    code = main(["pull", ref, str(out / "m.carton"), "-q"])
    err = capsys.readouterr().err
    assert code == 1
    assert err == (f"ocibridge: error: refusing to write {out}/m.carton: ocibridge's own carton reader would "
                   "refuse it: symlink 'model/d/a' → '..' points outside model/\n")
    assert snapshot(tmp_path / "around") == before


def test_mlarchive_export_refuses_a_tree_its_reader_refuses(tmp_path, capsys) -> None:
    manifest = json.dumps({"models": [{"name": "m", "version": "1", "framework": "pytorch"}]}).encode()
    tar = _tar([("models/m/w", "file", b"x"), ("models/m/w/inner", "file", b"y")])
    ref = _artifact(tmp_path / "l", [(RAW, manifest, "manifest.json"), (TAR, tar, None)])
    out = tmp_path / "around" / "out"
    out.mkdir(parents=True)
    before = snapshot(tmp_path / "around")
    code = main(["pull", ref, str(out / "m.mlarchive"), "-q"])
    err = capsys.readouterr().err
    assert code == 1
    assert err == (f"ocibridge: error: refusing to write {out}/m.mlarchive: ocibridge's own mlarchive reader "
                   "would refuse it: 'models/m/w' is both a file and a directory\n")
    assert snapshot(tmp_path / "around") == before


# -- names checked with '^...$' let a trailing newline through ('$' matches before a final '\n') ---
def test_every_name_check_refuses_a_trailing_newline() -> None:

    from ocibridge.errors import OcibridgeError
    from ocibridge.k8s.volume import _check_inputs
    from ocibridge.mirror.semver import parse_version
    from ocibridge.oci.digest import split_digest
    from ocibridge.oci.reference import check_tag, parse_ollama_name, parse_registry_reference

    hex64 = "a" * 64
    refusals = [
        (check_tag, "v1\n"),
        (split_digest, f"sha256:{hex64}\n"),
        (parse_registry_reference, "localhost:5000/repo\n"),
        (parse_ollama_name, "library/tiny:latest\n"),
        (lambda name: _check_inputs(parse_registry_reference(f"localhost:5000/m@sha256:{hex64}"), "/models",
                                       [name], None), "model\n"),
    ]
    for check, value in refusals:
        with pytest.raises(OcibridgeError):
            check(value)
        check(value[:-1])  # the same without the newline is fine
    assert parse_version("1.0.0\n") is None and parse_version("\u0661.0.0") is None  # Arabic-Indic 1
    assert parse_version("1.0.0") is not None


# -- a path that is a file and a directory, or too long: the artifact's path is named, nothing written
CONFLICTS = {
    "tar: file then under it": ([(TAR, _tar([("a", "file", b"x"), ("a/b", "file", b"y")]), None)],
                                "the artifact holds a as a file and as a directory"),
    "raw file, tar directory": ([(RAW, b"x", "d"), (TAR, _tar([("d", "dir", b"")]), None)],
                                "the artifact holds d as a file and as a directory"),
    "two raw layers": ([(RAW, b"x", "d"), (RAW, b"y", "d/e")], "the artifact holds d as a file and as a directory"),
    "name too long": ([(RAW, b"x", "n" * 300)], "n" * 80 + "…: name too long for this file system"),
}


@pytest.mark.parametrize("layers, message", CONFLICTS.values(), ids=CONFLICTS.keys())
def test_a_path_no_tree_can_hold_is_named_as_the_artifact_names_it(tmp_path, capsys, layers, message) -> None:
    ref = _artifact(tmp_path / "l", layers)
    around = tmp_path / "around"
    (around / "dest").mkdir(parents=True)
    before = snapshot(around)
    code = main(["pull", ref, str(around / "dest"), "-q"])
    assert code == 1 and capsys.readouterr().err == f"ocibridge: error: {message}\n"
    assert snapshot(around) == before


def test_a_tar_layer_with_a_root_entry_pulls(tmp_path, capsys) -> None:
    """`tar -C DIR -cf x.tar .` writes './' first: the root is no path to refuse."""
    ref = _artifact(tmp_path / "l", [(TAR, _tar([("./", "dir", b""), ("./f", "file", b"y")]), None)])
    assert main(["pull", ref, str(tmp_path / "out"), "-q"]) == 0, capsys.readouterr().err
    assert snapshot(tmp_path / "out") == {"f": ("file", b"y")}


def test_a_file_landing_between_the_walk_and_the_mkdir_is_named_as_the_parent(tmp_path, monkeypatch) -> None:
    """A raw layer 'd' written by another thread after the parent walk, before the mkdir of a tar's
    'd/': the error names 'd' (CI once saw 'd/x', the name of the entry being staged)."""
    from ocibridge.errors import OcibridgeError
    from ocibridge.model import stagedfiles

    real_mkdir = Path.mkdir

    def racing_mkdir(self: Path, *args, **kwargs) -> None:
        if self == tmp_path / "d" and not self.exists():
            self.write_bytes(b"x")  # the other layer lands now
        real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", racing_mkdir)
    with pytest.raises(OcibridgeError) as caught:
        stagedfiles.prepare_parent(tmp_path, "d/x")
    assert str(caught.value) == "the artifact holds d as a file and as a directory"
