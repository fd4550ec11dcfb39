"""docs/mirroring.md's examples run as written: the nightly Hub sync (``ocibridge serve`` as the
Hub), a dataset published through serve and mirrored by a YAML job, the at-scale walk-through:
shards of one job at once against a real registry, the merged report (and the one that names a
missing shard), a job that scans what it copies and refuses a flagged model, and the emitted
Kubernetes Job, read back with the Kubernetes client's models. Its `text` blocks need a cluster
or a base image from a public registry, neither of which the tests have."""

from __future__ import annotations

import json

import yaml

from tests.docrun import doc_env, reader_venvs, run_block, runnable_blocks  # noqa: F401  (fixtures)
from tests.mirror.test_mirror_shards import k8s_model


def test_mirroring_walk_through_runs(doc_env) -> None:  # noqa: F811
    work, env = doc_env("mirroring.md")
    blocks = runnable_blocks("mirroring.md")
    assert len(blocks) == 6
    for lang, code, line in blocks:
        proc = run_block(lang, code, work, env)
        assert proc.returncode == 0, (
            f"docs/mirroring.md:{line} ({lang}) exit {proc.returncode}\n--- stdout\n{proc.stdout}\n"
            f"--- stderr\n{proc.stderr}")
        if "hf://acme/tiny" in code:  # the nightly Hub sync: main and its pinned commit, then nothing moves
            tags = proc.stdout.splitlines()[-2:]
            assert tags[0] == "main" and tags[1].startswith("main-") and len(tags[1]) == len("main-") + 12, tags
            assert "1 copied" in proc.stdout and "0 copied" in proc.stdout
            hub_map, hub_job = yaml.safe_load_all((work / "hub-sync.yaml").read_text())
            assert "hf://acme/tiny" in k8s_model(hub_map, "V1ConfigMap").data["job.toml"]
            assert k8s_model(hub_job, "V1Job").spec.completions == 1
        if "hf://datasets/acme/reviews" in code:  # a dataset published through serve, mirrored as one
            assert "1 copied" in proc.stdout
            holds, layer = proc.stdout.splitlines()[-2:]
            assert holds.startswith("Holds:         a dataset"), proc.stdout
            assert layer.split()[-2:] == ["data/train.csv", "application/vnd.cnai.model.dataset.v1.raw"], layer
        if "scan.toml" in code:  # the flagged model refused, the clean one tagged with its report
            assert "refused by the scan: pytorch_model.bin (archive/data.pkl): critical: pickle calls os.system" in (
                proc.stdout), proc.stdout
            assert "        scan: clean (report sha256:" in proc.stdout
            assert proc.stdout.splitlines()[-1] == "good", proc.stdout
        if "mirror report shard-0.json shard-1.json shard-2.json" in code:
            out = proc.stdout.splitlines()
            assert "all 3 shard(s) reported" in out and out[-3:] == ["1.0.0", "1.1.0", "2.0.0"]
    reports = [json.loads((work / f"shard-{i}.json").read_text()) for i in range(3)]
    assert sorted(a["source"].rsplit(":", 1)[1] for r in reports for a in r["artifacts"]) == [
        "1.0.0", "1.1.0", "2.0.0"]
    config_map, job = yaml.safe_load_all((work / "tiny-mirror.yaml").read_text())
    assert k8s_model(config_map, "V1ConfigMap").data["job.toml"] == (work / "job.toml").read_text()
    spec = k8s_model(job, "V1Job").spec
    assert (spec.completion_mode, spec.completions, spec.parallelism) == ("Indexed", 3, 2)
