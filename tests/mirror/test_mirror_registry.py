"""Mirror jobs between real registries (two `docker-registry` processes, a token registry and
a fault proxy): many artifacts with shared blobs, dry run, interruption and re-run, a
throttling/failing source, a target that refuses one repository, mounts, Ollama conversion.
Every test checks the target through the registry API: manifests byte-identical, blobs there.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import httpx
import pytest
from support.faultproxy import FaultProxy, server_error, status, too_many_requests
from support.mirror_jobs import mirror_job

from ocibridge.cli.mirror import mirror_command
from ocibridge.mirror import load_job, run_job
from ocibridge.model.builder import BuildOptions, build
from ocibridge.model.package import ModelFile, ModelPackage
from ocibridge.oci.mediatypes import ALL_MANIFEST_TYPES, Family, Kind
from ocibridge.oci.models import Descriptor, Manifest, parse_manifest_bytes
from ocibridge.oci.reference import parse_registry_reference
from ocibridge.stores.registry import open_repository
from ocibridge.transfer.copy import copy

N_MODELS = 30
SHARED = bytes(range(256)) * 1024  # 256 KiB base weights every model shares
TOKENIZER = b'{"vocab": ["a", "b", "c"]}\n'
ACCEPT = ", ".join(ALL_MANIFEST_TYPES)
ROOT = Path(__file__).resolve().parents[2]


def model(i: int) -> ModelPackage:
    unique = bytes((j * 13 + i) % 256 for j in range(20_000 + i * 100))
    return ModelPackage(
        files=[
            ModelFile.from_bytes("base.safetensors", SHARED, Kind.WEIGHT),
            ModelFile.from_bytes("adapter.safetensors", unique, Kind.WEIGHT),
            ModelFile.from_bytes("tokenizer.json", TOKENIZER, Kind.WEIGHT_CONFIG),
            ModelFile.from_bytes("README.md", f"# model {i}\n".encode(), Kind.DOC),
        ],
        descriptor={"name": "tiny", "version": f"1.{i}.0"},
        config={"format": "safetensors"},
    )


@pytest.fixture(scope="module")
def source(registry) -> dict:
    """30 tagged ModelPack artifacts (1.0.0 … 1.29.0) in one repository of registry A, one of
    them signed by a referrer manifest."""
    repo = f"mirror/{uuid.uuid4().hex[:8]}/models"
    store = open_repository(parse_registry_reference(f"{registry.host}/{repo}"))
    digests = {}
    for i in range(N_MODELS):
        digests[f"1.{i}.0"] = copy(build(model(i)), "artifact", store, f"1.{i}.0", concurrency=4).root
    subject = digests["1.29.0"]
    sig = b'{"signed": true}'
    sig_desc = Descriptor.for_bytes("application/vnd.example.signature.v1+json", sig)
    store.push_blob(sig_desc, __import__("io").BytesIO(sig))
    empty = b"{}"
    store.push_blob(Descriptor.for_bytes("application/vnd.oci.empty.v1+json", empty), __import__("io").BytesIO(empty))
    referrer = Manifest(artifactType="application/vnd.example.signature.v1+json",
                        config=Descriptor.for_bytes("application/vnd.oci.empty.v1+json", empty),
                        layers=[sig_desc], subject=subject.model_copy(update={"annotations": None}))
    body = referrer.to_json_bytes()
    store.push_manifest(Descriptor.for_bytes("application/vnd.oci.image.manifest.v1+json", body), body)
    store.close()
    return {"host": registry.host, "repo": repo, "digests": {t: d.digest for t, d in digests.items()},
            "referrer": Descriptor.for_bytes("application/vnd.oci.image.manifest.v1+json", body).digest}


# -- registry API helpers ------------------------------------------------------------------------
HTTP = httpx.Client(timeout=30)


def api_tags(host: str, repo: str) -> list[str]:
    r = HTTP.get(f"http://{host}/v2/{repo}/tags/list")
    return [] if r.status_code == 404 else sorted(r.json().get("tags") or [])


def api_manifest(host: str, repo: str, ref: str) -> tuple[bytes, str]:
    r = HTTP.get(f"http://{host}/v2/{repo}/manifests/{ref}", headers={"Accept": ACCEPT})
    r.raise_for_status()
    return r.content, r.headers["docker-content-digest"]


def api_blob_present(host: str, repo: str, digest: str) -> bool:
    return HTTP.head(f"http://{host}/v2/{repo}/blobs/{digest}").status_code == 200


def storage_blobs(reg) -> set[str]:
    root = getattr(reg, "storage", None)
    if root is None:
        return set()
    return {p.parent.name for p in Path(root).rglob("data") if "blobs" in p.parts}


def assert_identical(src_host: str, src_repo: str, dst_host: str, dst_repo: str, tags: list[str]) -> None:
    """Same manifest bytes and digest per tag; every blob they name present on the target, and
    the blob bytes equal for the first tag (GET on both sides)."""
    for n, tag in enumerate(tags):
        a, da = api_manifest(src_host, src_repo, tag)
        b, db = api_manifest(dst_host, dst_repo, tag)
        assert (a, da) == (b, db), tag
        m = parse_manifest_bytes(b)
        for blob in [m.config, *m.layers]:
            assert api_blob_present(dst_host, dst_repo, blob.digest), (tag, blob.digest)
            if n == 0:
                x = HTTP.get(f"http://{src_host}/v2/{src_repo}/blobs/{blob.digest}", follow_redirects=True)
                y = HTTP.get(f"http://{dst_host}/v2/{dst_repo}/blobs/{blob.digest}", follow_redirects=True)
                assert x.content == y.content and len(y.content) == blob.size


def write_job(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# -- tests ---------------------------------------------------------------------------------------
def test_dry_run_changes_nothing_then_full_mirror_and_rerun(source, registry2, tmp_path) -> None:
    dst_repo = f"copy/{uuid.uuid4().hex[:8]}/models"
    job = load_job(mirror_job(tmp_path / "job.toml",
                              {"source": f"{source['host']}/{source['repo']}",
                               "target": f"{registry2.host}/{dst_repo}"},
                              defaults={"concurrency": {"artifacts": 4, "blobs": 4}}))
    catalog_before = httpx.get(f"{registry2.url}/v2/_catalog?n=10000").json()
    blobs_before = storage_blobs(registry2)

    dry = run_job(job, dry_run=True)
    assert dry.ok and len(dry.with_status("planned")) == N_MODELS
    t = dry.totals()
    # shared: base weights and tokenizer once; per model: adapter, README, config; + referrer's 2
    assert t["blobs_planned"] == 2 + 3 * N_MODELS + 2
    assert httpx.get(f"{registry2.url}/v2/_catalog?n=10000").json() == catalog_before
    assert api_tags(registry2.host, dst_repo) == []
    assert storage_blobs(registry2) == blobs_before
    assert "dry run: 30 to copy" in dry.format_text()

    started = time.monotonic()
    done = run_job(job)
    elapsed = time.monotonic() - started
    assert done.ok, done.format_text()
    assert len(done.with_status("copied")) == N_MODELS
    assert done.totals()["bytes_copied"] == t["bytes_planned"]
    assert done.totals()["referrers"] == 1
    tags = [f"1.{i}.0" for i in range(N_MODELS)]
    # the referrer travels with its subject (its own tag written again by the target, never mirrored as a tag)
    assert api_tags(registry2.host, dst_repo) == sorted([*tags, "sha256-" + source["digests"]["1.29.0"][7:],
                                                         "ocibridge-ref-" + source["referrer"][7:]])
    assert_identical(source["host"], source["repo"], registry2.host, dst_repo, tags)
    a, _ = api_manifest(registry2.host, dst_repo, source["referrer"])
    assert parse_manifest_bytes(a).subject.digest == source["digests"]["1.29.0"]
    print(f"mirrored {N_MODELS} artifacts ({t['bytes_planned']} bytes, {t['blobs_planned']} blobs) "
          f"in {elapsed:.2f} s")

    again = run_job(job)
    assert again.ok and [a.reason for a in again.artifacts] == ["already mirrored"] * N_MODELS
    assert again.totals()["bytes_copied"] == 0


def test_interrupted_job_resumes_without_resending(source, registry2, tmp_path) -> None:
    """Kill -9 a running `python -m ocibridge mirror` after a few artifacts; the re-run finishes
    and, per the proxy's log, no blob upload was completed twice."""
    proxy = FaultProxy(registry2)
    dst_repo = f"resume/{uuid.uuid4().hex[:8]}/models"
    job_path = mirror_job(tmp_path / "job.toml",
                          {"source": f"{source['host']}/{source['repo']}", "target": f"{proxy.host}/{dst_repo}",
                           "referrers": False, "concurrency": {"artifacts": 1, "blobs": 2}})
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "ocibridge", "mirror", str(job_path)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while len(api_tags(registry2.host, dst_repo)) < 5:
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "the mirror made no progress"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    first = set(api_tags(registry2.host, dst_repo))
    assert 5 <= len(first) < N_MODELS, "kill came too late to test a resume"

    job = load_job(job_path)
    job.sync[0].concurrency.artifacts = 4
    summary = run_job(job)
    assert summary.ok, summary.format_text()
    skipped = {a.source.rsplit(":", 1)[1] for a in summary.with_status("skipped")}
    assert skipped == first  # finished artifacts were not touched again
    tags = [f"1.{i}.0" for i in range(N_MODELS)]
    assert api_tags(registry2.host, dst_repo) == sorted(tags)
    assert_identical(source["host"], source["repo"], registry2.host, dst_repo, tags)

    completed = Counter()
    for r in proxy.requests_matching("PUT", r"/blobs/uploads/"):
        if r.status == 201 and "digest=" in r.path:
            completed[r.path.split("digest=")[1].split("&")[0].replace("%3A", ":")] += 1
    proxy.stop()
    assert completed, "no uploads seen through the proxy"
    assert max(completed.values()) == 1, [d for d, n in completed.items() if n > 1]
    assert len(completed) == 2 + 3 * N_MODELS  # every distinct blob exactly once over both runs


