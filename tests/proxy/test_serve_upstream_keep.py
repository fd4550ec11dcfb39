"""``serve --upstream URL --upstream-keep DURATION`` (docs/lifetimes.md): a fetched commit no one read
for the lifetime loses its tags, the registry's own ``garbage-collect --delete-untagged`` frees its
blobs, and the next request fetches it again as the same digest; one a person tagged (pinned) or
copied to another repository (promoted) is kept. The proxy's registry is its own: the collection
stops it, which the session's shared registry cannot be; the upstream is the session's stand-in Hub
(upstream_proxy.py), the repositories made there this module's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import huggingface_hub
import pytest
from huggingface_hub import HfApi
from serving import ROOT, serve_over
from support.registry import RegistryProcess, garbage_collect
from upstream_proxy import UP_TOKEN, Proxied, manifest_of

import ocibridge
from ocibridge.api.copy import TransferOptions
from ocibridge.stores.tombstones import TOMBSTONE_DIGEST
from tests.modelgen import make_bert_model

pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning")

CLIENT_TOKEN = "client-token"
ACCEPT = "application/vnd.oci.image.manifest.v1+json"
#: seconds between the two reads of a moving branch: the dry run's lifetime (2 s less) falls between
#: them, the last read younger than it while serve stops and the dry run starts within 7 s of it
#: (a read's time is kept to the second; a loaded CI worker takes seconds to stop serve and start a process)
READ_GAP = 10
#: seconds: longer than a promoted revision's landing and copy, and a pinned one's tag, after its read
KEEP = 6


def digest(registry: RegistryProcess, repository: str, tag: str) -> str | None:
    answer = httpx.head(f"{registry.url}/v2/{repository}/manifests/{tag}", headers={"Accept": ACCEPT})
    return answer.headers.get("docker-content-digest") if answer.status_code == 200 else None


def landed(registry: RegistryProcess, repository: str, commit: str, timeout: float = 60) -> str:
    """The digest the commit's upstream tag names, once it landed (not the tombstone)."""
    until = time.monotonic() + timeout
    while (found := digest(registry, repository, f"ocibridge-upstream-{commit}")) in (None, TOMBSTONE_DIGEST):
        assert time.monotonic() < until, f"{repository}@{commit} never landed"
        time.sleep(0.2)
    assert found is not None
    return found


def weights_blob(registry: RegistryProcess, repository: str, tag: str) -> str:
    manifest = manifest_of(registry.url, repository, tag)
    return next(layer["digest"] for layer in manifest["layers"]
                if layer.get("annotations", {}).get("org.opencontainers.image.title") == "model.safetensors")


def blob_file(registry: RegistryProcess, blob: str) -> Path:
    hexpart = blob.split(":", 1)[1]
    return registry.storage / "docker/registry/v2/blobs/sha256" / hexpart[:2] / hexpart / "data"


