"""Sharded mirror jobs without a registry: the partition (stable, complete, balanced), shard
runs between layouts merged by `mirror report` (missing shards, other jobs, reports read from
logs), the `--emit k8s-job` output parsed by the Kubernetes Python client's own models, and
the YAML writer behind it."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from ocibridge.cli import main
from ocibridge.core.yamldocs import dump_all
from ocibridge.errors import UsageError
from ocibridge.mirror import load_job, run_job
from ocibridge.mirror.shard import artifact_key, owner, parse_shard
from ocibridge.stores.layout import LayoutStore
from tests.mirror.test_mirror_units import push_models

if TYPE_CHECKING:
    from kubernetes.client import V1ConfigMap, V1Job

KEYS = [artifact_key("reg.example/llm/m", f"1.{i}.0", "mirror.example/llm/m", f"1.{i}.0") for i in range(2000)]


# -- the partition -----------------------------------------------------------------------------
def test_parse_shard() -> None:
    assert (parse_shard("0/1").index, parse_shard("7/8").count) == (0, 8)
    for bad in ("1", "1/", "/4", "4/4", "-1/4", "1/0", "a/4", "1/4/5", "1.0/4", "١/4", "0/100001"):
        with pytest.raises(UsageError, match="--shard"):
            parse_shard(bad)


def test_every_artifact_has_exactly_one_shard_and_shards_are_balanced() -> None:
    owners = [owner(k, 8) for k in KEYS]
    assert set(owners) == set(range(8))
    assert all(200 <= n <= 300 for n in Counter(owners).values()), Counter(owners)  # 250 each ± 20 %
    assert [owner(k, 8) for k in KEYS] == owners  # a pure function of key and N
    assert {owner(k, 1) for k in KEYS} == {0}


def test_adding_a_shard_moves_only_what_the_new_shard_takes() -> None:
    """Consistent hashing: from 4 to 5 shards, an artifact either stays or moves to shard 4,
    about 1/5 of them (a hash modulo N would move ~4/5)."""
    before = [owner(k, 4) for k in KEYS]
    after = [owner(k, 5) for k in KEYS]
    moved = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
    assert {b for _, b in moved} == {4}
    assert 300 <= len(moved) <= 500, len(moved)  # 400 expected


def test_partitioning_is_cheap_at_scale() -> None:
    """A thousand shards, each deciding for 20,000 artifacts: O(log N) per artifact."""
    keys = [artifact_key("reg.example/llm/m", f"v{i}", "mirror.example/llm/m", f"v{i}") for i in range(20_000)]
    started = time.process_time()
    owners = Counter(owner(k, 1000) for k in keys)
    assert time.process_time() - started < 2.0  # a sha256 per key and shard would be 20 million of them
    assert len(owners) == 1000 and max(owners.values()) < 45  # 20 each on average


# -- shard runs between layouts, merged --------------------------------------------------------
N_TAGS = 12


def spread_tags(src: str, dst: str) -> list[str]:
    """12 tags of which every shard of 2, 3 or 4 owns at least two: the layouts' paths are part
    of each artifact's key, and a random temporary path could leave a shard with nothing."""
    for start in range(100):
        tags = [f"1.{i}.0" for i in range(start, start + N_TAGS)]
        if all(min(Counter(owner(artifact_key(src, t, dst, t), n) for t in tags).values()) >= 2
               and len({owner(artifact_key(src, t, dst, t), n) for t in tags}) == n for n in (2, 3, 4)):
            return tags
    raise AssertionError("no spread of tags found")