def test_throttling_and_failing_source_still_completes(source, fault_proxy, registry2, tmp_path) -> None:
    fault_proxy.add("GET", r"/blobs/sha256:", too_many_requests(retry_after=0), times=3)
    fault_proxy.add("GET", r"/manifests/", server_error(500), times=2)
    fault_proxy.add("HEAD", r"/manifests/", status(503), times=2)
    fault_proxy.add("GET", r"/tags/list", too_many_requests(retry_after=0), times=1)
    dst_repo = f"flaky/{uuid.uuid4().hex[:8]}/models"
    job = load_job(write_job(tmp_path / "job.yaml", f"""
sync:
  - source: {fault_proxy.host}/{source['repo']}
    target: {registry2.host}/{dst_repo}
    tags: {{semver: ">=1.20.0 <1.25", latest: 3}}
    rate_limit: {{requests_per_second: 40, burst: 2}}
"""))
    summary = run_job(job)
    assert summary.ok, summary.format_text()
    assert all(rule.applied == rule.times for rule in fault_proxy.rules)
    assert api_tags(registry2.host, dst_repo) == ["1.22.0", "1.23.0", "1.24.0"]
    assert_identical(source["host"], source["repo"], registry2.host, dst_repo, ["1.22.0", "1.23.0", "1.24.0"])
    # the token bucket held the source to 40 requests/s after a burst of 2
    times = sorted(r.time for r in fault_proxy.requests)
    assert len(times) >= 35  # enough that an unthrottled run would exceed the limit
    busiest = max(sum(1 for u in times if t <= u < t + 0.5) for t in times)
    assert busiest <= 0.5 * 40 + 2 + 1, busiest


