"""``ocibridge serve`` as a process at its start and in its log (issue 63, items 4, 6 and 10): a
port in use is one line and exit 1; one banner line says what is served, where and to whom; a
first source that does not answer is a warning; huggingface_hub's and hf_xet's housekeeping
requests are answered as the Hub answers them, not with 401s in the access log."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from serving import stop, wait_until_healthy
from signing_keys import key_pair

from ocibridge.cli import main
from ocibridge.stores.layout import LayoutStore
from tests.modelgen import make_bert_model

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def environment(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "DO_NOT_TRACK"))}
    return {**env, "PYTHONPATH": str(ROOT), "OCIBRIDGE_CACHE": str(home / "cache"), "HF_HOME": str(home / "hf")}


@pytest.fixture(scope="module")
def layout(tmp_path_factory) -> tuple[Path, Path]:
    """oci:DIR holding acme/tiny (weights of 1 MiB: offered over Xet from 1K)."""
    home = tmp_path_factory.mktemp("starting")
    src = make_bert_model(home / "tiny", weights=1)
    (src / "model.safetensors").write_bytes(os.urandom(1 << 20))
    LayoutStore(home / "lay", create=True)
    assert main(["push", str(src), f"oci:{home}/lay:acme/tiny:latest", "-q"]) == 0
    return home, src


def test_a_port_in_use_is_one_line_and_exit_1(layout):
    home, _ = layout
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "ocibridge", "serve", f"oci:{home}/lay", "--listen",
                               f"127.0.0.1:{port}"], env=environment(home), capture_output=True, text=True,
                              timeout=60)
    assert done.returncode == 1, done.stderr
    assert done.stderr == (f"ocibridge: error: --listen 127.0.0.1:{port}: address already in use "
                           "(another process listens there; pick another --listen)\n")
    assert done.stdout == ""


def start(home: Path, *args: str, **env: str) -> tuple[subprocess.Popen[bytes], str, Path]:
    port = free_port()
    log = home / f"serve-{port}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "ocibridge", "serve", *args, "--listen", f"127.0.0.1:{port}"],
                                env={**environment(home), **env}, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    wait_until_healthy(proc, url, log)
    return proc, url, log


def stopped_after_a_warning(proc: subprocess.Popen[bytes], log: Path) -> None:
    """Stop serve once its log has a warning (the first source is checked in the background), or after 30 s."""
    try:
        deadline = time.monotonic() + 30
        while "warning" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop(proc)


def test_the_banner_says_what_where_and_to_whom_and_warns_of_a_silent_first_source(layout):
    home, _ = layout
    dead = f"127.0.0.1:{free_port()}"  # nothing listens there
    (home / "tokens.txt").write_text("w-token write acme/\n")
    proc, url, log = start(home, f"{dead}/models", f"oci:{home}/lay", "--plain-http",
                           "--token-file", str(home / "tokens.txt"))
    stopped_after_a_warning(proc, log)
    lines = log.read_text().splitlines()
    assert (f"ocibridge: serving the Hugging Face Hub API of {dead}/models, oci:{home}/lay at {url}; "
            "writes on (write tokens publish); tokens required") in lines
    warning = [line for line in lines if "warning" in line]
    assert len(warning) == 1 and warning[0].startswith(f"ocibridge: warning: the first source {dead}/models "
                                                       "does not answer: "), lines
    proc, url, log = start(home, f"oci:{home}/lay")
    stop(proc)
    lines = log.read_text().splitlines()
    assert (f"ocibridge: serving the Hugging Face Hub API of oci:{home}/lay at {url}; read-only; "
            "open (no --token-file: anyone who reaches it reads)") in lines
    assert not [line for line in lines if "warning" in line]


def test_an_empty_local_store_is_served_quietly_a_layout_that_is_not_one_is_not(layout):
    """``serve local`` before anything was pushed or pulled warned 'no OCI layout' as if the store
    were broken, and /readyz answered 503: the local store is made by the first write, so it is
    served empty, quietly, and ready. A layout the user names that is not one is still reported."""
    home, _ = layout
    proc, url, log = start(home, "local", OCIBRIDGE_STORE=str(home / "never-written"))
    try:
        ready = httpx.get(f"{url}/readyz", timeout=10)
        time.sleep(0.5)  # (the first source is checked in the background)
    finally:
        stop(proc)
    assert ready.status_code == 200, ready.text
    assert not [line for line in log.read_text().splitlines() if "warning" in line], log.read_text()
    proc, url, log = start(home, f"oci:{home}/not-a-layout")
    stopped_after_a_warning(proc, log)
    assert f"ocibridge: warning: the first source oci:{home}/not-a-layout does not answer: no OCI layout there" \
        in log.read_text().splitlines()


def test_a_source_that_is_not_ready_is_named_once(layout):
    """The warning and /readyz named the source twice ('the first source local does not answer:
    local: no OCI layout at ...', 'local: local: ...'): the source's own reason no longer names it."""
    home, _ = layout
    store = home / "not-a-store"
    store.mkdir()
    (store / "junk").write_text("x")  # a directory with other files: no store, not one never written
    proc, url, log = start(home, "local", f"oci:{home}/not-a-layout", OCIBRIDGE_STORE=str(store))
    try:
        ready = httpx.get(f"{url}/readyz", timeout=10)
        deadline = time.monotonic() + 30
        while "warning" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop(proc)
    assert ready.status_code == 503
    assert ready.json()["problems"] == [f"local: no OCI layout at {store}",
                                        f"oci:{home}/not-a-layout: no OCI layout there"]
    assert f"ocibridge: warning: the first source local does not answer: no OCI layout at {store}" \
        in log.read_text().splitlines()


def test_help_says_hub_api_not_read_api():
    done = subprocess.run([sys.executable, "-m", "ocibridge", "serve", "--help"], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    listing = subprocess.run([sys.executable, "-m", "ocibridge", "--help"], capture_output=True, text=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    assert done.returncode == 0 and listing.returncode == 0
    assert "read API" not in done.stdout + listing.stdout
    assert "Hugging Face Hub's API" in listing.stdout
    assert "read API" not in (ROOT / "docs" / "serve.md").read_text().splitlines()[0]


DOWNLOAD = """
import sys
from huggingface_hub import hf_hub_download
print(hf_hub_download("acme/tiny", "model.safetensors"))
"""


def test_huggingface_hub_and_hf_xet_housekeeping_is_answered_quietly(layout):
    """hf_hub_download over Xet from a fresh HF_HOME: huggingface_hub asks for the agent harnesses,
    hf_xet posts its telemetry; every request serve logs is answered 2xx."""
    home, src = layout
    proc, url, log = start(home, f"oci:{home}/lay", "--xet-min-size", "1K")
    try:
        env = {**environment(home), "HF_ENDPOINT": url, "HF_HUB_CACHE": str(home / "hub"),
               "HF_XET_TELEMETRY_ENABLED": "1"}  # hf_xet 1.8 reports each transfer when enabled
        done = subprocess.run([sys.executable, "-c", DOWNLOAD], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert Path(done.stdout.strip()).read_bytes() == (src / "model.safetensors").read_bytes()
        deadline = time.monotonic() + 20  # hf_xet's report may trail the download
        while "/v1/telemetry" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert httpx.get(f"{url}/api/agent-harnesses").json() == {"standardEnvVars": ["AI_AGENT", "AGENT"],
                                                                    "harnesses": {}}
    finally:
        stop(proc)
    requests = [line for line in log.read_text().splitlines() if '" ' in line and "HTTP/1.1" in line]
    assert any("GET /api/agent-harnesses HTTP/1.1\" 200" in line for line in requests), requests
    assert any("POST /v1/telemetry HTTP/1.1\" 200" in line for line in requests), requests
    assert not [line for line in requests if '" 4' in line or '" 5' in line], requests


def test_the_catalog_badge_says_which_rule_refused(layout, tmp_path):
    """acme/tiny is unsigned: with --verify-key the catalog says --verify-key refused it (not the
    policy file, which accepts anything); without keys it passes the policy file alone."""
    home, _ = layout
    _, public = key_pair(tmp_path / "keys")
    for args, badge in (((), "policy: passes (the policy file)"),
                        (("--verify-key", str(public)), "policy: refused by --verify-key")):
        proc, url, _ = start(home, f"oci:{home}/lay", *args)
        try:
            page = httpx.get(f"{url}/").text
        finally:
            stop(proc)
        badges = re.findall(r'<span class="badge[^"]*"[^>]*>([^<]*)</span>', page)
        assert badge in badges and not [b for b in badges if b.startswith("policy:") and b != badge], badges


def test_no_rule_in_force_no_policy_badge(monkeypatch, tmp_path):
    from ocibridge.hubserver.repo.rules import rules_in_force
    from ocibridge.signing import policy_place
    from ocibridge.signing.containers_policy import UsePolicy

    monkeypatch.delenv("OCIBRIDGE_POLICY")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(policy_place, "SYSTEM_POLICY", tmp_path / "absent.json")
    assert rules_in_force(None) == ()
    assert rules_in_force(UsePolicy(keys=object())) == ("--verify-key",)
    assert rules_in_force(UsePolicy(file=str(tmp_path / "p.json"))) == ("the policy file",)


def test_listen_on_port_0_says_the_port_it_was_given(layout):
    """``--listen 127.0.0.1:0`` (any free port) printed 'at http://127.0.0.1:0', a URL nothing
    answers at: the banner now says the port the system gave, and serve answers there."""
    home, _ = layout
    log = home / "serve-port-0.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "ocibridge", "serve", f"oci:{home}/lay", "--listen",
                                 "127.0.0.1:0"], env=environment(home), stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while "serving the Hugging Face Hub API" not in log.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        found = re.search(r" at (http://127\.0\.0\.1:(\d+));", log.read_text())
        assert found is not None and found.group(2) != "0", log.read_text()
        wait_until_healthy(proc, found.group(1), log)
    finally:
        stop(proc)
