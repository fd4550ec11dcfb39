"""``serve --scan quarantine`` trusts only scan reports signed by a key it is given: serve itself
(as a process over the suite's registry, read by the real huggingface_hub client) flags a commit
with its report signed by its ``--sign-key``; a "clean" report anyone who may push attaches
unsigned on top, and a release signed by a key serve was not given, release nothing; the owner's
release signed by its ``--scan-verify-key`` does. Without any key to trust, serve does not start."""

from __future__ import annotations

import dataclasses
import time
import uuid
from pathlib import Path

import huggingface_hub
import pytest
from huggingface_hub import HfApi, hf_hub_download
from huggingface_hub.errors import GatedRepoError, HfHubHTTPError
from serving import point_hub_at, serve_over

from ocibridge.cli import main
from ocibridge.core.environment import SERVE_STATE_KEEP
from ocibridge.oci.reference import parse_registry_reference
from ocibridge.scanning.files import now
from ocibridge.scanning.stored import attach_report, newest, stored_reports
from ocibridge.signing.keys import load_public_key
from ocibridge.stores.registry import open_repository
from tests.signing_keys import key_pair
from tests.support.attacks import torch_zip

TOKENS = "owner-token user=owner write=qa/\nreader-token user=reader read=*\n"

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

#: seconds serve keeps a manifest's state (its default is 5): each refusal below waits it out
KEPT_FOR = 0.5


def reader_refused(repo: str, cache: Path) -> str:
    """The reader's download refused while the model is held: the refusal's text."""
    time.sleep(KEPT_FOR + 0.5)  # serve keeps a manifest's state this long: past it, the reports are read again
    with pytest.raises(GatedRepoError) as refused:
        hf_hub_download(repo, "pytorch_model.bin", token="reader-token", cache_dir=cache)
    assert refused.value.response.status_code == 403
    return str(refused.value)


def test_an_unsigned_clean_report_or_a_foreign_release_leaves_the_model_quarantined(
        tmp_path: Path, registry, monkeypatch: pytest.MonkeyPatch):
    repo, payload = f"qa/trust-{uuid.uuid4().hex[:8]}", torch_zip()
    serve_key, serve_pub = key_pair(tmp_path / "serve", "serve")
    owner_key, owner_pub = key_pair(tmp_path / "owner", "owner")
    stranger_key, _ = key_pair(tmp_path / "stranger", "stranger")
    sources = lambda host: [host, "--plain-http", "--scan", "quarantine", "--sign-key", str(serve_key),  # noqa: E731
                            "--scan-verify-key", str(owner_pub)]
    with serve_over(registry, tmp_path, TOKENS, sources, **{SERVE_STATE_KEEP: str(KEPT_FOR)}) as url:
        point_hub_at(monkeypatch, url, tmp_path / "hub")
        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)
        owner, reader = HfApi(endpoint=url, token="owner-token"), HfApi(endpoint=url, token="reader-token")
        owner.create_repo(repo, exist_ok=True)
        owner.upload_file(path_or_fileobj=payload, path_in_repo="pytorch_model.bin", repo_id=repo)
        ref = f"{registry.host}/{repo}:latest"
        store = open_repository(parse_registry_reference(ref))
        subject = store.resolve("latest")
        signed = newest(stored_reports(store, subject, [("serve", load_public_key(serve_pub))]))
        assert signed is not None and signed.report.verdict == "flagged"  # serve's own report, signed
        assert "os.system" in reader_refused(repo, tmp_path / "r0")

        # a release signed by a key serve was not given: the newest report, and anyone's word
        assert main(["scan", ref, "--key", str(stranger_key), "--release"]) == 0
        assert newest(stored_reports(store, subject)).report.verdict == "released"  # type: ignore[union-attr]
        assert "os.system" in reader_refused(repo, tmp_path / "r1")

        # a "clean" report attached unsigned on top: the newest of all, decides nothing
        cleaned = tuple(dataclasses.replace(f, findings=()) for f in signed.report.files)
        forged = dataclasses.replace(signed.report, files=cleaned, scanned_at=now(), released=False)
        attach_report(store, subject, forged)
        assert newest(stored_reports(store, subject)).report.verdict == "clean"  # type: ignore[union-attr]
        assert "os.system" in reader_refused(repo, tmp_path / "r2")
        with pytest.raises(HfHubHTTPError) as info:
            reader.model_info(repo)
        assert info.value.response.status_code == 403 and "quarantined" in str(info.value)

        # the owner's release, signed by the --scan-verify-key serve trusts, lets it out
        assert main(["scan", ref, "--key", str(owner_key), "--release"]) == 0
        released = None
        for _ in range(200):  # read again once serve's kept state expires
            try:
                released = hf_hub_download(repo, "pytorch_model.bin", token="reader-token", cache_dir=tmp_path / "r3")
                break
            except GatedRepoError:
                time.sleep(0.1)
        assert released is not None and Path(released).read_bytes() == payload


def test_quarantine_without_a_key_to_trust_is_one_error_line(registry, capsys: pytest.CaptureFixture[str]):
    assert main(["serve", registry.host, "--plain-http", "--scan", "quarantine", "--listen", "127.0.0.1:0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--scan quarantine releases a model on a signed scan report only" in err
    assert "Traceback" not in err
    assert main(["serve", registry.host, "--plain-http", "--scan-verify-key", "x.pub"]) == 2
    assert "--scan-verify-key goes with --scan quarantine" in capsys.readouterr().err