def test_target_refusing_one_repository_fails_that_entry_only(source, token_registry, tmp_path,
                                                              monkeypatch, capsys) -> None:
    monkeypatch.setenv("MIRROR_TEST_TOKEN_PW", token_registry.password)
    allowed = f"team/{uuid.uuid4().hex[:8]}"
    denied = f"other/{uuid.uuid4().hex[:8]}"
    job_path = write_job(tmp_path / "job.toml", f"""
[registries."{token_registry.host}"]
username = "{token_registry.username}"
password_env = "MIRROR_TEST_TOKEN_PW"

[defaults]
referrers = false

[[sync]]
source = "{source['host']}/{source['repo']}"
target = "{token_registry.host}/{denied}"
tags = {{ allow = ["1.1.0", "1.2.0"] }}

[[sync]]
source = "{source['host']}/{source['repo']}"
target = "{token_registry.host}/{allowed}"
tags = {{ allow = ["1.1.0", "1.2.0"] }}
""")
    summary = run_job(load_job(job_path))
    assert not summary.ok and summary.exit_code == 1
    by_entry = {0: [], 1: []}
    for a in summary.artifacts:
        by_entry[a.entry].append(a)
    assert [a.status for a in by_entry[0]] == ["failed", "failed"]
    assert all("DENIED" in a.reason or "UNAUTHORIZED" in a.reason for a in by_entry[0]), by_entry[0][0].reason
    assert [a.status for a in by_entry[1]] == ["copied", "copied"]
    dst = open_repository(parse_registry_reference(f"{token_registry.host}/{allowed}"),
                          username=token_registry.username, password=token_registry.password)
    for tag in ("1.1.0", "1.2.0"):
        assert dst.resolve(tag).digest == source["digests"][tag]
    dst.close()

    assert mirror_command(str(job_path), as_json=True) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] is False and out["totals"]["failed"] == 2 and out["totals"]["skipped"] == 2


