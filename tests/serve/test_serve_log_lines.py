"""What serve's log says (issue 90, item 10): a signed xorb URL's signature redacted, the Xet
dedupe protocol's expected 404s kept out, and one start line (serve's own, not uvicorn's), read
from a real serve's output after a Xet upload and download through huggingface_hub."""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

import pytest
from huggingface_hub import HfApi, hf_hub_download
from serving import point_hub_at, serve_as_process

from ocibridge.hubserver.accesslog import AccessLines, redacted

TOKEN = "log-writer"


def test_the_log_redacts_signatures_keeps_out_dedupe_misses_and_has_one_start_line(
        registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "tokens.txt").write_text(f"{TOKEN} write\n")
    env = {**os.environ, "OCIBRIDGE_CACHE": str(tmp_path / "cache")}
    log = tmp_path / "serve.log"
    with serve_as_process([f"{registry.host}/serve-log", "--token-file", str(tmp_path / "tokens.txt")],
                          env, log) as url:
        point_hub_at(monkeypatch, url, tmp_path / "hub", xet=True)
        api = HfApi(endpoint=url, token=TOKEN)
        api.create_repo("acme/logged")
        (tmp_path / "m").mkdir()
        (tmp_path / "m" / "model.safetensors").write_bytes(os.urandom(2_000_000))
        api.upload_folder(repo_id="acme/logged", folder_path=tmp_path / "m")
        got = hf_hub_download("acme/logged", "model.safetensors", token=TOKEN, cache_dir=tmp_path / "hub")
        assert Path(got).read_bytes() == (tmp_path / "m" / "model.safetensors").read_bytes()
    text = log.read_text()
    xorb_reads = [line for line in text.splitlines() if "/xorbs/" in line and "GET " in line]
    assert xorb_reads and all("signature=REDACTED" in line for line in xorb_reads), xorb_reads
    assert not re.search(r"signature=[0-9a-f]{16}", text)
    assert not re.search(r"/v1/(chunks|xorb-grants)/\S+ HTTP/1.1\" 404", text), text
    assert "POST /api/models/acme/logged/commit/main" in text  # the access log is on
    assert "Started server process" not in text and "Finished server process" not in text
    assert text.count("serving the Hugging Face Hub API") == 1


def test_with_debug_the_dedupe_misses_are_shown_and_signatures_still_redacted() -> None:
    miss = logging.LogRecord("uvicorn.access", logging.INFO, "", 0, '%s - "%s %s HTTP/%s" %d',
                             ("127.0.0.1:1", "GET", "/xet-write/a/b/v1/chunks/default/ab", "1.1", 404), None)
    assert not AccessLines(debug=False).filter(miss) and AccessLines(debug=True).filter(miss)
    assert redacted("/x?expires=1&signature=abc&client=d") == "/x?expires=1&signature=REDACTED&client=d"
