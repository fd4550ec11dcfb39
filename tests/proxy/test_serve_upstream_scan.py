"""serve's ``--upstream-scan refuse``: each file the proxy fetches is scanned by its content
(ocibridge/scanning) before its last byte reaches a reader; a flagged one refuses its commit as the
pickle rule does (the Hub's 403 naming the file, the finding and the scanner; nothing tagged), with
``--upstream-allow-pickle`` too: that flag lets pickles in, not pickles that run code. A clean
commit lands with its scan report attached. Against the real processes of tests/upstream_proxy.py:
one more serve over the same registry and upstream, the attack files of tests/support/attacks.py
published there one repository each."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import huggingface_hub
import pytest
from huggingface_hub import CommitOperationAdd, HfApi
from serving import serve_over
from signing_keys import key_pair
from support.attacks import attack_tree
from upstream_proxy import CLIENT_TOKEN, UP_TOKEN, Proxied, lfs_only  # noqa: F401 - autouse: over LFS

from ocibridge.oci.models import parse_manifest_bytes
from ocibridge.scanning.report import REPORT_MEDIA_TYPE
from ocibridge.scanning.stored import stored_reports
from ocibridge.signing.keys import load_public_key
from ocibridge.stores.registry import open_repository

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
HEADERS = {"Authorization": f"Bearer {CLIENT_TOKEN}"}
ATTACKS = attack_tree()
PREFIX = "scanning"


@pytest.fixture(scope="module")
def scanning(proxied: Proxied, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """(the scanning proxy, its audit log; it signs with keys/cosign.key), every attack published
    upstream as attack/a<n>."""
    up = HfApi(endpoint=proxied.upstream, token=UP_TOKEN)
    for n, (path, data) in enumerate(ATTACKS.items()):
        up.create_repo(f"attack/a{n}")
        up.create_commit(f"attack/a{n}", [CommitOperationAdd("config.json", b"{}"), CommitOperationAdd(path, data)],
                         commit_message="an attack")  # one commit of both: the fetch sees only main
    root = tmp_path_factory.mktemp("scanproxy")
    key, _ = key_pair(root / "keys")
    flags = ["--upstream", proxied.upstream, "--upstream-token-file", str(proxied.root / "up-token.txt"),
             "--upstream-scan", "refuse", "--upstream-allow-pickle", "--audit-log", str(root / "audit.jsonl"),
             "--sign-key", str(key)]
    with serve_over(proxied.registry, root, f"{CLIENT_TOKEN}\n",
                    lambda host: [f"{host}/{PREFIX}", "--plain-http", *flags], HF_HUB_DISABLE_XET="1") as proxy:
        yield proxy, root / "audit.jsonl"


def _ingests(audit: Path, repo: str, timeout: float = 60) -> list[dict]:
    until = time.monotonic() + timeout
    while True:
        lines = [json.loads(x) for x in audit.read_text().splitlines()] if audit.exists() else []
        found = [e for e in lines if e["action"] == "upstream_ingest" and e["repository"] == repo]
        if found or time.monotonic() > until:
            return found
        time.sleep(0.1)


@pytest.mark.parametrize("n", range(len(ATTACKS)), ids=list(ATTACKS))
def test_an_attack_file_is_refused_naming_the_file_the_finding_and_the_scanner(proxied: Proxied, scanning, n: int,
                                                                             tmp_path: Path):
    proxy, audit = scanning
    repo, path = f"attack/a{n}", list(ATTACKS)[n]
    httpx.get(f"{proxy}/api/models/{repo}/revision/main", headers=HEADERS, timeout=60)  # starts the fetch
    [line] = _ingests(audit, repo)
    assert line["outcome"] == "refused" and line["status"] == 403
    assert f"{path}" in line["reason"] and "[scanner: ocibridge-scan" in line["reason"], line
    with pytest.raises(huggingface_hub.errors.HfHubHTTPError) as refused:  # the file itself: never served
        huggingface_hub.hf_hub_download(repo, path, endpoint=proxy, token=CLIENT_TOKEN, cache_dir=tmp_path)
    assert refused.value.response.status_code == 403
    said = refused.value.response.headers["x-error-message"]
    assert path in said and "[scanner: ocibridge-scan" in said and "--upstream-scan" in said
    assert ": high: " in said or ": critical: " in said  # the finding, with its severity
    assert [t for t in proxied.tags(f"{PREFIX}/{repo}") if t != "ocibridge-refs"] == []


def test_a_benign_model_lands_with_its_clean_scan_report_signed(proxied: Proxied, scanning, tmp_path: Path):
    proxy, audit = scanning
    public = load_public_key(audit.parent / "keys" / "cosign.pub")
    api = HfApi(endpoint=proxy, token=CLIENT_TOKEN)
    got = api.hf_hub_download("acme/tiny", "model.safetensors", revision=proxied.main, cache_dir=tmp_path)
    assert Path(got).read_bytes() == (proxied.model / "model.safetensors").read_bytes()
    proxied.landed(f"{PREFIX}/acme/tiny", proxied.main)
    assert [e["outcome"] for e in _ingests(audit, "acme/tiny")] == ["landed"]
    with open_repository(host=proxied.registry.host, repository=f"{PREFIX}/acme/tiny", plain_http=True) as store:
        subject = store.resolve(f"ocibridge-upstream-{proxied.main}")
        (found,) = stored_reports(store, subject, [("proxy", public)])  # signed with serve's key, verified
    assert found.signed and found.verified_by == "proxy"
    assert found.report.verdict == "clean" and found.report.subject == subject.digest
    assert {"model.safetensors", "config.json", "extra/notes.md"} <= {f.path for f in found.report.files}


@pytest.fixture(scope="module")
def writing(proxied: Proxied, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """serve's own write routes with ``--scan refuse``, over the session's registry."""
    root = tmp_path_factory.mktemp("scanwrite")
    with serve_over(proxied.registry, root, "writer write\n",
                    lambda host: [f"{host}/scanwrite", "--plain-http", "--scan", "refuse"]) as url:
        yield url


@pytest.mark.parametrize("n", range(len(ATTACKS)), ids=list(ATTACKS))
def test_a_commit_of_an_attack_file_through_serve_is_refused_and_nothing_lands(proxied: Proxied, writing: str,
                                                                              n: int):
    api = HfApi(endpoint=writing, token="writer")
    repo, path = f"attack/w{n}", list(ATTACKS)[n]
    api.create_repo(repo)
    before = api.model_info(repo).sha
    with pytest.raises(huggingface_hub.errors.HfHubHTTPError) as refused:
        api.upload_file(path_or_fileobj=ATTACKS[path], path_in_repo=path, repo_id=repo)
    assert refused.value.response.status_code == 400
    said = refused.value.response.headers["x-error-message"]
    assert path in said and "[scanner: ocibridge-scan" in said and "was not moved" in said, said
    assert api.model_info(repo).sha == before  # the branch where it was
    assert path not in api.list_repo_files(repo)


def test_a_benign_commit_through_serve_lands_with_its_clean_report(proxied: Proxied, writing: str):
    api = HfApi(endpoint=writing, token="writer")
    api.create_repo("benign/tiny")
    sha = api.upload_folder(repo_id="benign/tiny", folder_path=proxied.model).oid
    assert api.model_info("benign/tiny").sha == sha
    with open_repository(host=proxied.registry.host, repository="scanwrite/benign/tiny", plain_http=True) as store:
        subject = store.resolve("latest")
        reports = store.referrers(subject, REPORT_MEDIA_TYPE)
        held = parse_manifest_bytes(store.fetch_bytes(reports[-1]), reports[-1].mediaType)
        assert json.loads(store.fetch_bytes(held.layers[0]))["verdict"] == "clean"


def test_a_file_a_cut_fetch_left_whole_is_scanned_before_it_is_adopted(tmp_path: Path):
    """A resumed fetch adopts a file the last one left checked in the snapshot: scanned all the same."""
    import hashlib

    from ocibridge.hubserver.upstream.scanned import CommitScan, ScanFlagged
    from ocibridge.hubserver.upstream.tee import FileFlight

    data = ATTACKS["model.keras"]
    final = tmp_path / "snapshots" / "c0" / "model.keras"
    final.parent.mkdir(parents=True)
    final.write_bytes(data)
    scan = CommitScan("attack/kept", "c0")
    flight = FileFlight("model.keras", len(data), "sha256", hashlib.sha256(data).hexdigest(), tmp_path / "partial",
                        final, scan=scan.judge)
    with pytest.raises(ScanFlagged) as refused:
        flight.adopt()
    assert "model.keras" in str(refused.value) and "[scanner: ocibridge-scan" in str(refused.value)
    assert not final.exists() and not flight.checked and flight.error == str(refused.value)