def test_same_registry_mirror_mounts_blobs(source, registry, tmp_path) -> None:
    dst_repo = f"mounted/{uuid.uuid4().hex[:8]}"
    job = load_job(mirror_job(tmp_path / "job.toml",
                              {"source": f"{source['host']}/{source['repo']}", "target": f"{registry.host}/{dst_repo}",
                               "tags": {"latest": 2}, "referrers": False}))
    dry = run_job(job, dry_run=True).totals()  # the dry run says what the run will do
    assert dry["blobs_planned"] == dry["bytes_planned"] == 0 and dry["blobs_to_mount"] > 0
    summary = run_job(job)
    assert summary.ok and len(summary.with_status("copied")) == 2
    t = summary.totals()
    assert t["bytes_copied"] == 0 and t["blobs_mounted"] == t["blobs_to_mount"] == dry["blobs_to_mount"]
    assert_identical(source["host"], source["repo"], registry.host, dst_repo, ["1.29.0", "1.28.0"])


def test_converting_mirror_within_one_registry_mounts_every_blob(source, registry, tmp_path) -> None:
    """convert = "cncf" re-labels manifests only: each blob keeps its digest, so within one
    registry every blob is mounted (it used to be uploaded again), as the dry run predicts
    blob by blob."""
    dst_repo = f"cncf-mounted/{uuid.uuid4().hex[:8]}"
    job = load_job(mirror_job(tmp_path / "job.toml",
                              {"source": f"{source['host']}/{source['repo']}:1.3.0",
                               "target": f"{registry.host}/{dst_repo}:v3", "convert": "cncf", "referrers": False}))
    dry = run_job(job, dry_run=True)
    actions = {action for a in dry.artifacts for _, _, action in a.blob_actions}
    assert actions == {"mount"} and "mount" in dry.format_text()
    summary = run_job(job)
    t = summary.totals()
    assert summary.ok and t["bytes_copied"] == 0 and t["blobs_mounted"] == dry.totals()["blobs_to_mount"] > 0


