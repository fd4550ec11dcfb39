"""Pull into a non-empty directory (refuse / --overwrite / -k) and partial pulls with
--include/--exclude (issue 18), on a layout and on a real registry."""

from __future__ import annotations

import json

import pytest

from ocibridge.cli import main
from ocibridge.core.overwrite import OnExisting, WouldOverwrite, plan_commit
from ocibridge.core.pathfilter import PathFilter
from tests.modelgen import make_model, tree


def pull_json(capsys, *args: str) -> tuple[int, dict | None, str]:
    code = main(["pull", *args, "--json", "-q"])
    captured = capsys.readouterr()
    return code, (json.loads(captured.out) if code == 0 else None), captured.err


@pytest.fixture
def pushed(tmp_path, capsys):
    model = make_model(tmp_path / "m")
    ref = f"oci:{tmp_path}/layout:v1"
    # docs grouped into one tar layer, so --include also has tar entries to pick from
    assert main(["push", str(model), ref, "-q", "--group", "doc", "--group", "code"]) == 0
    capsys.readouterr()
    return model, ref


def test_pull_refuses_to_replace_a_differing_file_and_writes_nothing(tmp_path, capsys, pushed):
    model, ref = pushed
    out = tmp_path / "out"
    out.mkdir()
    (out / "config.json").write_text("my edits\n")
    code, _, err = pull_json(capsys, ref, str(out))
    assert code == 1 and "config.json: already there with other content" in err and "--overwrite" in err
    assert sorted(p.name for p in out.iterdir()) == ["config.json"]  # all or nothing
    assert (out / "config.json").read_text() == "my edits\n"


def test_keep_old_files_keeps_them_and_overwrite_replaces_them(tmp_path, capsys, pushed):
    model, ref = pushed
    out = tmp_path / "out"
    out.mkdir()
    (out / "config.json").write_text("my edits\n")
    (out / "notes.txt").write_text("mine\n")
    code, result, err = pull_json(capsys, ref, str(out), "-k")
    assert code == 0, err
    assert result["kept"] == ["config.json"]
    assert (out / "config.json").read_text() == "my edits\n" and (out / "notes.txt").exists()
    assert (out / "model.safetensors").read_bytes() == (model / "model.safetensors").read_bytes()
    code, result, err = pull_json(capsys, ref, str(out), "--overwrite")
    assert code == 0 and result["kept"] == []
    assert {k: v for k, v in tree(out).items() if k != "notes.txt"} == tree(model)


def test_a_re_pull_of_the_same_content_needs_no_flag(tmp_path, capsys, pushed):
    _, ref = pushed
    assert pull_json(capsys, ref, str(tmp_path / "out"))[0] == 0
    code, result, err = pull_json(capsys, ref, str(tmp_path / "out"))
    assert code == 0 and result["kept"] == [], err


def test_overwrite_and_keep_together_are_a_usage_mistake(tmp_path, capsys, pushed):
    _, ref = pushed
    with pytest.raises(SystemExit) as exit_info:
        main(["pull", ref, str(tmp_path / "o"), "--overwrite", "-k"])
    assert exit_info.value.code == 2


def test_include_exclude_pick_raw_layers_and_tar_entries(tmp_path, capsys, pushed):
    model, ref = pushed
    out = tmp_path / "out"
    code, result, err = pull_json(capsys, ref, str(out), "--include", "*.json", "--include", "README.md",
                                  "--exclude", "tokenizer.json")
    assert code == 0, err
    assert sorted(result["files"]) == ["README.md", "config.json"]  # README.md is a tar (doc) entry
    assert sorted(tree(out)) == ["README.md", "config.json"]
    assert "model.safetensors" in result["skipped"] and "scripts/run.sh" in result["skipped"]
    code, result, err = pull_json(capsys, ref, str(tmp_path / "w"), "--include", "weights")
    assert sorted(tree(tmp_path / "w")) == ["weights/part-2.bin"]


def test_include_into_an_archive_is_a_usage_mistake(tmp_path, capsys, pushed):
    _, ref = pushed
    assert main(["pull", ref, str(tmp_path / "x.carton"), "--include", "*.json"]) == 2
    assert "--include/--exclude" in capsys.readouterr().err


def test_partial_pull_from_a_registry_fetches_only_matching_layers(
        tmp_path, capsys, registry, unique_repo, fault_proxy):
    model = make_model(tmp_path / "m")
    ref = f"{registry.host}/{unique_repo}:v1"
    assert main(["push", str(model), ref, "-q"]) == 0
    capsys.readouterr()
    proxied = f"{fault_proxy.host}/{unique_repo}:v1"
    code, result, err = pull_json(capsys, proxied, str(tmp_path / "out"), "--include", "config.json")
    assert code == 0, err
    blob_gets = fault_proxy.requests_matching("GET", r"/blobs/sha256:")
    assert sorted(tree(tmp_path / "out")) == ["config.json"]
    sizes = sorted(r.response_bytes for r in blob_gets)
    assert len(blob_gets) == 1 and sizes[0] < 1000  # the config.json layer, not the 200 kB weights


def test_plan_commit_and_path_filter_units(tmp_path):
    staging, out = tmp_path / "s", tmp_path / "o"
    staging.mkdir()
    out.mkdir()
    for name, staged, existing in [("same", b"a", b"a"), ("diff", b"a", b"b"), ("new", b"n", None)]:
        (staging / name).write_bytes(staged)
        if existing is not None:
            (out / name).write_bytes(existing)
    with pytest.raises(WouldOverwrite) as refused:
        plan_commit(staging, out, ["same", "diff", "new"], OnExisting.REFUSE)
    assert refused.value.paths == ["diff"]
    keep = plan_commit(staging, out, ["same", "diff", "new"], OnExisting.KEEP)
    assert (keep.write, keep.unchanged, keep.kept) == (["new"], ["same"], ["diff"])
    over = plan_commit(staging, out, ["same", "diff", "new"], OnExisting.OVERWRITE)
    assert over.write == ["diff", "new"]
    select = PathFilter.of(["weights/*", "*.json"], ["secret.json"])
    assert select is not None and PathFilter.of() is None
    assert [p for p in ["weights/a.bin", "x/c.json", "secret.json", "README.md"] if select(p)] == [
        "weights/a.bin", "x/c.json"]
