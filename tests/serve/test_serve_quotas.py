"""serve --quotas (docs/quotas.md): a namespace at its limit gets the Hub's 403 on every write
route with nothing written, a repository count past its limit refuses create_repo, usage is on
/metrics and printed by ``ocibridge serve-usage`` as docs/quotas.md shows it. Over a registry of
its own (its catalog only what this test writes) and serve as a process."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import huggingface_hub
import pytest
from huggingface_hub import CommitOperationAdd, HfApi
from huggingface_hub.errors import HfHubHTTPError
from serving import ROOT, own_registry_and_serve
from support.publishing import model_dir

from ocibridge.oci.bookkeeping import LEASE_REPO
from tests.docrun import FENCE, doc_text

pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning")

TOKENS = "acme-token write acme/ alice\nother-token write other/ olga\n"
ACME = {"authorization": "Bearer acme-token"}
FULL = "Storage limit reached: the namespace acme"


def doc_block(lang: str) -> str:
    """The first ``lang`` block of docs/quotas.md, as printed."""
    return next(m[2] for m in FENCE.finditer(doc_text("quotas.md")) if m[1] == lang)


def registry_state(registry: str) -> dict[str, dict[str, str]]:
    """Every repository of the registry, each tag and the digest it names: what a refused write
    must leave as it was (less serve's writer lease, renewed as it runs)."""
    names = [n for n in httpx.get(f"{registry}/v2/_catalog").json().get("repositories") or []
             if not n.endswith(f"/{LEASE_REPO}")]
    state: dict[str, dict[str, str]] = {}
    for name in names:
        tags = httpx.get(f"{registry}/v2/{name}/tags/list").json().get("tags") or []
        state[name] = {tag: httpx.head(f"{registry}/v2/{name}/manifests/{tag}", headers={
            "Accept": "application/vnd.oci.image.manifest.v1+json"}).headers.get("docker-content-digest", "")
            for tag in tags}
    return state


def rewrite(path: Path, text: str) -> None:
    """The quotas file changed as an operator changes it; serve looks at it again within a second."""
    path.write_text(text)
    time.sleep(1.2)


def metric(url: str, name: str, namespace: str) -> float | None:
    page = httpx.get(f"{url}/metrics").text
    found = re.search(rf'^{name}{{namespace="{namespace}"}} (\S+)$', page, re.M)
    return float(found[1]) if found else None


def refused(answer: httpx.Response) -> None:
    assert answer.status_code == 403, answer.text
    assert answer.headers.get("x-error-code") is None  # the Hub's storage answer has none: no client error class
    assert FULL in answer.headers["x-error-message"]


def test_a_namespace_at_its_limit_is_refused_on_every_write_route_and_nothing_is_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)  # LFS: preupload, the batch
    quotas = tmp_path / "quotas.toml"
    quotas.write_text(doc_block("toml"))  # docs/quotas.md's file, as printed: acme 64M, 2 repositories
    with own_registry_and_serve(tmp_path, TOKENS, lambda host: [f"{host}/hub", "--plain-http",
                                                                "--quotas", str(quotas)]) as (url, registry):
        api = HfApi(endpoint=url, token="acme-token")
        api.create_repo("acme/one")
        api.upload_folder(repo_id="acme/one", folder_path=model_dir(tmp_path / "model"))  # 3 MiB, within 64M
        used = metric(url, "ocibridge_serve_namespace_bytes", "acme")
        assert used is not None and 3 * 1024 ** 2 < used < 4 * 1024 ** 2
        assert metric(url, "ocibridge_serve_namespace_bytes_limit", "acme") == 64 * 1024 ** 2
        assert metric(url, "ocibridge_serve_namespace_repos", "acme") == 1

        # the docs' serve-usage block, run as printed, prints the docs' table
        work = tmp_path / "reader"
        work.mkdir()
        (work / "quotas.toml").write_text(doc_block("toml"))
        env = {**os.environ, "PYTHONPATH": str(ROOT), "REGISTRY": registry.host,
               "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
        printed = subprocess.run(["bash", "-euo", "pipefail", "-c", doc_block("sh")], cwd=work, env=env,
                                 capture_output=True, text=True, timeout=120)
        assert printed.returncode == 0, printed.stderr
        assert printed.stdout.strip() == doc_block("text").strip()

        api.create_repo("acme/data", repo_type="dataset")  # a dataset of acme's: the same namespace
        api.upload_file(path_or_fileobj=b"a,b\n", path_in_repo="data.csv", repo_id="acme/data", repo_type="dataset")
        assert metric(url, "ocibridge_serve_namespace_repos", "acme") == 2

        # the quota lowered under what acme holds: at its limit, read again without a restart
        rewrite(quotas, '[namespaces.acme]\nbytes = "1M"\nrepos = 3\n')
        before = registry_state(registry.url)
        with pytest.raises(HfHubHTTPError) as upload:
            api.upload_folder(repo_id="acme/one", folder_path=model_dir(tmp_path / "second"))
        assert upload.value.response.status_code == 403 and FULL in str(upload.value)
        with pytest.raises(HfHubHTTPError) as inline:
            api.create_commit("acme/one", [CommitOperationAdd("NOTES.md", b"a small inline file\n")],
                              commit_message="notes")
        assert inline.value.response.status_code == 403
        refused(httpx.post(f"{url}/api/models/acme/one/preupload/main", headers=ACME,
                           json={"files": [{"path": "x.bin", "size": 10, "sample": ""}]}))
        data = os.urandom(4096)
        refused(httpx.post(f"{url}/acme/one.git/info/lfs/objects/batch", headers=ACME, json={
            "operation": "upload", "objects": [{"oid": hashlib.sha256(data).hexdigest(), "size": len(data)}]}))
        # the commit route itself (no preupload before it): inline bytes and an LFS pointer
        lines = [{"key": "header", "value": {"summary": "past the quota"}},
                 {"key": "file", "value": {"path": "a.txt", "content": base64.b64encode(b"x").decode(),
                                           "encoding": "base64"}}]
        refused(httpx.post(f"{url}/api/models/acme/one/commit/main", headers={
            **ACME, "content-type": "application/x-ndjson"}, content=b"".join(json.dumps(x).encode() + b"\n"
                                                                            for x in lines)))
        refused(httpx.get(f"{url}/api/models/acme/one/xet-write-token/main", headers=ACME))
        refused(httpx.get(f"{url}/api/datasets/acme/data/xet-write-token/main", headers=ACME))  # Xet: no grant
        refused(httpx.post(f"{url}/datasets/acme/data.git/info/lfs/objects/batch", headers=ACME, json={
            "operation": "upload", "objects": [{"oid": hashlib.sha256(data).hexdigest(), "size": len(data)}]}))
        with pytest.raises(HfHubHTTPError) as dataset:
            api.upload_file(path_or_fileobj=b"c,d\n", path_in_repo="more.csv", repo_id="acme/data",
                            repo_type="dataset")
        assert dataset.value.response.status_code == 403 and FULL in str(dataset.value)
        with pytest.raises(HfHubHTTPError) as private:  # a new repository's first commit: storage too
            api.create_repo("acme/private", private=True)
        assert private.value.response.status_code == 403 and FULL in str(private.value)
        assert registry_state(registry.url) == before  # not even the private one's record
        rewrite(quotas, '[namespaces.acme]\nbytes = "1M"\nrepos = 1\n')
        with pytest.raises(HfHubHTTPError) as second:  # the repository count: 2 held, 1 allowed
            api.create_repo("acme/two")
        assert second.value.response.status_code == 403 and "Repository limit reached" in str(second.value)
        api.create_repo("acme/one", exist_ok=True)  # not a new one: not refused
        assert registry_state(registry.url) == before  # nothing of any refused write landed

        # another namespace is not acme's: its writes land
        other = HfApi(endpoint=url, token="other-token")
        other.create_repo("other/x")
        other.upload_file(path_or_fileobj=b"fine\n", path_in_repo="README.md", repo_id="other/x")
        assert "latest" in registry_state(registry.url)["hub/other/x"]

        # room again (the file changed once more): acme writes
        rewrite(quotas, '[namespaces.acme]\nbytes = "64M"\nrepos = 2\n')
        api.create_commit("acme/one", [CommitOperationAdd("NOTES.md", b"a small inline file\n")],
                          commit_message="notes")
        assert registry_state(registry.url)["hub/acme/one"]["latest"] != before["hub/acme/one"]["latest"]


def test_a_commit_past_the_quota_is_refused_by_its_new_bytes_and_a_shared_blob_costs_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)
    quotas = tmp_path / "quotas.toml"
    quotas.write_text('[namespaces.acme]\nbytes = "5M"\n')
    with own_registry_and_serve(tmp_path, TOKENS, lambda host: [f"{host}/hub", "--plain-http",
                                                                "--quotas", str(quotas)]) as (url, registry):
        api = HfApi(endpoint=url, token="acme-token")
        model = model_dir(tmp_path / "model")
        api.create_repo("acme/one")
        api.upload_folder(repo_id="acme/one", folder_path=model)  # 3 MiB of 5
        api.create_repo("acme/copy")
        api.upload_folder(repo_id="acme/copy", folder_path=model)  # the same blobs: nothing more
        used = metric(url, "ocibridge_serve_namespace_bytes", "acme")
        assert used is not None and used < 4 * 1024 ** 2
        before = registry_state(registry.url)
        with pytest.raises(HfHubHTTPError) as past:  # 3 MiB more would be 6 of 5
            api.upload_folder(repo_id="acme/one", folder_path=model_dir(tmp_path / "another"))
        assert past.value.response.status_code == 403 and "this write would add 3.0 MiB" in str(past.value)
        assert registry_state(registry.url) == before


def test_a_quotas_file_that_is_not_one_stops_serve_with_one_line(tmp_path: Path):
    bad = tmp_path / "quotas.toml"
    bad.write_text('[namespaces.acme]\nbytes = "lots"\n')
    run = subprocess.run([sys.executable, "-m", "ocibridge", "serve", "oci:" + str(tmp_path / "layout"),
                          "--quotas", str(bad)], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert run.returncode != 0 and "Traceback" not in run.stderr
    assert run.stderr.strip().splitlines() == [
        f"ocibridge: error: --quotas {bad} [namespaces.acme] bytes: 'lots' is not a byte count (use e.g. 500K, 20M, "
        "1G) (see 'ocibridge serve --help')"]
