"""Sharded mirror jobs against real registries: N `python -m ocibridge mirror --shard I/N`
processes at once copy 24 artifacts sharing base weights into two repositories of one target
registry, through a fault proxy that records every request (each shard names itself in its
User-Agent). Checked: each artifact written exactly once, the shard plans partition the
unsharded plan, no blob uploaded again after a shard had checked a place already holding it
(only shards racing for a blob at the same moment may both send it, and the merged report
counts those), and a shard killed mid-way, run again, completes the job.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import httpx
import pytest
from support.faultproxy import FaultProxy, RecordedRequest, delay

from ocibridge.cli import main
from ocibridge.mirror import load_job, run_job
from ocibridge.mirror.shard import artifact_key, owner, parse_shard
from ocibridge.model.builder import build
from ocibridge.model.package import ModelFile, ModelPackage
from ocibridge.oci.mediatypes import ALL_MANIFEST_TYPES, Kind
from ocibridge.oci.reference import parse_registry_reference
from ocibridge.stores.registry import open_repository
from ocibridge.transfer.copy import copy

ROOT = Path(__file__).resolve().parents[2]
SHARDS = 4
TAGS = [f"{major}.{minor}.0" for major in (1, 2) for minor in range(12)]  # 1.x → repo one, 2.x → two
SHARED = bytes(range(256)) * 128  # 32 KiB of base weights in every artifact
TOKENIZER = b'{"vocab": ["a", "b"]}\n'


def model(i: int) -> ModelPackage:
    return ModelPackage(
        files=[
            ModelFile.from_bytes("base.safetensors", SHARED, Kind.WEIGHT),
            ModelFile.from_bytes("adapter.safetensors", bytes((j * 31 + i) % 256 for j in range(2000 + i)),
                                 Kind.WEIGHT),
            ModelFile.from_bytes("tokenizer.json", TOKENIZER, Kind.WEIGHT_CONFIG),
            ModelFile.from_bytes("README.md", f"# adapter {i}\n".encode(), Kind.DOC),
        ],
        descriptor={"name": "tiny", "version": TAGS[i]},
        config={"format": "safetensors"},
    )


@pytest.fixture(scope="module")
def source(registry) -> dict:
    repo = f"shards/{uuid.uuid4().hex[:8]}/models"
    store = open_repository(parse_registry_reference(f"{registry.host}/{repo}"))
    digests = {tag: copy(build(model(i)), "artifact", store, tag, concurrency=4).root.digest
               for i, tag in enumerate(TAGS)}
    store.close()
    return {"name": f"{registry.host}/{repo}", "digests": digests}


def write_job(tmp_path: Path, source: dict, target_host: str) -> tuple[Path, str]:
    base = f"mirrored/{uuid.uuid4().hex[:8]}"
    job = tmp_path / "job.toml"
    job.write_text(f"""
[defaults]
referrers = false
concurrency = {{ artifacts = 2, blobs = 2 }}

[[sync]]
source = "{source['name']}"
target = "{target_host}/{base}/one"
tags = {{ allow = ["1.*"] }}