def dry_run(registry: RegistryProcess, keep: str, root: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OCIBRIDGE_CACHE": str(root / "dry-cache")}
    done = subprocess.run([sys.executable, "-m", "ocibridge", "serve", f"{registry.host}/proxy", "--plain-http",
                           "--upstream-keep", keep, "--upstream-keep-dry-run", "--json"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def test_an_unread_revision_goes_and_comes_back_a_pinned_or_promoted_one_stays(tmp_path, monkeypatch,
                                                                               proxied: Proxied):
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)
    (tmp_path / "up-token.txt").write_text(UP_TOKEN + "\n")
    up = proxied.upstream  # the session's stand-in Hub: the repositories here are this module's
    upstream = HfApi(endpoint=up, token=UP_TOKEN)
    commits = {}
    for name in ("gone", "again", "pinned", "promoted"):
        upstream.create_repo(f"acme/{name}")
        commits[name] = upstream.upload_folder(repo_id=f"acme/{name}",
                                               folder_path=make_bert_model(tmp_path / "models" / name)).oid
    registry = RegistryProcess(tmp_path / "proxy-registry")
    (tmp_path / "proxy").mkdir()
    audit = tmp_path / "audit.jsonl"
    flags = ["--upstream", up, "--upstream-token-file", str(tmp_path / "up-token.txt"),
             "--audit-log", str(audit)]
    try:
        with serve_over(registry, tmp_path / "proxy", f"{CLIENT_TOKEN} write\n",
                        lambda host: [f"{host}/proxy", "--plain-http", *flags, "--upstream-keep", f"{KEEP}s"],
                        HF_HUB_DISABLE_XET="1") as proxy:
            api = HfApi(endpoint=proxy, token=CLIENT_TOKEN)

            def read(name: str) -> str:
                fresh = tmp_path / "hub" / f"{name}-{time.monotonic_ns()}"  # the bytes asked of the proxy
                path = huggingface_hub.hf_hub_download(f"acme/{name}", "model.safetensors", endpoint=proxy,
                                                       token=CLIENT_TOKEN, cache_dir=fresh)
                assert Path(path).read_bytes() == (tmp_path / "models" / name / "model.safetensors").read_bytes()
                found = landed(registry, f"proxy/acme/{name}", commits[name])
                until = time.monotonic() + 60  # main's tag is moved just after the commit landed
                while digest(registry, f"proxy/acme/{name}", "latest") != found:
                    assert time.monotonic() < until, f"acme/{name}: main never tagged {found}"
                    time.sleep(0.1)
                return found

            pinned = read("pinned")
            api.create_tag("acme/pinned", tag="keep-me", revision=commits["pinned"])  # a person's tag
            promoted = read("promoted")
            base = f"{registry.host}/proxy/acme"  # a person's copy (in this process: well within KEEP)
            ocibridge.copy_reference(f"{base}/promoted:latest", f"{base}/promoted-copy:v1",
                                     transfer=TransferOptions(plain_http=True))
            again = read("again")
            gone = read("gone")
            gone_weights = weights_blob(registry, "proxy/acme/gone", gone)
            pinned_weights = weights_blob(registry, "proxy/acme/pinned", pinned)
            until = time.monotonic() + KEEP + 90
            for name in ("again", "gone"):
                # the sweep moves a revision's tags to the tombstone one after another, main's last: both
                # polled (main's read just after the commit's could be the moment between the two)
                while (said := (digest(registry, f"proxy/acme/{name}", f"ocibridge-upstream-{commits[name]}"),
                                digest(registry, f"proxy/acme/{name}", "latest"))) != (TOMBSTONE_DIGEST,) * 2:
                    assert time.monotonic() < until, f"acme/{name} was never dropped (commit's tag, main's): {said}"
                    time.sleep(0.5)
            assert read("again") == again  # asked again of the same serve: fetched again, the same digest
            assert digest(registry, "proxy/acme/again", "latest") == again
            # read before acme/gone, so past their lifetime too: kept, and said why
            said = {r["repository"]: r for r in dry_run(registry, f"{KEEP}s", tmp_path)["revisions"]}
            assert not said["acme/pinned"]["drop"] and said["acme/pinned"]["why"].startswith("pinned: tag keep-me")
            assert not said["acme/promoted"]["drop"]
            assert said["acme/promoted"]["why"] == "promoted: acme/promoted-copy holds a copy"
            assert digest(registry, "proxy/acme/pinned", f"ocibridge-upstream-{commits['pinned']}") == pinned
            assert digest(registry, "proxy/acme/promoted", f"ocibridge-upstream-{commits['promoted']}") == promoted
        drops = [json.loads(line) for line in audit.read_text().splitlines()
                 if json.loads(line)["action"] == "upstream_drop"]
        dropped = sorted((d["repository"], d["commit"], d["digest"]) for d in drops)
        assert dropped == [("acme/again", commits["again"], again), ("acme/gone", commits["gone"], gone)]
        gone_drop = next(d for d in drops if d["repository"] == "acme/gone")
        assert gone_drop["bytes"] >= blob_file(registry, gone_weights).stat().st_size
        assert "latest" in gone_drop["tags"]

        said = garbage_collect(registry)  # the registry stopped, its own collection run on its storage
        assert not blob_file(registry, gone_weights).exists(), said
        assert blob_file(registry, pinned_weights).exists()
        registry = RegistryProcess(registry.workdir)  # the same storage, a new port
        with serve_over(registry, tmp_path / "proxy", f"{CLIENT_TOKEN}\n",
                        lambda host: [f"{host}/proxy", "--plain-http", *flags], HF_HUB_DISABLE_XET="1") as proxy:
            path = huggingface_hub.hf_hub_download("acme/gone", "model.safetensors", endpoint=proxy,
                                                   token=CLIENT_TOKEN, cache_dir=tmp_path / "hub" / "again")
            assert Path(path).read_bytes() == (tmp_path / "models" / "gone" / "model.safetensors").read_bytes()
            assert landed(registry, "proxy/acme/gone", commits["gone"]) == gone  # fetched again: the same digest
            assert blob_file(registry, gone_weights).exists()
    finally:
        registry.stop()


def test_keep_flags_are_checked_in_one_line(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OCIBRIDGE_CACHE": str(tmp_path / "cache")}
    for args, said in ((["--upstream-keep", "soon", "--upstream-keep-dry-run"], "--upstream-keep soon: expected a "
                        "duration above zero"),
                       (["--upstream-keep-dry-run"], "--upstream-keep-dry-run goes with --upstream-keep DURATION"),
                       (["--upstream-keep", "30d"], "the --upstream-* flags go with --upstream URL"),
                       (["--upstream", "http://127.0.0.1:9", "--upstream-keep", "0s"], "--upstream-keep 0s: expected")):
        done = subprocess.run([sys.executable, "-m", "ocibridge", "serve", "localhost:5000/proxy", *args],
                              env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
        assert said in done.stderr, done.stderr


@pytest.mark.parametrize("text,seconds", [("30d", 30 * 86400), ("12h", 43200), ("90m", 5400), ("45", 45.0),
                                          ("1.5s", 1.5), ("2w", 14 * 86400)])
def test_durations(text, seconds):
    from ocibridge.api.durations import parse_duration

    assert parse_duration(text) == seconds


def test_k8s_serve_hands_the_lifetime_to_every_pod(capsys):
    import yaml

    from ocibridge.cli import main

    assert main(["k8s", "serve", "registry.internal:5000/proxied", "--upstream", "https://huggingface.co",
                 "--upstream-keep", "30d", "--replicas", "2", "--no-docker-config"]) == 0
    docs = [d for d in yaml.safe_load_all(capsys.readouterr().out) if d]
    pods = [d["spec"]["template"]["spec"] for d in docs if d["kind"] == "Deployment"]
    assert len(pods) == 2  # the writer sweeps, the readers record their reads
    for pod in pods:
        args = pod["containers"][0]["args"]
        assert args[args.index("--upstream-keep") + 1] == "2592000s"


def test_a_branch_read_keeps_its_head_the_commit_it_moved_from_goes(tmp_path, monkeypatch, proxied: Proxied):
    """main read, moved at the upstream, read again (the proxy re-checks it and fetches the new head):
    under a lifetime between the two reads the new head stays (read) and the old one would go."""
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)
    (tmp_path / "up-token.txt").write_text(UP_TOKEN + "\n")
    up = proxied.upstream  # the session's stand-in Hub, shared: the repository name is this test's alone
    upstream = HfApi(endpoint=up, token=UP_TOKEN)
    upstream.create_repo("acme/moving-kept")
    first = upstream.upload_folder(repo_id="acme/moving-kept", folder_path=make_bert_model(tmp_path / "moving")).oid
    registry = RegistryProcess(tmp_path / "proxy-registry")
    (tmp_path / "proxy").mkdir()
    flags = ["--upstream", up, "--upstream-token-file", str(tmp_path / "up-token.txt"), "--upstream-fresh", "0.5",
             "--upstream-keep", "30d"]
    try:
        with serve_over(registry, tmp_path / "proxy", f"{CLIENT_TOKEN}\n",
                        lambda host: [f"{host}/proxy", "--plain-http", *flags], HF_HUB_DISABLE_XET="1") as proxy:
            api = HfApi(endpoint=proxy, token=CLIENT_TOKEN)
            assert api.model_info("acme/moving-kept").sha == first
            old = landed(registry, "proxy/acme/moving-kept", first)
            second = upstream.upload_file(path_or_fileobj=b"moved\n", path_in_repo="MOVED.md",
                                          repo_id="acme/moving-kept").oid
            time.sleep(READ_GAP)
            until = time.monotonic() + 60
            while api.model_info("acme/moving-kept").sha != second:  # re-checked: the new head fetched
                assert time.monotonic() < until, "main never moved"
                time.sleep(0.5)
            new = landed(registry, "proxy/acme/moving-kept", second)
            assert digest(registry, "proxy/acme/moving-kept", "latest") == new
        said = {r["commit"]: r for r in dry_run(registry, f"{READ_GAP - 2}s", tmp_path)["revisions"]}
        assert said[first]["drop"] and said[first]["digest"] == old and said[first]["tags"] == [
            f"ocibridge-upstream-{first}", f"ocibridge-commit-{old.split(':')[1][:40]}"]
        assert not said[second]["drop"] and said[second]["why"].startswith("read "), said[second]
    finally:
        registry.stop()


def test_a_reads_record_deleted_or_not_one_starts_again_a_written_one_reads_back(registry, unique_repo):
    from ocibridge.hubserver.lifetimes.readsrecord import ReadsRecord, read_reads, write_reads
    from ocibridge.hubserver.repo.deletes import bury
    from ocibridge.hubserver.repo.refsrecord import RefsRecord, write_record
    from ocibridge.hubserver.repo.sources import RegistrySource
    from ocibridge.stores.registry.options import RegistryOptions

    source = RegistrySource(registry.host, unique_repo, RegistryOptions(plain_http=True, max_retries=0))
    repo = source.repository(["acme", "kept"])
    assert repo is not None
    assert read_reads(repo) == ReadsRecord()  # none yet
    written = ReadsRecord({"a" * 40: 1700000000}, {"latest": "a" * 40})
    write_reads(repo, written)
    assert read_reads(repo) == written
    assert read_reads(repo).merged({"a" * 40: 1600000000, "b" * 40: 5}, {"dev": "b" * 40}) == ReadsRecord(
        {"a" * 40: 1700000000, "b" * 40: 5}, {"latest": "a" * 40, "dev": "b" * 40})
    store = repo.store
    write_record(repo, store, RefsRecord())  # another manifest under the reads tag: not a reads record
    refs = store.resolve(repo.reference("ocibridge-refs"))
    store.tag(refs, repo.reference("ocibridge-reads"))
    assert read_reads(repo) == ReadsRecord()
    bury(store, repo, ["ocibridge-reads"])  # a deleted repository's tags name the tombstone
    assert read_reads(repo) == ReadsRecord()
    source.close()
