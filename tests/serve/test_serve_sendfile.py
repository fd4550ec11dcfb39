"""A file's bytes go to the client's socket from serve's protocol (zerocopy.py), not as ASGI
messages: on the plain route by ``sendfile(2)``, a cold read as the registry fetch is verified,
a warm one from the model cache, a range of either, counted in /metrics as any answer's bytes;
a warm Xet read's xorbs too. What the protocol was asked to send is counted on the way."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import httpx
import pytest
from huggingface_hub import hf_hub_download
from serving import point_hub_at, serving, wait_until_healthy
from support.faultproxy import throttle

import ocibridge
from ocibridge.hubserver import protocol
from ocibridge.hubserver.xet import xorbs

MiB = 1 << 20


@pytest.fixture
def sent(monkeypatch) -> list[int]:
    """Every count serve's protocol handed to sendfile."""
    counts: list[int] = []
    real = protocol.send_segments

    def counting(*args: object) -> int:
        done = real(*args)  # type: ignore[arg-type]
        counts.append(done)
        return done

    monkeypatch.setattr(protocol, "send_segments", counting)
    return counts


def _metric(text: str, name: str) -> float:
    found = re.search(rf"^{name} ([0-9.e+]+)$", text, re.M)
    assert found, text
    return float(found[1])


def _model(tmp_path: Path, name: str, size: int) -> tuple[Path, bytes]:
    """A model directory with a config and ``size`` random bytes of weights; the weights."""
    src = tmp_path / name
    src.mkdir()
    (src / "config.json").write_text('{"model_type": "bert"}')
    data = os.urandom(size)
    (src / "model.safetensors").write_bytes(data)
    return src, data


def test_plain_reads_go_out_by_sendfile(registry, unique_repo, tmp_path, sent):
    src, data = _model(tmp_path, "m", 5 * MiB + 4321)
    ocibridge.push(str(src), f"{registry.host}/{unique_repo}/acme/m:latest")
    url = "/acme/m/resolve/main/model.safetensors"
    with serving([f"{registry.host}/{unique_repo}"], xet_min=0) as served:
        before = _metric(httpx.get(f"{served.url}/metrics").text, "ocibridge_serve_sent_bytes_total")
        cold = httpx.get(served.url + url, timeout=60)  # fetched from the registry as it is sent
        assert cold.status_code == 200 and cold.content == data
        assert served.blobs.fetched >= 1
        warm = httpx.get(served.url + url, timeout=60)  # from the model cache
        part = httpx.get(served.url + url, headers={"Range": "bytes=1048576-3145727"}, timeout=60)
        assert warm.content == data and part.status_code == 206 and part.content == data[MiB:3 * MiB]
        after = _metric(httpx.get(f"{served.url}/metrics").text, "ocibridge_serve_sent_bytes_total")
    assert sum(sent) == 2 * len(data) + 2 * MiB  # every byte of the three bodies, none as a message
    assert after - before >= 2 * len(data) + 2 * MiB  # and counted as sent


def test_warm_xorbs_go_straight_to_the_socket(registry, unique_repo, tmp_path, sent, monkeypatch):
    """hf_xet's reads of a file the model cache holds: every xorb byte, headers and all, sent from
    serve's protocol's worker thread, none as an ASGI message (the bytes arrive exact: hf_xet
    writes the file from them)."""
    src, data = _model(tmp_path, "x", 20 * MiB + 999)
    ocibridge.push(str(src), f"{registry.host}/{unique_repo}/acme/x:latest")
    with serving([f"{registry.host}/{unique_repo}"], xet_min=MiB) as served:
        point_hub_at(monkeypatch, served.url, tmp_path / "cold", xet=True)
        assert Path(hf_hub_download("acme/x", "model.safetensors")).read_bytes() == data
        sent.clear()
        point_hub_at(monkeypatch, served.url, tmp_path / "warm", xet=True)
        assert Path(hf_hub_download("acme/x", "model.safetensors")).read_bytes() == data
    xorb_bytes = len(data) + 8 * -(-len(data) // xorbs.XET_CHUNK)
    assert sum(sent) == xorb_bytes  # every xorb byte of the warm read, none copied through Python


def test_cold_xorbs_leave_by_sendfile_as_the_fetch_verifies_them(registry, unique_repo, tmp_path, sent,
                                                                 monkeypatch, fault_proxy):
    """hf_xet's read of a file serve is still fetching (the registry paced: the table checks it
    chunk by chunk as it comes): every xorb byte sent from the file by serve's protocol as it is
    verified, none copied into a message, and the file arrives exact."""
    from ocibridge.cli import main

    src, data = _model(tmp_path, "c", 12 * MiB + 999)
    repo = f"{registry.host}/{unique_repo}"
    assert main(["push", str(src), f"{repo}/acme/c:latest", "-q", "--chunks", "--chunk-threshold", "1M"]) == 0
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    fault_proxy.add("GET", f"/blobs/{digest}", throttle(4 * MiB), times=None)  # 3 s: read while it comes
    with serving([repo.replace(registry.host, fault_proxy.host)], xet_min=MiB) as served:
        point_hub_at(monkeypatch, served.url, tmp_path / "hub", xet=True)
        assert Path(hf_hub_download("acme/c", "model.safetensors")).read_bytes() == data
        assert served.blobs.hits == 0  # followed the fetch: nothing from the model cache
    xorb_bytes = len(data) + 8 * -(-len(data) // xorbs.XET_CHUNK)
    assert sum(sent) == xorb_bytes


def test_over_tls_the_bytes_go_as_messages_and_arrive_exact(tmp_path):
    """serve --cert/--key: no sendfile under TLS (the bytes must pass the TLS layer), the answer
    sent as ASGI messages, a piece at a time; the file arrives exact."""
    import ssl
    import subprocess
    import sys

    from support.certs import make_tls_files
    from support.registry import free_port

    from ocibridge.cli import main

    src = tmp_path / "t"
    src.mkdir()
    (src / "config.json").write_text('{"model_type": "bert"}')
    data = os.urandom(3 * MiB + 17)
    (src / "model.safetensors").write_bytes(data)
    assert main(["push", str(src), f"oci:{tmp_path}/lay:acme/t:latest", "-q"]) == 0
    tls = make_tls_files(tmp_path / "tls")
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen([sys.executable, "-m", "ocibridge", "serve", f"oci:{tmp_path}/lay", "--listen",
                             f"127.0.0.1:{port}", "--cert", str(tls.cert_file), "--key", str(tls.key_file)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    trust = ssl.create_default_context(cafile=tls.ca_file)
    url = f"https://127.0.0.1:{port}"
    try:
        wait_until_healthy(proc, url, verify=trust)
        for _ in range(2):  # cold (the fill followed), then from the model cache
            got = httpx.get(f"{url}/acme/t/resolve/main/model.safetensors", verify=trust, timeout=60)
            assert got.status_code == 200 and got.content == data
    finally:
        proc.terminate()
        log = proc.communicate(timeout=60)[1].decode()
    assert "Traceback" not in log, log
