"""docs/mirroring.md's at-scale walk-through runs as written: shards of one job at once against
a real registry, the merged report (and the one that names a missing shard), and the emitted
Kubernetes Job, read back with the Kubernetes client's models. Its `text` blocks need a cluster
or a base image from a public registry, neither of which the tests have."""

from __future__ import annotations

import json
import subprocess

import yaml

from tests.test_doc_examples import RUNNERS, doc_env, runnable_blocks  # noqa: F401  (doc_env: a fixture)
from tests.test_mirror_shards import k8s_model


def test_mirroring_walk_through_runs(doc_env) -> None:  # noqa: F811
    work, env = doc_env
    blocks = runnable_blocks("mirroring.md")
    assert len(blocks) == 3
    for lang, code, line in blocks:
        proc = subprocess.run([*RUNNERS[lang], code], cwd=work, env=env, capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, (
            f"docs/mirroring.md:{line} ({lang}) exit {proc.returncode}\n--- stdout\n{proc.stdout}\n"
            f"--- stderr\n{proc.stderr}")
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
