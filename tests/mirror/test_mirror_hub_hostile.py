"""Hub sync from a hostile Hub endpoint (issue 52, "Also"): tests/support/hostile_hub.py runs
as its own process and lies as a compromised or malicious endpoint would; the real
huggingface_hub client reads it through a mirror job. Each lie fails the revision with one line,
publishes nothing, writes nothing outside the Hub cache, and a token never reaches another host."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from serving import point_hub_at
from support.mirror_jobs import mirror_job

from ocibridge.mirror import load_job, run_job

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def hostile(tmp_path, monkeypatch) -> Iterator[object]:
    started: list[subprocess.Popen[bytes]] = []

    def start(mode: str) -> tuple[str, Path]:
        port_file, log = tmp_path / f"{mode}.port", tmp_path / f"{mode}.log"
        log.touch()
        started.append(subprocess.Popen([sys.executable, "-m", "tests.support.hostile_hub", mode, str(port_file),
                                         str(log)], cwd=ROOT))
        deadline = time.monotonic() + 20
        while not port_file.exists():
            assert time.monotonic() < deadline, "the hostile hub did not start"
            time.sleep(0.05)
        url = f"http://127.0.0.1:{port_file.read_text()}"
        point_hub_at(monkeypatch, url, tmp_path / "hf-home" / "hub")
        monkeypatch.setenv("HOSTILE_TOKEN", "hf_secret_token")
        return url, log

    yield start
    for process in started:
        process.terminate()
        process.wait(timeout=10)


def _run(tmp_path: Path, url: str) -> tuple[int, str, Path]:
    target = tmp_path / "target"
    job = mirror_job(tmp_path / "job.toml", {"source": "hf://acme/tiny", "target": f"oci:{target}",
                                             "revisions": {"allow": ["main"]}},
                     defaults={"endpoint": url, "token_env": "HOSTILE_TOKEN"})
    summary = run_job(load_job(job))
    return summary.exit_code, summary.format_text(), target


def _published(target: Path) -> list[object]:
    index = target / "index.json"
    return json.loads(index.read_text())["manifests"] if index.exists() else []


@pytest.mark.parametrize("mode, said", [
    ("traversal", "'../escape.txt', which has an empty, '.' or '..' component"),
    ("absolute", "'/tmp/escape.txt', which is absolute"),
    ("nul", "which holds a control character"),
    ("many", "lists more than 200000 entries"),
    ("mismatch", "the bytes it sent hash to"),
])
def test_a_lying_endpoint_fails_the_revision_and_publishes_nothing(tmp_path, hostile, mode, said):
    url, _ = hostile(mode)
    code, text, target = _run(tmp_path, url)
    assert code != 0 and said in text, text
    assert "unexpected" not in text, text
    assert _published(target) == []
    assert not (tmp_path / "escape.txt").exists() and not Path("/tmp/escape.txt").exists()
    if mode == "mismatch":  # the forged bytes are not left in the cache for the next run to trust
        blobs = list((tmp_path / "hf-home" / "hub").rglob("blobs/*"))
        assert all(b.read_bytes() != b"\x00" * 64 for b in blobs if b.is_file())


def test_a_token_does_not_follow_a_redirect_to_another_host(tmp_path, hostile):
    url, log = hostile("redirect")
    code, text, target = _run(tmp_path, url)
    assert code == 0, text
    assert len(_published(target)) == 2  # main and main-<commit>
    requests = [json.loads(line) for line in log.read_text().splitlines()]
    elsewhere = [r for r in requests if r["host"].startswith("localhost")]
    assert elsewhere, requests  # the redirect was followed
    assert not any(r["auth"] for r in elsewhere), elsewhere
    assert any(r["auth"] for r in requests if r["host"].startswith("127.0.0.1"))  # the endpoint itself got it


def test_a_redirect_to_the_metadata_address_stops_the_revision_before_connecting(tmp_path, hostile):
    url, _ = hostile("metadata")
    code, text, target = _run(tmp_path, url)
    assert code != 0, text
    assert "169.254.169.254 resolves to 169.254.169.254, a link-local address: not connected" in text, text
    assert f"(the address rule: a URL the endpoint {url} pointed at" in text, text
    assert "unexpected" not in text, text
    assert _published(target) == []


def test_a_xet_cas_url_on_a_refused_address_is_refused_before_hf_xet_is_handed_it():
    import httpx

    from ocibridge.core.addressrule import AddressRefused, AddressRule
    from ocibridge.kinds.hf.checkedhub import cas_checked

    hook = cas_checked(AddressRule("http://127.0.0.1:1", role="endpoint"))
    grant = httpx.Request("GET", "http://127.0.0.1:1/api/models/acme/tiny/xet-read-token/main")
    hook(httpx.Response(200, json={"casUrl": "http://127.0.0.1:2", "accessToken": "t", "exp": 1}, request=grant))
    with pytest.raises(AddressRefused, match="169.254.169.254, a link-local address: not connected"):
        hook(httpx.Response(200, json={"casUrl": "http://169.254.169.254", "accessToken": "t", "exp": 1},
                            request=grant))
    with pytest.raises(AddressRefused, match="10.0.0.7, a private address: not connected"):
        hook(httpx.Response(200, headers={"X-Xet-Cas-Url": "https://10.0.0.7"},
                            request=httpx.Request("HEAD", "http://127.0.0.1:1/acme/tiny/resolve/main/w")))
