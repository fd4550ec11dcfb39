"""`load bundle.tar oci:DIR` of two models sharing a tag (issue 42): they are loaded under
distinct names (NAME:TAG, as the local store names models); two that would still meet are
refused, naming both and how to load them (a registry prefix keeps each repository)."""

from __future__ import annotations

import json

from ocibridge.cli import main
from tests.modelgen import make_model


def _bundle(tmp_path, capsys, refs: list[str]) -> str:
    for n, ref in enumerate(refs):
        assert main(["push", "-q", str(make_model(tmp_path / f"m{n}", seed=n)), ref]) == 0
    bundle = str(tmp_path / "models.tar")
    assert main(["save", *refs, "-o", bundle, "-q"]) == 0
    capsys.readouterr()
    return bundle


def test_two_models_sharing_a_tag_load_into_a_layout_under_distinct_names(tmp_path, capsys, registry, unique_repo):
    refs = [f"{registry.host}/{unique_repo}/llama:v1", f"{registry.host}/{unique_repo}/tiny:v1"]
    bundle = _bundle(tmp_path, capsys, refs)
    layout = f"oci:{tmp_path}/layout"
    assert main(["load", bundle, layout, "--json", "-q"]) == 0
    loaded = json.loads(capsys.readouterr().out)
    assert [d.split("@")[0] for d in loaded["destinations"]] == [f"{layout}:llama:v1", f"{layout}:tiny:v1"]
    for n, name in enumerate(("llama", "tiny")):
        out = tmp_path / f"back-{name}"
        assert main(["pull", f"{layout}:{name}:v1", str(out), "-q"]) == 0
        assert (out / "model.safetensors").read_bytes() == (tmp_path / f"m{n}" / "model.safetensors").read_bytes()
    # tags that differ keep the layout's plain tags, as before
    bundle2 = _bundle(tmp_path / "two", capsys, [f"{registry.host}/{unique_repo}/solo:v7"])
    assert main(["load", bundle2, f"oci:{tmp_path}/plain", "--json", "-q"]) == 0
    assert json.loads(capsys.readouterr().out)["destinations"][0].startswith(f"oci:{tmp_path}/plain:v7@")


def test_models_that_would_still_meet_are_refused_saying_how(tmp_path, capsys, registry, unique_repo):
    refs = [f"{registry.host}/{unique_repo}/a/model:v1", f"{registry.host}/{unique_repo}/b/model:v1"]
    bundle = _bundle(tmp_path, capsys, refs)
    assert main(["load", bundle, f"oci:{tmp_path}/layout"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and refs[0] in err and refs[1] in err and "registry prefix" in err, err
    assert main(["load", bundle, f"{registry.host}/{unique_repo}/loaded", "--json", "-q"]) == 0  # as it says
    assert len(json.loads(capsys.readouterr().out)["destinations"]) == 2