@pytest.fixture
def layout_job(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    tags = spread_tags(f"oci:{tmp_path / 'src'}", f"oci:{tmp_path / 'dst'}")
    digests = push_models(LayoutStore(tmp_path / "src", create=True), tags)
    job = tmp_path / "job.toml"
    job.write_text('[[sync]]\nsource = "oci:src"\ntarget = "oci:dst"\n')
    return job, digests


def shard_reports(job: Path, out: Path, n: int, *flags: str) -> list[Path]:
    paths = []
    for i in range(n):
        path = out / f"shard-{i}.json"
        main(["mirror", str(job), "--shard", f"{i}/{n}", "--report", str(path), *flags])
        paths.append(path)
    return paths


def test_shards_together_do_the_unsharded_plan_and_merge(layout_job, tmp_path, capsys) -> None:
    job_path, digests = layout_job
    job = load_job(job_path)
    whole = {(a.source, a.target, a.digest) for a in run_job(job, dry_run=True).artifacts}
    parts = [run_job(job, dry_run=True, shard=parse_shard(f"{i}/3")) for i in range(3)]
    planned = [{(a.source, a.target, a.digest) for a in p.artifacts} for p in parts]
    assert set().union(*planned) == whole and sum(len(p) for p in planned) == len(whole) == 12
    assert all(planned), "a shard got nothing: the test would not show a partition"
    assert [p.entries[0].other_shards for p in parts] == [12 - len(p) for p in planned]

    reports = shard_reports(job_path, tmp_path, 3)
    capsys.readouterr()
    dst = LayoutStore(tmp_path / "dst")
    assert {t: dst.resolve(t).digest for t in digests} == digests
    assert main(["mirror", "report", *map(str, reports)]) == 0
    text = capsys.readouterr().out
    assert "12 copied (" in text and ", 0 failed in " in text and "all 3 shard(s) reported" in text
    assert main(["mirror", "report", *map(str, reports), "--json"]) == 0
    merged = json.loads(capsys.readouterr().out)
    assert merged["ok"] is True and merged["totals"]["copied"] == 12
    assert merged["shards"] == {"count": 3, "reported": [0, 1, 2], "missing": [], "notes": []}
    # a re-run of the shards copies nothing: every artifact is skipped by the shard that owns it
    again = shard_reports(job_path, tmp_path, 3)
    capsys.readouterr()
    assert main(["mirror", "report", *map(str, again), "--json"]) == 0
    totals = json.loads(capsys.readouterr().out)["totals"]
    assert (totals["skipped"], totals["copied"], totals["bytesCopied"]) == (12, 0, 0)


def test_report_says_which_shard_is_missing_and_fails(layout_job, tmp_path, capsys) -> None:
    job_path, _ = layout_job
    reports = shard_reports(job_path, tmp_path, 4)
    capsys.readouterr()
    assert main(["mirror", "report", str(reports[0]), str(reports[2])]) == 1
    text = capsys.readouterr().out
    assert "MISSING 2 of 4 shard(s): 1, 3" in text
    # the merged entry does not pretend the filters selected nothing
    assert "nothing to do" not in text
    assert main(["mirror", "report", str(reports[0]), str(reports[2]), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["shards"]["missing"] == [1, 3]
    # a retried shard (two pods, two reports): the later report counts, and the merge says so
    retried = tmp_path / "retried-1.json"
    assert main(["mirror", str(job_path), "--shard", "1/4", "--report", str(retried)]) == 0
    capsys.readouterr()
    assert main(["mirror", "report", *map(str, reports), str(retried)]) == 0
    text = capsys.readouterr().out
    assert f"note: shard 1: reports {reports[1]} and {retried}; the later one counts" in text
    assert "12 copied" not in text and "all 4 shard(s) reported" in text  # the retry found them copied


def test_an_entry_failing_in_every_shard_is_one_failure(layout_job, tmp_path, capsys) -> None:
    job_path, _ = layout_job
    job_path.write_text(job_path.read_text() + '[[sync]]\nsource = "oci:absent"\ntarget = "oci:dst2"\n')
    reports = shard_reports(job_path, tmp_path, 3)
    capsys.readouterr()
    assert main(["mirror", "report", *map(str, reports), "--json"]) == 1
    merged = json.loads(capsys.readouterr().out)
    failed = [a for a in merged["artifacts"] if a["status"] == "failed"]
    assert len(failed) == 1 and failed[0]["source"] == "oci:absent" and merged["totals"]["copied"] == 12
    assert merged["shards"]["missing"] == [] and merged["ok"] is False


def test_report_read_from_a_pod_log(layout_job, tmp_path, capsys) -> None:
    """kubectl logs holds stderr lines too: the report is found among them."""
    job_path, _ = layout_job
    logs = []
    for i in range(2):
        assert main(["mirror", str(job_path), "--shard", f"{i}/2", "--json", "--dry-run"]) == 0
        log = tmp_path / f"pod-{i}.log"
        log.write_text(f"ocibridge: warning: something {{odd}}\n{capsys.readouterr().out}copied: x\n")
        logs.append(str(log))
    assert main(["mirror", "report", *logs]) == 0
    assert "dry run: 12 to copy" in capsys.readouterr().out


def test_report_refuses_what_does_not_fit(layout_job, tmp_path, capsys) -> None:
    job_path, _ = layout_job
    a = shard_reports(job_path, tmp_path, 2, "--dry-run")
    other = tmp_path / "other.toml"
    other.write_text('[[sync]]\nsource = "oci:src"\ntarget = "oci:elsewhere"\n')
    (tmp_path / "o").mkdir()
    b = shard_reports(other, tmp_path / "o", 2, "--dry-run")
    junk = tmp_path / "junk.json"
    junk.write_text('{"shard": {"index": 0, "count": 2}, "artifacts": "no"}\n')
    unsharded = tmp_path / "whole.json"
    main(["mirror", str(job_path), "--dry-run", "--report", str(unsharded)])
    (tmp_path / "t").mkdir()
    three = shard_reports(job_path, tmp_path / "t", 3, "--dry-run")
    capsys.readouterr()
    cases = [
        ([a[0], b[1]], "a report of another job"),
        ([a[0], three[1]], "reports of differently sharded runs"),
        ([a[0], junk], "junk.json: "),
        ([unsharded], "the report of an unsharded run"),
        ([tmp_path / "job.toml"], "no mirror report in it"),
        ([tmp_path / "absent.json"], "cannot read report"),
    ]
    for files, message in cases:
        assert main(["mirror", "report", *map(str, files)]) == 1
        err = capsys.readouterr().err
        assert err.startswith("ocibridge: error: ") and message in err and err.count("\n") == 1, err
    assert main(["mirror", "report"]) == 2
    assert main(["mirror", "report", str(a[0]), "--shard", "0/2"]) == 2
    assert "takes the reports and --json only" in capsys.readouterr().err


# -- the Kubernetes Job ------------------------------------------------------------------------
def k8s_model(obj: dict, kind: str):
    """The object as the Kubernetes client reads it; serialized back it must be the same dict,
    so no field was misspelt (the client drops names it does not know)."""
    from kubernetes.client import ApiClient  # not at collection, where every worker paid for it

    client = ApiClient()
    model = client.deserialize(json.dumps(obj), kind, "application/json")  # the signature of 37.x
    assert client.sanitize_for_serialization(model) == obj
    return model


REGISTRY_JOB = """\
# central → regional
[registries."models.example.com"]
username = "mirror-bot"
password_env = "CENTRAL_PASSWORD"

[defaults]
concurrency = { artifacts = 4, blobs = 4 }

[[sync]]
source = "models.example.com/llm/llama"
target = "registry.internal:5000/mirror/llm/llama"
"""


def test_emitted_job_parses_with_the_kubernetes_client(tmp_path, capsys) -> None:
    job = tmp_path / "job.toml"
    job.write_text(REGISTRY_JOB)
    args = ["mirror", str(job), "--emit", "k8s-job", "--shards", "8", "--parallelism", "3",
            "--image", "registry.internal:5000/tools/ocibridge:0.1.0", "--name", "llm-mirror",
            "--namespace", "mirroring", "--docker-config-secret", "regcred", "--env-secret", "central-pw",
            "--backoff-limit-per-index", "2", "--max-failed-indexes", "1", "--cpu", "1", "--memory", "1Gi",
            "--reports-claim", "mirror-reports"]
    assert main(args) == 0
    text = capsys.readouterr().out
    config_map_dict, job_dict = yaml.safe_load_all(text)
    assert main([*args, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"apiVersion": "v1", "kind": "List",
                                                   "items": [config_map_dict, job_dict]}

    cm: V1ConfigMap = k8s_model(config_map_dict, "V1ConfigMap")
    assert cm.kind == "ConfigMap" and cm.metadata.name == "llm-mirror-job"
    assert cm.metadata.namespace == "mirroring" and cm.data == {"job.toml": REGISTRY_JOB}

    k8s_job: V1Job = k8s_model(job_dict, "V1Job")
    assert (k8s_job.api_version, k8s_job.kind, k8s_job.metadata.name) == ("batch/v1", "Job", "llm-mirror")
    assert k8s_job.metadata.annotations["ocibridge.io/mirror-job-digest"] == load_job(job).digest()
    spec = k8s_job.spec
    assert (spec.completion_mode, spec.completions, spec.parallelism) == ("Indexed", 8, 3)
    assert (spec.backoff_limit_per_index, spec.max_failed_indexes) == (2, 1)
    fail_index, ignore = spec.pod_failure_policy.rules
    assert fail_index.action == "FailIndex" and fail_index.on_exit_codes.values == [2]
    assert ignore.action == "Ignore" and ignore.on_pod_conditions[0].type == "DisruptionTarget"
    pod = spec.template.spec
    assert pod.restart_policy == "Never" and pod.security_context.run_as_non_root is True
    [container] = pod.containers
    assert container.image == "registry.internal:5000/tools/ocibridge:0.1.0"
    assert container.args == ["mirror", "/etc/ocibridge/job/job.toml", "--shard", "$(JOB_COMPLETION_INDEX)/8",
                              "--json", "--report", "/reports/shard-$(JOB_COMPLETION_INDEX)-of-8.json"]
    assert container.resources.requests == {"cpu": "1", "memory": "1Gi"}
    assert container.resources.limits == {"memory": "1Gi"}
    assert container.security_context.allow_privilege_escalation is False
    assert [e.secret_ref.name for e in container.env_from] == ["central-pw"]
    env = {e.name: e.value for e in container.env}
    assert env["DOCKER_CONFIG"] == "/etc/ocibridge/docker"
    volumes = {v.name: v for v in pod.volumes}
    mounts = {m.name: m.mount_path for m in container.volume_mounts}
    assert volumes["job"].config_map.name == cm.metadata.name and mounts["job"] == "/etc/ocibridge/job"
    secret = volumes["docker-config"].secret
    assert secret.secret_name == "regcred" and [(i.key, i.path) for i in secret.items] == [
        (".dockerconfigjson", "config.json")]
    assert mounts["docker-config"] == env["DOCKER_CONFIG"]
    assert volumes["reports"].persistent_volume_claim.claim_name == "mirror-reports"
    assert mounts["reports"] == "/reports"


def test_emit_defaults_and_refusals(tmp_path, capsys) -> None:
    job = tmp_path / "job.yaml"
    job.write_text("sync:\n  - {source: reg.example/a, target: mirror.example/a}\n")
    assert main(["mirror", str(job), "--emit", "k8s-job", "--shards", "2", "--no-docker-config"]) == 0
    cm, k8s_job = (k8s_model(d, kind) for d, kind in
                   zip(yaml.safe_load_all(capsys.readouterr().out), ("V1ConfigMap", "V1Job"), strict=True))
    assert list(cm.data) == ["job.yaml"]  # the suffix tells the pod's ocibridge how to read it
    assert k8s_job.spec.parallelism == 2 and k8s_job.spec.backoff_limit_per_index == 3
    container = k8s_job.spec.template.spec.containers[0]
    assert container.image.startswith("ocibridge:") and container.args[1] == "/etc/ocibridge/job/job.yaml"
    assert "docker-config" not in {v.name for v in k8s_job.spec.template.spec.volumes}

    layout = tmp_path / "layout.toml"
    layout.write_text('[[sync]]\nsource = "oci:/srv/models"\ntarget = "reg.example/m"\n')
    needs_env = tmp_path / "env.toml"
    needs_env.write_text(REGISTRY_JOB)
    cases = [
        ([str(job), "--emit", "k8s-job"], 2, "--emit k8s-job needs --shards N"),
        ([str(job), "--emit", "k8s-job", "--shards", "0"], 2, "--shards must be between"),
        ([str(job), "--emit", "k8s-job", "--shards", "2", "--name", "Bad_Name"], 2, "--name 'Bad_Name'"),
        ([str(job), "--emit", "k8s-job", "--shards", "2", "--memory", "lots"], 2, "not a Kubernetes quantity"),
        ([str(job), "--emit", "k8s-job", "--shards", "2", "--shard", "0/2"], 2, "belong to a run"),
        ([str(layout), "--emit", "k8s-job", "--shards", "2"], 1, "is a path on this machine"),
        ([str(needs_env), "--emit", "k8s-job", "--shards", "2"], 2, "pass --env-secret"),
        ([str(job), "extra"], 2, "unexpected argument 'extra'"),
        ([str(job), "--report", str(tmp_path / "no" / "r.json")], 2, "no such directory"),
    ]
    for args, code, message in cases:
        assert main(["mirror", *args]) == code, args
        captured = capsys.readouterr()
        assert captured.out == "" and captured.err.startswith("ocibridge: error: ") and message in captured.err
        assert captured.err.count("\n") == 1


# -- the YAML writer ---------------------------------------------------------------------------
_scalars = st.none() | st.booleans() | st.integers() | st.text() | st.text(alphabet=" ab\n#:-|>'\"\t{}[]")
_trees = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=20)


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.text(max_size=8), _trees, max_size=5))
def test_yaml_writer_round_trips(doc: dict) -> None:
    assert yaml.safe_load(dump_all([doc])) == doc
    assert list(yaml.safe_load_all(dump_all([doc, {"b": doc}]))) == [doc, {"b": doc}]


def test_yaml_writer_keeps_words_and_numbers_strings_and_job_files_readable() -> None:
    doc = {"no": "yes", "on": ["off", "1", "0x10", "~", "null"], "job.toml": "a = 1\n\n[x]\n  b = 'c'\n"}
    text = dump_all([doc])
    assert yaml.safe_load(text) == doc
    assert "job.toml: |\n  a = 1\n\n  [x]\n    b = 'c'\n" in text
    # a line ending in spaces cannot stand in a literal block: PyYAML quotes the text, which reads back the same
    spaced = {"job.toml": "a = 1  \n[x]\n"}
    assert yaml.safe_load(dump_all([spaced])) == spaced
