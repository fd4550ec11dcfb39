"""Mirror jobs from Python (ocibridge.api.mirror) against a real registry: a job built in code
mirrors two models between two repositories; the plan lists them, the run copies them (same
digests at the target), a second run skips them; shards of a run merge into one report; the
Kubernetes Job of a job; and every result is what the command prints for the same job."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

import ocibridge
from ocibridge.api.mirror import Concurrency, Settings
from ocibridge.cli import main
from ocibridge.errors import OcibridgeError, UsageError
from ocibridge.model.builder import BuildOptions, build
from ocibridge.oci.mediatypes import Family
from ocibridge.oci.reference import parse_registry_reference
from ocibridge.stores.registry import open_repository
from ocibridge.transfer.copy import copy
from tests.mirror.test_mirror_shards import k8s_model
from tests.mirror.test_mirror_units import package

TAGS = ["1.0.0", "1.1.0"]


@pytest.fixture
def source(registry, unique_repo) -> tuple[str, dict[str, str]]:
    """A repository holding two models (1.0.0, 1.1.0) and their digests."""
    repo = f"{registry.host}/{unique_repo}/src"
    with open_repository(parse_registry_reference(repo)) as store:
        digests = {tag: copy(build(package(i), BuildOptions(family=Family.CNAI)), "artifact", store, tag)
                   .root.digest for i, tag in enumerate(TAGS)}
    return repo, digests


def job_to(source: str, target: str) -> ocibridge.MirrorJob:
    """One artifact at a time: which of the two models' shared blobs a plan counts as "to mount"
    is then the same in every plan."""
    return ocibridge.MirrorJob(sync=[ocibridge.SyncEntry(source=source, target=target)],
                               defaults=Settings(concurrency=Concurrency(artifacts=1)))


def digests_at(repo: str) -> dict[str, str]:
    with open_repository(parse_registry_reference(repo)) as store:
        return {tag: store.resolve(tag).digest for tag in store.tags()}


def without_time(data: dict) -> dict:
    return {k: v for k, v in data.items() if k not in ("seconds", "finishedAt")}


def cli_json(capsys, *args: str) -> tuple[int, dict]:
    code = main(["mirror", *args, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_plan_run_and_resume_a_job_built_in_python(source, tmp_path, capsys) -> None:
    src, digests = source
    target = src.rsplit("/", 1)[0] + "/dst"
    job = job_to(src, target)

    plan = ocibridge.mirror_plan(job)
    assert plan.dry_run and plan.ok and plan.exit_code == 0
    assert sorted(a.source.rsplit(":", 1)[1] for a in plan.artifacts) == TAGS
    assert {a.status for a in plan.artifacts} == {"planned"} and plan.totals["blobsToMount"] > 0  # same registry
    assert {a.digest for a in plan.artifacts} == set(digests.values())
    assert [(e.source, e.tags_listed) for e in plan.entries] == [(src, 2)]
    assert digests_at(target) == {}  # a plan writes nothing

    # the same job as a file: the command prints what the API returns
    job_file = tmp_path / "job.toml"
    job_file.write_text(f'defaults.concurrency.artifacts = 1\n[[sync]]\nsource = "{src}"\ntarget = "{target}"\n')
    assert ocibridge.MirrorJob.from_file(job_file).digest() == job.digest()
    assert ocibridge.mirror_plan(job_file).format_text() == plan.format_text()
    code, printed = cli_json(capsys, str(job_file), "--dry-run")
    assert code == 0 and without_time(printed) == without_time(plan.as_dict())

    seen: list[ocibridge.MirroredArtifact] = []
    run = ocibridge.mirror_run(job, progress=lambda event, artifact: seen.append(artifact))
    assert run.ok and not run.dry_run and run.totals["copied"] == 2 and run.totals["blobsMounted"] > 0
    assert digests_at(target) == digests
    assert sorted((a.status, a.digest) for a in seen) == sorted(("copied", d) for d in digests.values())
    assert {a.digest for a in run.with_status("copied")} == set(digests.values())

    again = ocibridge.mirror_run(job)  # resumable: what is there is skipped
    assert again.ok and again.totals["skipped"] == 2 and again.totals["copied"] == 0
    assert again.totals["bytesCopied"] == 0
    assert {a.reason for a in again.artifacts} == {"already mirrored"}
    code, printed = cli_json(capsys, str(job_file))
    assert code == 0 and without_time(printed) == without_time(again.as_dict())

    # a frozen result, not a view of the run
    with pytest.raises(AttributeError):
        again.ok = False  # type: ignore[misc]
    again.as_dict()["totals"]["skipped"] = 0
    assert again.totals["skipped"] == 2 and again.as_dict()["totals"]["skipped"] == 2


def test_shards_of_a_run_merge_into_the_job_report(source, tmp_path, capsys) -> None:
    src, digests = source
    target = src.rsplit("/", 1)[0] + "/sharded"
    job = job_to(src, target)
    files = [tmp_path / f"shard-{i}.json" for i in range(2)]

    reports = [ocibridge.mirror_shard(job, f"{i}/2", options=ocibridge.MirrorRunOptions(report_file=files[i]))
               for i in range(2)]
    assert [(r.shard.index, r.shard.count) for r in reports if r.shard] == [(0, 2), (1, 2)]
    assert {r.job_digest for r in reports} == {job.digest()}
    assert sum(len(r.artifacts) for r in reports) == 2  # each artifact in exactly one shard
    assert digests_at(target) == digests
    assert json.loads(files[0].read_text()) == reports[0].as_dict()

    merged = ocibridge.mirror_merge(reports)
    assert merged.ok and merged.exit_code == 0 and merged.count == 2
    assert merged.reported == (0, 1) and merged.missing == ()
    assert sorted(a.digest for a in merged.with_status("copied")) == sorted(digests.values())
    from_files = ocibridge.mirror_merge(files)
    assert from_files.as_dict() == merged.as_dict()
    code, printed = cli_json(capsys, "report", *map(str, files))
    assert code == 0 and printed == merged.as_dict()

    half = ocibridge.mirror_merge(reports[:1])
    assert not half.ok and half.exit_code == 1 and half.missing == (1,)
    assert "MISSING 1 of 2 shard(s)" in half.format_text()

    with pytest.raises(OcibridgeError, match="unsharded run"):
        ocibridge.mirror_merge([ocibridge.mirror_plan(job)])
    with pytest.raises(UsageError):
        ocibridge.mirror_merge([])
    with pytest.raises(UsageError, match="--shard"):
        ocibridge.mirror_shard(job, "2/2")


def test_the_kubernetes_job_of_a_job(source, tmp_path, capsys) -> None:
    src, _ = source
    job = job_to(src, src.rsplit("/", 1)[0] + "/k8s")
    options = ocibridge.MirrorK8sOptions(shards=3, parallelism=2, name="tiny-mirror", image="reg.example/ocibridge:1",
                                         docker_config_secret="")
    k8s = ocibridge.mirror_k8s_job(job, options)
    config_map, pod_job = yaml.safe_load_all(k8s.to_yaml())
    assert k8s.as_dict() == {"apiVersion": "v1", "kind": "List", "items": [config_map, pod_job]}
    assert k8s.to_yaml().startswith("# tiny-mirror: 3 shards of job.json")
    assert any("loopback" in w for w in k8s.warnings)  # the test registry is on this machine
    in_pod = k8s_model(config_map, "V1ConfigMap").data["job.json"]  # a job built in Python goes in as JSON
    assert ocibridge.MirrorJob.from_dict(json.loads(in_pod)).digest() == job.digest()
    spec = k8s_model(pod_job, "V1Job").spec
    assert (spec.completions, spec.parallelism, spec.template.spec.containers[0].image) == (
        3, 2, "reg.example/ocibridge:1")
    assert spec.template.spec.containers[0].args[:4] == [
        "mirror", "/etc/ocibridge/job/job.json", "--shard", "$(JOB_COMPLETION_INDEX)/3"]

    # from a file: the ConfigMap holds it as written (a literal block) and the command prints the same
    job_file = tmp_path / "job.toml"
    job_file.write_text(f'# nightly\n[[sync]]\nsource = "{src}"\ntarget = "{src}-copy"\n')
    k8s = ocibridge.mirror_k8s_job(job_file, options)
    assert f"job.toml: |\n    # nightly\n    [[sync]]\n    source = \"{src}\"\n" in k8s.to_yaml()
    assert main(["mirror", str(job_file), "--emit", "k8s-job", "--shards", "3", "--parallelism", "2",
                 "--name", "tiny-mirror", "--image", "reg.example/ocibridge:1", "--no-docker-config"]) == 0
    printed = capsys.readouterr()
    assert printed.out == k8s.to_yaml() and printed.err.splitlines() == [f"ocibridge: {w}" for w in k8s.warnings]

    with pytest.raises(UsageError, match="--shards must be between"):
        ocibridge.mirror_k8s_job(job, ocibridge.MirrorK8sOptions(shards=0))
    layout_job = job_to(f"oci:{Path(tmp_path, 'layout')}", src)
    with pytest.raises(OcibridgeError, match="path on this machine"):
        ocibridge.mirror_k8s_job(layout_job, ocibridge.MirrorK8sOptions(shards=1))