def test_convert_families_while_mirroring(source, registry2, tmp_path) -> None:
    dst_repo = f"cncf/{uuid.uuid4().hex[:8]}"
    job = load_job(mirror_job(tmp_path / "job.toml",
                              {"source": f"{source['host']}/{source['repo']}:1.3.0",
                               "target": f"{registry2.host}/{dst_repo}:v3", "convert": "cncf"}))
    summary = run_job(job)
    assert summary.ok, summary.format_text()
    data, digest = api_manifest(registry2.host, dst_repo, "v3")
    expected = build(model(3), BuildOptions(family=Family.CNCF))
    assert data == expected.manifest_bytes and digest == expected.descriptor.digest
    src_data, _ = api_manifest(source["host"], source["repo"], "1.3.0")
    src_m, dst_m = parse_manifest_bytes(src_data), parse_manifest_bytes(data)
    assert [x.digest for x in src_m.layers] == [x.digest for x in dst_m.layers]
    assert dst_m.artifactType == Family.CNCF.artifact_type and b"cnai" not in data
    assert run_job(job).artifacts[0].reason == "already mirrored"


def test_convert_says_which_referrers_it_left_behind(source, registry2, tmp_path) -> None:
    """1.29.0 carries a signature referrer. Re-labelled, the copy has a new digest the signature
    does not name: the referrer is not copied, and the summary says so (not silently)."""
    dst_repo = f"cncf/{uuid.uuid4().hex[:8]}"
    job = load_job(mirror_job(tmp_path / "job.toml",
                              {"source": f"{source['host']}/{source['repo']}:1.29.0",
                               "target": f"{registry2.host}/{dst_repo}:v29", "convert": "cncf"}))
    dry = run_job(job, dry_run=True)
    assert dry.artifacts[0].referrers_left_behind == 1 and "left behind" in dry.format_text()
    summary = run_job(job)
    [result] = summary.artifacts
    assert result.status == "copied" and result.referrers == 0 and result.referrers_left_behind == 1
    text = summary.format_text()
    assert "1 referrer(s) of the original left behind" in text
    assert text.splitlines()[-1].endswith("1 referrer(s) of re-labelled or converted artifacts left behind")
    assert summary.as_dict()["totals"]["referrersLeftBehind"] == 1
    _, digest = api_manifest(registry2.host, dst_repo, "v29")
    assert digest != source["digests"]["1.29.0"]
    for subject in (digest, source["digests"]["1.29.0"]):
        assert "sha256-" + subject.split(":", 1)[1] not in api_tags(registry2.host, dst_repo)
    # without conversion the same referrer travels with its subject
    plain = load_job(mirror_job(tmp_path / "plain.toml",
                                {"source": f"{source['host']}/{source['repo']}:1.29.0",
                                 "target": f"{registry2.host}/{dst_repo}:plain"}))
    copied = run_job(plain).artifacts[0]
    assert copied.referrers == 1 and copied.referrers_left_behind == 0
    assert api_manifest(registry2.host, dst_repo, source["referrer"])[1] == source["referrer"]


