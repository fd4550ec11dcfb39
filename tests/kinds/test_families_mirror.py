"""Mirror jobs that convert into another family say, per artifact, what does not follow."""

from __future__ import annotations

import json

from ocibridge.cli import main
from ocibridge.kinds import identify
from ocibridge.mirror import load_job, run_job
from ocibridge.places.locate import open_target as open_store_target
from tests.modelcar_images import kserve_modelcar
from tests.signing_keys import key_pair
from tests.support.mirror_jobs import mirror_job


def test_a_converting_mirror_reports_lost_fields_and_left_behind_signatures(registry, tmp_path, unique_repo,
                                                                             capsys):
    src = kserve_modelcar(tmp_path / "car", {"model.gguf": (b"GGUF" + bytes(60), 0o644),
                                             "README.md": (b"# m\n", 0o644)})
    key, _ = key_pair(tmp_path / "keys")
    assert main(["sign", src, "--key", str(key)]) == 0  # a cosign .sig tag and a bundle referrer
    capsys.readouterr()
    repo = f"{registry.host}/{unique_repo}"
    job = mirror_job(tmp_path / "job.toml", {"source": src, "target": f"{repo}:v1", "accept": ["any"],
                                             "convert": "modelpack"}, plain_http=[registry.host])
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


def test_a_mirror_converts_into_the_families_exporters_write(registry, tmp_path, unique_repo, monkeypatch):
    """convert = "modelcar": the model is exported into a scratch layout, copied to
    the target, and reads back there as that family with the same files; a second run finds it
    mirrored (the export is reproducible), and no scratch folder is left behind."""
    import tempfile

    from tests.modelgen import make_model, tree

    # a temporary folder of this test's own: another test's mirror, in another pytest-xdist
    # worker at the same time, makes its scratch folder in the machine's
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    model = make_model(tmp_path / "m")
    src = f"oci:{tmp_path / 'src'}:v1"
    assert main(["push", str(model), src, "-q"]) == 0
    before = set(__import__("pathlib").Path(tempfile.gettempdir()).glob("ocibridge-mirror-*"))
    for family in ("modelcar",):
        repo = f"{registry.host}/{unique_repo}-{family}"
        job = mirror_job(tmp_path / f"{family}.toml", {"source": src, "target": f"{repo}:v1", "convert": family},
                         plain_http=[registry.host])
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


def _gguf_model_pushed(registry, tmp_path, unique_repo, license_text: str | None = None):
    """A model directory holding a small, real GGUF (architecture, tokenizer, F16 tensors), a
    README and maybe a LICENSE, pushed as ``{registry}/{unique_repo}-src:v1``: (directory, GGUF
    path, source)."""
    from tests.ollama_fixtures import write_gguf

    model = tmp_path / "tiny"
    model.mkdir()
    gguf = write_gguf(model / "tiny.gguf")
    (model / "README.md").write_text("# tiny\n")
    if license_text is not None:
        (model / "LICENSE").write_text(license_text)
    src = f"{registry.host}/{unique_repo}-src"
    assert main(["push", str(model), f"{src}:v1", "-q"]) == 0
    return model, gguf, src


def test_a_sharded_mirror_converts_every_tag_into_an_ollama_model(registry, tmp_path, unique_repo, monkeypatch):
    """convert = "ollama", end to end: a GGUF model under two tags (a ModelPack artifact and a
    ModelKit) mirrored by two shards into Ollama models; the merged report lists what Ollama
    cannot hold; the target reads as Ollama models whose GGUF is the file pushed, byte for byte,
    and installs into an Ollama store; a second run finds everything mirrored."""
    import ocibridge
    from ocibridge.mirror.shard import parse_shard

    model, gguf, src = _gguf_model_pushed(registry, tmp_path, unique_repo, license_text="MIT License\n")
    assert main(["push", str(model), f"{src}:v2", "-q", "--to", "modelkit", "--description", "two"]) == 0
    target = f"{registry.host}/{unique_repo}-ollama"
    job = mirror_job(tmp_path / "job.toml", {"source": src, "target": target, "accept": ["any"], "convert": "ollama"})
    dry = run_job(load_job(job), dry_run=True)
    assert [a.status for a in dry.artifacts] == ["planned", "planned"], dry.format_text()
    assert not open_store_target(f"{target}:v1", plain_http=True).store.tags()  # a dry run writes nothing
    reports = []
    for i in range(2):
        summary = run_job(load_job(job), shard=parse_shard(f"{i}/2"))
        assert summary.exit_code == 0, summary.format_text()
        path = tmp_path / f"shard-{i}.json"
        path.write_text(json.dumps(summary.as_dict()))
        reports.append(path)
    merged = ocibridge.mirror_merge(reports)
    assert merged.exit_code == 0, merged.format_text()
    done = merged.as_dict()["artifacts"]
    assert sorted(a["status"] for a in done) == ["copied", "copied"]
    for artifact in done:  # what Ollama has no place for, per artifact
        assert "file README.md = 7 bytes" in artifact["lost"], artifact["lost"]
    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path / "ollama-models"))
    store = open_store_target(f"{target}:v1", plain_http=True).store
    for tag in ("v1", "v2"):
        assert identify(store, tag).family.name == "ollama"
        assert main(["pull", f"{target}:{tag}", f"ollama:tiny:{tag}", "-q"]) == 0
        layers = json.loads(store.fetch_bytes(store.resolve(tag)))["layers"]
        [weights] = [layer for layer in layers if layer["mediaType"] == "application/vnd.ollama.image.model"]
        blob = tmp_path / "ollama-models" / "blobs" / weights["digest"].replace(":", "-")
        assert blob.read_bytes() == gguf.read_bytes()
    again = run_job(load_job(job))
    assert [a.status for a in again.artifacts] == ["skipped", "skipped"], again.format_text()


