"""``serve --scan quarantine`` through the real huggingface_hub client against serve as a process
over the suite's registry: a commit whose torch checkpoint runs ``os.system`` on load lands with
its flagged report, its owner reads it, a reader is refused (the Hub's 403 naming the
quarantine) on every route that hands out the model, and ``scan REF --release`` releases it."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import httpx
import huggingface_hub
import pytest
from huggingface_hub import HfApi, hf_hub_download
from huggingface_hub.errors import GatedRepoError, HfHubHTTPError
from serving import point_hub_at, serve_over

from ocibridge.cli import main
from ocibridge.oci.reference import parse_registry_reference
from ocibridge.scanning.stored import newest, stored_reports
from ocibridge.stores.registry import open_repository
from tests.signing_keys import key_pair
from tests.support.attacks import torch_zip

TOKENS = "owner-token user=owner write=qa/\nreader-token user=reader read=*\n"

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def blob_page(url: str, repo: str, token: str) -> httpx.Response:
    login = httpx.post(f"{url}/ocibridge/login", data={"token": token, "next": "/"})
    return httpx.get(f"{url}/{repo}/blob/main/pytorch_model.bin",
                     cookies={"ocibridge_session": login.cookies["ocibridge_session"]})


def xet_read(url: str, repo: str, token: str) -> httpx.Response:
    return httpx.get(f"{url}/api/models/{repo}/xet-read-token/main", headers={"authorization": f"Bearer {token}"})


def test_a_flagged_commit_lands_quarantined_and_only_its_owners_read_it_until_released(
        tmp_path: Path, registry, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    repo, payload = f"qa/quar-{uuid.uuid4().hex[:8]}", torch_zip()
    private, public = key_pair(tmp_path / "k")  # the owner's: serve trusts the reports it signs
    sources = lambda host: [host, "--plain-http", "--scan", "quarantine", "--scan-verify-key", str(public)]  # noqa: E731
    with serve_over(registry, tmp_path, TOKENS, sources) as url:
        point_hub_at(monkeypatch, url, tmp_path / "hub")
        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)
        owner, reader = HfApi(endpoint=url, token="owner-token"), HfApi(endpoint=url, token="reader-token")
        owner.create_repo(repo, exist_ok=True)
        owner.upload_file(path_or_fileobj=payload, path_in_repo="pytorch_model.bin", repo_id=repo)

        # landed: the branch moved to a manifest carrying its flagged report
        sha = owner.model_info(repo).sha
        store = open_repository(parse_registry_reference(f"{registry.host}/{repo}:latest"))
        subject = store.resolve("latest")
        assert subject.digest.removeprefix("sha256:")[:40] == sha
        found = newest(stored_reports(store, subject))
        assert found is not None and found.report.verdict == "flagged"

        mine = hf_hub_download(repo, "pytorch_model.bin", token="owner-token", cache_dir=tmp_path / "o")
        assert Path(mine).read_bytes() == payload

        with pytest.raises(GatedRepoError) as refused:
            hf_hub_download(repo, "pytorch_model.bin", token="reader-token", cache_dir=tmp_path / "r")
        assert refused.value.response.status_code == 403
        assert "quarantined" in str(refused.value) and "os.system" in str(refused.value)
        with pytest.raises(HfHubHTTPError) as info:
            reader.model_info(repo)
        assert info.value.response.status_code == 403 and "quarantined" in str(info.value)
        with pytest.raises(HfHubHTTPError):
            reader.list_repo_files(repo)
        assert xet_read(url, repo, "reader-token").status_code == 403
        assert blob_page(url, repo, "reader-token").status_code == 403  # the file's page obeys the same rule
        assert blob_page(url, repo, "owner-token").status_code == 200

        # released by its owner: the flagged report again, verdict "released", signed with the scan key
        ref = f"{registry.host}/{repo}:latest"
        assert main(["scan", ref, "--key", str(private), "--release"]) == 0
        assert newest(stored_reports(store, subject)).report.verdict == "released"  # type: ignore[union-attr]
        capsys.readouterr()
        assert main(["scan", ref, "--key", str(private), "--release"]) != 0  # nothing left to release
        assert "nothing to release: its newest scan report is released" in capsys.readouterr().err
        released = None
        for _ in range(200):  # the quarantine state is kept a few seconds: read again until it is
            try:
                released = hf_hub_download(repo, "pytorch_model.bin", token="reader-token",
                                           cache_dir=tmp_path / "r2")
                break
            except GatedRepoError:
                time.sleep(0.1)
        assert released is not None and Path(released).read_bytes() == payload
        assert reader.model_info(repo).sha == owner.model_info(repo).sha
        assert blob_page(url, repo, "reader-token").status_code == 200
        assert xet_read(url, repo, "reader-token").status_code == 200
