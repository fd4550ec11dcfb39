"""serve's staging area is cleaned and bounded (issue 55): a landed commit leaves nothing of its
uploads behind, an upload no commit names goes after ``--staging-expiry``, and an upload past
``--staging-budget`` is refused with the Hub's 507 before a byte of it is kept. serve runs as
its own process, publishing to the real registry."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import httpx
import huggingface_hub
import pytest
from huggingface_hub import HfApi
from huggingface_hub.errors import HfHubHTTPError
from serving import point_hub_at
from support.publishing import MIB, model_dir, serve_process, tag_digest

pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning")

HEADERS = {"authorization": "Bearer writer-token"}


def staged(root: Path) -> list[str]:
    """What the staging area holds apart from Xet's xorbs (kept for shards to come) and whose they
    are (xorb-owners/: a xorb's marks go with it, xet/owners.py)."""
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*")
                  if p.is_file() and p.relative_to(root).parts[0] not in ("xorbs", "xorb-owners"))


def grant(url: str, repo: str, data: bytes) -> str:
    """The URL the LFS batch API says to PUT ``data`` at."""
    oid = hashlib.sha256(data).hexdigest()
    batch = {"operation": "upload", "transfers": ["basic"], "objects": [{"oid": oid, "size": len(data)}]}
    answer = httpx.post(f"{url}/{repo}.git/info/lfs/objects/batch", json=batch, headers=HEADERS)
    assert answer.status_code == 200, answer.text
    return str(answer.json()["objects"][0]["actions"]["upload"]["href"])


def put_object(url: str, repo: str, data: bytes) -> httpx.Response:
    """An LFS batch for ``data``, then its PUT (no commit after)."""
    return httpx.put(grant(url, repo, data), content=data, timeout=60)


def test_staging_is_emptied_by_commits_expired_when_abandoned_and_bounded(tmp_path, registry, unique_repo,
                                                                           monkeypatch):
    src = model_dir(tmp_path / "model")  # a 3 MiB safetensors file, and two small ones
    prefix = f"{registry.host}/{unique_repo}"
    root = Path(os.environ["OCIBRIDGE_CACHE"]) / "serve" / "staging"
    with serve_process(tmp_path, prefix, "--staging-budget", "6M", "--staging-expiry", "3") as url:
        point_hub_at(monkeypatch, url, tmp_path / "hub")
        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)
        api = HfApi(endpoint=url, token="writer-token")
        api.create_repo("acme/lfs")
        api.upload_folder(repo_id="acme/lfs", folder_path=src)
        assert staged(root) == []  # the commit landed: nothing of it stays

        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", False)
        api.create_repo("acme/xet")
        api.upload_folder(repo_id="acme/xet", folder_path=src)  # over Xet: rebuilt into staging, then committed
        assert staged(root) == []

        # abandoned: uploaded, never committed; gone once untouched for --staging-expiry
        assert put_object(url, "acme/lfs", b"never committed").status_code == 200
        oid = hashlib.sha256(b"never committed").hexdigest()
        assert [p for p in staged(root) if not p.startswith("pins/")] == [f"sha256/{oid}"]
        deadline = time.monotonic() + 15
        while staged(root) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert staged(root) == []

        # over the budget: the Hub's 507, the message naming the flag, nothing staged, the tag unchanged
        before = tag_digest(f"{prefix}/acme/lfs:latest")
        with pytest.raises(Exception, match="507 Insufficient Storage"):  # hf_xet's words: the shard refused
            api.upload_file(path_or_fileobj=os.urandom(7 * MIB), path_in_repo="big.bin", repo_id="acme/lfs")
        assert staged(root) == []
        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)
        with pytest.raises(HfHubHTTPError) as full:
            api.upload_file(path_or_fileobj=os.urandom(7 * MIB), path_in_repo="big.bin", repo_id="acme/lfs")
        assert full.value.response.status_code == 507 and "--staging-budget" in str(full.value)
        assert staged(root) == []
        # a PUT granted before the budget filled is refused at its start (uploads in flight reserve room)
        late, early = os.urandom(3 * MIB), os.urandom(4 * MIB)
        href = grant(url, "acme/lfs", late)
        assert put_object(url, "acme/lfs", early).status_code == 200
        refused = httpx.put(href, content=late, timeout=60)
        assert refused.status_code == 507 and "--staging-budget" in refused.json()["error"]
        assert not (root / "sha256" / hashlib.sha256(late).hexdigest()).exists()
        assert tag_digest(f"{prefix}/acme/lfs:latest") == before
