"""Mirror jobs that convert into another family say, per artifact, what does not follow."""

from __future__ import annotations

import json

from ocibridge.cli import main
from ocibridge.families import identify
from ocibridge.mirror import load_job, run_job
from ocibridge.targets import open_store_target
from tests.modelcar_images import kserve_modelcar
from tests.signing_keys import key_pair


def test_a_converting_mirror_reports_lost_fields_and_left_behind_signatures(registry, tmp_path, unique_repo,
                                                                             capsys):
    src = kserve_modelcar(tmp_path / "car", {"model.gguf": (b"GGUF" + bytes(60), 0o644),
                                             "README.md": (b"# m\n", 0o644)})
    key, _ = key_pair(tmp_path / "keys")
    assert main(["sign", src, "--key", str(key)]) == 0  # a cosign .sig tag and a bundle referrer
    capsys.readouterr()
    repo = f"{registry.host}/{unique_repo}"
    job = tmp_path / "job.toml"
    job.write_text(f"""
[registries."{registry.host}"]
plain_http = true

[[sync]]
source = "{src}"
target = "{repo}:v1"
accept = ["any"]
convert = "modelpack"
""")
    dry = run_job(load_job(job), dry_run=True)
    assert dry.artifacts[0].referrers_left_behind == 2 and dry.artifacts[0].lost
    summary = run_job(load_job(job))
    assert summary.exit_code == 0, summary.format_text()
    [result] = summary.artifacts
    assert result.status == "copied" and result.referrers_left_behind == 2 and result.signatures == 0
    assert result.lost == ["image.base = 7 entries outside /models (base image layers)",
                           'image.config.Env = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]',
                           'image.config.Cmd = ["sh"]']
    text = summary.format_text().splitlines()
    assert "        lost: image.config.Cmd = [\"sh\"]" in text
    assert any("2 referrer(s) of the original left behind" in line and "modelpack-cnai" in line for line in text)
    as_json = json.loads(json.dumps(summary.as_dict()))
    assert as_json["artifacts"][0]["lost"] == result.lost
    assert as_json["artifacts"][0]["referrersLeftBehind"] == 2
    target = open_store_target(f"{repo}:v1", plain_http=True)
    assert identify(target.store, "v1").family.name == "modelpack"
    # the CLI's --json carries the same per-artifact list
    assert main(["mirror", str(job), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["artifacts"][0]["reason"] == "already mirrored" and out["artifacts"][0]["lost"] == result.lost


def test_a_mirror_converts_into_the_families_exporters_write(registry, tmp_path, unique_repo):
    """convert = "modelcar": the model is exported into a scratch layout, copied to
    the target, and reads back there as that family with the same files; a second run finds it
    mirrored (the export is reproducible), and no scratch folder is left behind."""
    import tempfile

    from tests.modelgen import make_model, tree

    model = make_model(tmp_path / "m")
    src = f"oci:{tmp_path / 'src'}:v1"
    assert main(["push", str(model), src, "-q"]) == 0
    before = set(__import__("pathlib").Path(tempfile.gettempdir()).glob("ocibridge-mirror-*"))
    for family in ("modelcar",):
        repo = f"{registry.host}/{unique_repo}-{family}"
        job = tmp_path / f"{family}.toml"
        job.write_text(f"""
[registries."{registry.host}"]
plain_http = true

[[sync]]
source = "{src}"
target = "{repo}:v1"
convert = "{family}"
""")
        summary = run_job(load_job(job))
        assert summary.exit_code == 0, summary.format_text()
        assert [a.status for a in summary.artifacts] == ["copied"]
        target = open_store_target(f"{repo}:v1", plain_http=True)
        assert identify(target.store, "v1").family.name == family
        out = tmp_path / f"out-{family}"
        assert main(["pull", f"{repo}:v1", str(out), "-q"]) == 0
        expected = {p: (model / p).read_bytes() for p in tree(model)}
        assert {p: (out / p).read_bytes() for p in tree(out)} == expected  # every file back
        again = run_job(load_job(job))
        assert [a.status for a in again.artifacts] == ["skipped"], again.format_text()
    after = set(__import__("pathlib").Path(tempfile.gettempdir()).glob("ocibridge-mirror-*"))
    assert after <= before