[[sync]]
source = "{source['name']}"
target = "{target_host}/{base}/two"
tags = {{ allow = ["2.*"] }}
""")
    return job, base


def start_shard(job: Path, index: int, report: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "ocibridge", "mirror", str(job), "--shard", f"{index}/{SHARDS}", "--json",
         "--report", str(report)],
        env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def finish(proc: subprocess.Popen) -> int:
    _, err = proc.communicate(timeout=60)
    assert not err or b"Traceback" not in err, err.decode()
    assert proc.returncode == 0, err.decode(errors="replace")[-2000:]  # what the shard said, for a failure
    return proc.returncode


HTTP = httpx.Client(timeout=30)
ACCEPT = ", ".join(ALL_MANIFEST_TYPES)


def target_tags(host: str, repo: str) -> list[str]:
    r = HTTP.get(f"http://{host}/v2/{repo}/tags/list")
    return [] if r.status_code == 404 else sorted(r.json().get("tags") or [])


def target_digest(host: str, repo: str, tag: str) -> str:
    r = HTTP.head(f"http://{host}/v2/{repo}/manifests/{tag}", headers={"Accept": ACCEPT})
    r.raise_for_status()
    return r.headers["docker-content-digest"]


def assert_every_artifact_once(proxy: FaultProxy, registry2, base: str, source: dict) -> None:
    """Both repositories hold exactly their tags, each the source's digest, each tag written
    by one PUT (no two shards mirrored the same artifact)."""
    for repo, major in (("one", "1."), ("two", "2.")):
        want = sorted(t for t in TAGS if t.startswith(major))
        assert target_tags(registry2.host, f"{base}/{repo}") == want
        for tag in want:
            assert target_digest(registry2.host, f"{base}/{repo}", tag) == source["digests"][tag]
    puts = Counter(r.path for r in proxy.requests_matching("PUT", r"/manifests/") if r.upstream_status == 201)
    assert sorted(puts) == sorted(f"/v2/{base}/{'one' if t < '2' else 'two'}/manifests/{t}" for t in TAGS)
    assert set(puts.values()) == {1}


# -- what the request log says about blob uploads ------------------------------------------------
_BLOBS = re.compile(r"^/v2/(?P<repo>.+?)/blobs/(?P<rest>.*)$")
_SHARD_AGENT = re.compile(r"mirror-shard/(\d+)-of-(\d+)")


@dataclass
class Uploads:
    """Blob traffic into the target, per shard: checks (a HEAD of the blob in a repository, or a
    mount attempt from one), arrivals (an upload or mount the registry completed) and uploads."""

    checks: dict[tuple[int, str], list[tuple[str, float]]]  # (shard, digest) → [(repo, asked at)]
    arrivals: dict[str, list[tuple[str, float]]]  # digest → [(repo, answered at)]
    uploads: list[tuple[int, str, str, float]]  # (shard, repo, digest, PUT asked at)


def read_uploads(requests: list[RecordedRequest]) -> Uploads:
    out = Uploads(defaultdict(list), defaultdict(list), [])
    for r in requests:
        m = _BLOBS.match(urlsplit(r.path).path)
        agent = _SHARD_AGENT.search(r.headers.get("user-agent", ""))
        if m is None:
            continue
        assert agent is not None and int(agent.group(2)) == SHARDS, r.headers.get("user-agent")
        shard, repo, rest = int(agent.group(1)), m.group("repo"), m.group("rest")
        query = {k: v[0] for k, v in parse_qs(urlsplit(r.path).query).items()}
        if r.method == "HEAD" and rest.startswith("sha256:"):
            out.checks[shard, rest].append((repo, r.time))
        elif r.method == "POST" and "mount" in query:
            digest = unquote(query["mount"])
            out.checks[shard, digest].append((query["from"], r.time))
            if r.upstream_status == 201:
                out.arrivals[digest].append((repo, r.answered or r.time))
        elif r.method == "PUT" and "digest" in query and r.upstream_status == 201:
            digest = unquote(query["digest"])
            out.arrivals[digest].append((repo, r.answered or r.time))
            out.uploads.append((shard, repo, digest, r.time))
    return out


def uploads_a_single_run_would_not_make(u: Uploads, repos: list[str]) -> list[str]:
    """Every upload of a blob but its first is a mistake unless the shard S sending it asked,
    before, every repository the job writes on the registry (its own by HEAD, the others by a
    mount attempt: a single run would mount from them) and none of them held the blob when
    asked. Arrival time is when the registry answered, a check's when it was asked: an upload is
    only blamed when the blob was surely there at the check. Any upload after a check of a place
    that held the blob is a mistake too."""
    wrong = []
    first = {d: min(at for _, _, dd, at in u.uploads if dd == d) for _, _, d, _ in u.uploads}
    for shard, repo, digest, put_at in u.uploads:
        asked = [(c, at) for c, at in u.checks[shard, digest] if at < put_at]
        unasked = [r for r in repos if r not in {c for c, _ in asked}]
        if put_at > first[digest] and unasked:
            wrong.append(f"shard {shard} uploaded {digest[:19]} to {repo} again without asking {unasked}")
        for checked, at in asked:
            if any(r == checked and done < at for r, done in u.arrivals[digest]):
                wrong.append(f"shard {shard} uploaded {digest[:19]} to {repo} after checking {checked}, "
                             "which held it")
                break
    return wrong


# -- tests -------------------------------------------------------------------------------------
def test_shards_in_parallel_mirror_every_artifact_once(source, registry2, tmp_path, capsys) -> None:
    proxy = FaultProxy(registry2)
    try:
        job_path, base = write_job(tmp_path, source, proxy.host)
        job = load_job(job_path)
        whole = run_job(job, dry_run=True)
        parts = [run_job(job, dry_run=True, shard=parse_shard(f"{i}/{SHARDS}")) for i in range(SHARDS)]
        planned = [{(a.source, a.target, a.digest) for a in p.artifacts} for p in parts]
        assert set().union(*planned) == {(a.source, a.target, a.digest) for a in whole.artifacts}
        assert sum(map(len, planned)) == len(TAGS)
        proxy.clear()  # the dry runs' requests carry no shard name

        started = time.monotonic()
        reports = [tmp_path / f"shard-{i}.json" for i in range(SHARDS)]
        procs = [start_shard(job_path, i, reports[i]) for i in range(SHARDS)]
        assert [finish(p) for p in procs] == [0] * SHARDS
        elapsed = time.monotonic() - started

        assert_every_artifact_once(proxy, registry2, base, source)
        u = read_uploads(proxy.requests)
        assert uploads_a_single_run_would_not_make(u, [f"{base}/one", f"{base}/two"]) == []
        sent = Counter(digest for _, _, digest, _ in u.uploads)
        # 24 adapters, READMEs and configs, and the shared base and tokenizer at least once
        assert len(sent) == 3 * len(TAGS) + 2
        # the shard reports: each artifact copied by one shard, the blobs they sent as the log has them
        shard_reports = [json.loads(p.read_text()) for p in reports]
        copied = [a["source"] for r in shard_reports for a in r["artifacts"] if a["status"] == "copied"]
        assert sorted(copied) == sorted(f"{source['name']}:{t}" for t in TAGS)
        assert Counter(d for r in shard_reports for a in r["artifacts"] for d in a["blobsSent"]) == sent

        assert main(["mirror", "report", *map(str, reports), "--json"]) == 0
        summary = json.loads(capsys.readouterr().out)
        assert summary["totals"]["copied"] == len(TAGS) and summary["shards"]["missing"] == []
        # a blob sent by two shards at the same moment is counted, not hidden
        assert summary["repeatedUploads"]["extraUploads"] == sum(sent.values()) - len(sent)
        print(f"{SHARDS} shards mirrored {len(TAGS)} artifacts in {elapsed:.1f} s; "
              f"{sum(sent.values()) - len(sent)} concurrent duplicate upload(s)")
    finally:
        proxy.stop()


def test_a_killed_shard_run_again_completes_the_job(source, registry2, tmp_path) -> None:
    proxy = FaultProxy(registry2)
    try:
        job_path, base = write_job(tmp_path, source, proxy.host)
        targets = {t: f"{proxy.host}/{base}/{'one' if t < '2' else 'two'}" for t in TAGS}
        owners = {t: owner(artifact_key(source["name"], t, targets[t], t), SHARDS) for t in TAGS}
        victim = Counter(owners.values()).most_common(1)[0][0]
        owned = {f"{targets[t]}:{t}" for t in TAGS if owners[t] == victim}
        assert len(owned) >= 5
        assert owned == {a.target for a in run_job(load_job(job_path), dry_run=True,
                                                   shard=parse_shard(f"{victim}/{SHARDS}")).artifacts}
        proxy.clear()
        # slow every manifest PUT so that the shard is still at work when it is killed
        proxy.add("PUT", r"/manifests/", delay(0.15), times=None)

        reports = [tmp_path / f"shard-{i}.json" for i in range(SHARDS)]
        procs = [start_shard(job_path, i, reports[i]) for i in range(SHARDS)]

        def done_of_victim() -> set[str]:
            return {f"{proxy.host}/{base}/{repo}:{t}" for repo in ("one", "two")
                    for t in target_tags(registry2.host, f"{base}/{repo}")} & owned

        deadline = time.monotonic() + 30
        while len(done_of_victim()) < 2:
            assert procs[victim].poll() is None, "the shard finished before it could be killed"
            assert time.monotonic() < deadline, "the shard made no progress"
            time.sleep(0.02)
        procs[victim].send_signal(signal.SIGKILL)
        procs[victim].wait(10)
        assert [finish(p) for i, p in enumerate(procs) if i != victim] == [0] * (SHARDS - 1)
        before = done_of_victim()
        assert 2 <= len(before) < len(owned), "the kill came too late to test a resume"
        assert not reports[victim].exists()

        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        report_cmd = [sys.executable, "-m", "ocibridge", "mirror", "report", *map(str, reports)]
        partial = subprocess.run([c for c in report_cmd if c != str(reports[victim])], env=env,
                                 capture_output=True, text=True, timeout=60)
        assert partial.returncode == 1 and f"MISSING 1 of {SHARDS} shard(s): {victim}" in partial.stdout

        assert finish(start_shard(job_path, victim, reports[victim])) == 0  # the pod, restarted
        assert_every_artifact_once(proxy, registry2, base, source)
        rerun = json.loads(reports[victim].read_text())
        skipped = {a["target"] for a in rerun["artifacts"] if a["status"] == "skipped"}
        assert skipped == before  # what the killed run finished is not copied again
        assert uploads_a_single_run_would_not_make(read_uploads(proxy.requests), [f"{base}/one", f"{base}/two"]) == []

        merged = subprocess.run(report_cmd, env=env, capture_output=True, text=True, timeout=60)
        assert merged.returncode == 0, merged.stdout + merged.stderr
        assert f"all {SHARDS} shard(s) reported" in merged.stdout
    finally:
        proxy.stop()