def _uploads_and_mounts(log_text: str, repository: str) -> tuple[set[str], set[str]]:
    """(digests uploaded to ``repository``: the PUT closing an upload, digests mounted into it:
    the POST answered 201), read from the registry's own access log."""
    import re
    from urllib.parse import unquote

    uploaded, mounted = set(), set()
    for line in log_text.splitlines():
        method = re.search(r"http\.request\.method=(\w+)", line)
        uri = re.search(r'http\.request\.uri="([^"]*)"', line)
        status = re.search(r"http\.response\.status=(\d+)", line)
        if not (method and uri and status) or not uri.group(1).startswith(f"/v2/{repository}/blobs/uploads/"):
            continue
        query = unquote(uri.group(1))
        if method.group(1) == "PUT" and status.group(1) == "201":
            uploaded.update(re.findall(r"digest=(sha256:[0-9a-f]{64})", query))
        if method.group(1) == "POST" and status.group(1) == "201":
            mounted.update(re.findall(r"mount=(sha256:[0-9a-f]{64})", query))
    return uploaded, mounted


def test_a_converting_dry_run_within_one_registry_plans_the_mounts_the_run_makes(registry, tmp_path, unique_repo):
    """convert = "ollama" into another repository of the same registry: the GGUF keeps its
    digest, so the run mounts it from the source repository instead of uploading it again, and
    the dry run plans exactly that, blob by blob (it used to plan every blob as sent), with the
    bytes it plans to send equal to the bytes the run sends. The registry's access log agrees."""
    _, gguf, src = _gguf_model_pushed(registry, tmp_path, unique_repo)
    target_repo = f"{unique_repo}-ollama"
    job = mirror_job(tmp_path / "job.toml", {"source": f"{src}:v1", "target": f"{registry.host}/{target_repo}:v1",
                                             "convert": "ollama"})
    dry = run_job(load_job(job), dry_run=True)
    [planned] = dry.artifacts
    actions = {digest: action for digest, _, action in planned.blob_actions}
    weights = "sha256:" + __import__("hashlib").sha256(gguf.read_bytes()).hexdigest()
    assert actions[weights] == "mount", dry.format_text()
    assert planned.bytes_to_mount == gguf.stat().st_size
    assert [a for d, a in actions.items() if d != weights] == ["send"]  # the Ollama config is new
    assert "mount" in dry.format_text()

    log = getattr(registry, "log_file", None)
    logged = log.read_text(errors="replace") if log is not None else ""
    summary = run_job(load_job(job))
    assert summary.exit_code == 0, summary.format_text()
    [done] = summary.artifacts
    assert done.blobs_mounted == planned.blobs_to_mount == 1
    assert done.blobs_copied == planned.blobs_planned and done.bytes_copied == planned.bytes_planned
    if log is not None:  # a registry this suite runs: its own record of what reached it
        uploaded, mounted = _uploads_and_mounts(log.read_text(errors="replace")[len(logged):], target_repo)
        assert mounted == {weights}
        assert uploaded == {d for d, a in actions.items() if a == "send"}


def test_a_modelcar_dry_run_plans_what_the_run_sends(registry, tmp_path, unique_repo):
    """convert = "modelcar" within one registry: the image's layers are new tars (nothing the
    source repository holds), so the dry run plans them sent and the run sends exactly those."""
    from tests.modelgen import make_model

    model = make_model(tmp_path / "m")
    src = f"{registry.host}/{unique_repo}-src"
    assert main(["push", str(model), f"{src}:v1", "-q"]) == 0
    job = mirror_job(tmp_path / "job.toml", {"source": f"{src}:v1", "target": f"{registry.host}/{unique_repo}-car:v1",
                                             "convert": "modelcar"})
    [planned] = run_job(load_job(job), dry_run=True).artifacts
    summary = run_job(load_job(job))
    assert summary.exit_code == 0, summary.format_text()
    [done] = summary.artifacts
    assert (done.blobs_mounted, done.blobs_copied, done.bytes_copied) == (
        planned.blobs_to_mount, planned.blobs_planned, planned.bytes_planned)