def test_ollama_registry_to_modelpack(registry, registry2, tmp_path) -> None:
    from ollama_fixtures import gguf_store

    from ocibridge.kinds.ollama import OllamaStore, parse_ollama_name

    gguf_store(tmp_path / "ollama", tmp_path, model="tiny", tag="q8")
    name = parse_ollama_name("tiny:q8")
    repo = f"ollama{uuid.uuid4().hex[:8]}/tiny"  # namespace/model, as Ollama names it
    src = open_repository(parse_registry_reference(f"{registry.host}/{repo}"))
    copy(OllamaStore(tmp_path / "ollama", name), "q8", src, "q8")
    ollama_manifest = parse_manifest_bytes(src.fetch_bytes(src.resolve("q8")))
    src.close()

    dst_repo = f"models/{uuid.uuid4().hex[:8]}"
    job = load_job(mirror_job(tmp_path / "job.toml",
                              {"source": f"{registry.host}/{repo}", "target": f"{registry2.host}/{dst_repo}",
                               "source_format": "ollama", "convert": "cncf"},
                              {"source": f"ollama://{registry.host}/{repo}:q8",
                               "target": f"{registry2.host}/{dst_repo}:same", "convert": "cncf"}))
    summary = run_job(job)
    assert summary.ok and len(summary.with_status("copied")) == 2, summary.format_text()
    assert api_manifest(registry2.host, dst_repo, "same") == api_manifest(registry2.host, dst_repo, "q8")
    data, _ = api_manifest(registry2.host, dst_repo, "q8")
    m = parse_manifest_bytes(data)
    assert m.artifactType == Family.CNCF.artifact_type
    layer_digests = {x.digest for x in m.layers}
    assert {x.digest for x in ollama_manifest.layers} <= layer_digests  # blobs reused as they are
    assert [a.reason for a in run_job(job).artifacts] == ["already mirrored"] * 2


def test_entries_into_separate_repositories_mount_shared_blobs(source, registry2, tmp_path) -> None:
    """Two models sharing base weights and a tokenizer, mirrored into two repositories of one
    target registry: the second entry mounts the shared blobs from the first repository (as
    Docker's blob-location cache does) instead of uploading them again."""
    first, second = (f"split/{uuid.uuid4().hex[:8]}" for _ in range(2))
    job = load_job(mirror_job(tmp_path / "job.toml",
                              {"source": f"{source['host']}/{source['repo']}:1.4.0",
                               "target": f"{registry2.host}/{first}"},
                              {"source": f"{source['host']}/{source['repo']}:1.5.0",
                               "target": f"{registry2.host}/{second}"}))
    summary = run_job(job)
    assert summary.ok, summary.format_text()
    one, two = summary.artifacts
    assert one.blobs_mounted == 0 and one.blobs_copied == one.blobs_planned
    shared = len(SHARED) + len(TOKENIZER)
    assert two.blobs_mounted == 2 and two.blobs_copied == two.blobs_planned - 2
    assert two.bytes_copied == two.bytes_planned - shared
    assert_identical(source["host"], source["repo"], registry2.host, first, ["1.4.0"])
    assert_identical(source["host"], source["repo"], registry2.host, second, ["1.5.0"])


def test_dry_run_lists_every_blob_of_every_artifact_as_the_run_treats_it(source, registry2, tmp_path) -> None:
    """Two artifacts sharing base weights and tokenizer, into another registry: every blob of
    each is listed, each shared blob as send for one and skip for the other (the copy of the
    one puts it there), none is left out; the run then sends exactly 8."""
    dst_repo = f"plan/{uuid.uuid4().hex[:8]}"
    job = load_job(mirror_job(tmp_path / "job.toml",
                              {"source": f"{source['host']}/{source['repo']}", "target": f"{registry2.host}/{dst_repo}",
                               "tags": {"allow": ["1.6.0", "1.7.0"]}, "referrers": False}))
    dry = run_job(job, dry_run=True)
    per_tag = {a.source.rsplit(":", 1)[-1]: Counter(action for _, _, action in a.blob_actions)
               for a in dry.artifacts}
    # artifacts are planned in parallel: which one sends a shared blob is a race, but each
    # lists all 5 of its blobs, each shared blob is sent once and skipped once, 8 are sent in all
    assert [sum(c.values()) for c in per_tag.values()] == [5, 5]
    assert sum((c for c in per_tag.values()), Counter()) == Counter(send=8, skip=2)
    sent_by = [{d for d, _, action in a.blob_actions if action == "send"} for a in dry.artifacts]
    assert not (sent_by[0] & sent_by[1])
    done = run_job(job)
    assert done.ok, done.format_text()
    t = done.totals()
    assert t["blobs_copied"] == 8 == dry.totals()["blobs_planned"] and t["blobs_mounted"] == 0
