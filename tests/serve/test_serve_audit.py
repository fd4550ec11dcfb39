"""serve's audit trail and metrics (issue 61), against serve as a process over the real
registry, written to by huggingface_hub: one JSON line per write, landed or refused with its
reason; ``GET /metrics`` read by prometheus-client's own parser."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi
from huggingface_hub.errors import HfHubHTTPError
from prometheus_client.parser import text_string_to_metric_families
from test_serve_scoped_routes import auth, serve_process

from ocibridge.cli import main
from tests.modelgen import make_bert_model
from tests.support.fixtures import new_repo

TOKENS = "writer write acme/ ci-bot\nreader read acme/ viewer\n"


@dataclass
class Audited:
    url: str
    audit: Path


@pytest.fixture(scope="module")
def audited(registry: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Audited]:
    root = tmp_path_factory.mktemp("audited")
    prefix = f"{registry.host}/{new_repo('audited')}"
    assert main(["push", str(make_bert_model(root / "m")), f"{prefix}/acme/m:latest", "-q"]) == 0
    tokens = root / "tokens.txt"
    tokens.write_text(TOKENS)
    audit = root / "audit.jsonl"
    with serve_process(root, prefix, tokens, "--audit-log", str(audit)) as url:
        yield Audited(url, audit)


def lines(audit: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in audit.read_text().splitlines()]


def test_every_write_is_one_audit_line_landed_or_refused(audited, tmp_path):
    s = audited
    before = len(lines(s.audit))
    writer = HfApi(endpoint=s.url, token="writer")
    content = b"hello audit\n" * 10
    added = writer.upload_file(path_or_fileobj=content, path_in_repo="notes/new.txt", repo_id="acme/m")
    removed = writer.create_commit("acme/m", [CommitOperationDelete("extra/notes.md")], commit_message="rm")
    writer.create_branch("acme/m", branch="dev")
    with pytest.raises(HfHubHTTPError):
        HfApi(endpoint=s.url, token="reader").upload_file(path_or_fileobj=b"x", path_in_repo="x", repo_id="acme/m")
    with pytest.raises(HfHubHTTPError):
        writer.create_repo("other/x")
    with pytest.raises(HfHubHTTPError):
        HfApi(endpoint=s.url, token="stranger").create_commit("acme/m", [CommitOperationAdd("y", b"y")],
                                                               commit_message="y")
    found = lines(s.audit)[before:]
    landed = [e for e in found if e["outcome"] == "landed"]
    refused = [e for e in found if e["outcome"] == "refused"]
    first, second = (e for e in landed if e["action"] == "commit")
    assert first["commit"] == added.oid and first["digest"].startswith("sha256:" + added.oid)
    assert (first["token"], first["repository"], first["revision"]) == ("ci-bot", "acme/m", "main")
    assert (first["added"], first["removed"], first["bytes_received"]) == (["notes/new.txt"], [], len(content))
    assert second["commit"] == removed.oid and second["removed"] == ["extra/notes.md"] and second["added"] == []
    assert [e["revision"] for e in landed if e["action"] == "create_branch"] == ["dev"]
    assert all(e["time"].endswith("+00:00") and e["status"] == 200 for e in landed)
    reasons = {(e["action"], e["token"], e["status"]): e["reason"] for e in refused}
    assert "reads only" in reasons[("preupload", "viewer", 403)]  # huggingface_hub's first request of a write
    assert "under acme/" in reasons[("create_repo", "ci-bot", 403)]
    assert "Invalid credentials" in reasons[("preupload", None, 401)]
    assert not any(e["action"] == "preupload" for e in landed)  # an upload's start lands nothing
    assert {e["repository"] for e in refused} == {"acme/m", "other/x"}


def test_audit_lines_of_writes_at_once_stay_whole(audited):
    s = audited
    before = len(lines(s.audit))
    body = b'{"key": "header", "value": {"summary": "' + b"z" * 6000 + b'"}}\n'

    def refused(n: int) -> int:
        return httpx.post(f"{s.url}/api/models/acme/m/commit/branch-{n}", content=body,
                          headers=auth("reader")).status_code

    with ThreadPoolExecutor(16) as pool:
        assert set(pool.map(refused, range(48))) == {403}
    found = lines(s.audit)[before:]  # each line parses: none was cut into or interleaved
    assert sorted(e["revision"] for e in found) == sorted(f"branch-{n}" for n in range(48))


def test_a_revision_holding_a_line_break_of_unicode_stays_on_its_one_audit_line(audited):
    """A branch name may hold U+0085 and U+2028 (git takes them): a line break to str.splitlines
    and to JSON-lines readers, so the audit line escapes them, and its reader sees one line."""
    s = audited
    before = len(lines(s.audit))
    name = "x\x85{}\u2028y\u2029z"
    answer = httpx.post(f"{s.url}/api/models/acme/m/commit/{quote(name, safe='')}", content=b"{}",
                        headers=auth("reader"))
    assert answer.status_code == 403, answer.text
    found = lines(s.audit)[before:]
    assert [e["revision"] for e in found] == [name]
    assert s.audit.read_bytes().count(b"\n") == len(lines(s.audit))


def family(text: str, name: str) -> list[Any]:
    return [f for f in text_string_to_metric_families(text) if f.name == name][0].samples


def test_metrics_are_prometheus_text_by_route_template(audited):
    s = audited
    start = httpx.get(f"{s.url}/metrics").text
    hits, fetches = (family(start, name)[0].value for name in ("ocibridge_serve_cache_hits",
                                                               "ocibridge_serve_blob_fetches"))
    for _ in range(2):  # the second from serve's model cache
        got = httpx.get(f"{s.url}/acme/m/resolve/main/model.safetensors", headers=auth("reader"))
        assert got.status_code == 200
    assert httpx.get(f"{s.url}/api/models/acme/nothing", headers=auth("reader")).status_code == 404
    answer = httpx.get(f"{s.url}/metrics")  # open, as most servers' metrics are
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/plain")
    text = answer.text
    requests = family(text, "ocibridge_serve_requests")
    resolve = [x for x in requests if x.labels["route"] == "/{org}/{name}/resolve/{revision}/{path}"]
    assert [(x.labels["method"], x.labels["status"]) for x in resolve] == [("GET", "200")]
    assert resolve[0].value >= 2
    info = [x for x in requests if x.labels["route"] == "/api/models/{org}/{name}" and x.labels["status"] == "404"]
    assert info and info[0].value >= 1
    assert "acme/m" not in text and "nothing" not in text  # templates only: no repository is named
    size = len(got.content)
    assert family(text, "ocibridge_serve_sent_bytes")[0].value >= 2 * size
    more_hits = family(text, "ocibridge_serve_cache_hits")[0].value - hits
    more_fetches = family(text, "ocibridge_serve_blob_fetches")[0].value - fetches
    assert more_hits >= 1 and more_hits + more_fetches == 2  # each download a hit or a fetch, the second a hit
    assert family(text, "ocibridge_serve_uploads_in_flight")[0].value == 0
    assert family(text, "ocibridge_serve_staging_bytes")[0].value >= 0
    assert family(text, "ocibridge_serve_registry_errors")[0].value == 0
    received = family(text, "ocibridge_serve_received_bytes")[0].value
    httpx.post(f"{s.url}/api/models/acme/m/paths-info/main", json={"paths": ["x" * 1000]}, headers=auth("reader"))
    after = family(httpx.get(f"{s.url}/metrics").text, "ocibridge_serve_received_bytes")[0].value
    assert after - received >= 1000


def test_no_metrics_turns_the_page_off(registry, tmp_path):
    tokens = tmp_path / "tokens.txt"
    tokens.write_text("t\n")
    with serve_process(tmp_path, f"{registry.host}/{new_repo('nometrics')}", tokens, "--no-metrics") as url:
        assert httpx.get(f"{url}/metrics").status_code in (303, 401, 404)
        assert httpx.get(f"{url}/metrics", headers=auth("t")).status_code == 404


def test_a_write_that_fails_is_a_failed_line_even_when_serve_raises(tmp_path):
    """A 5xx (the registry refused the push) is ``failed``, not ``refused``; a route that raises
    (serve's bug) still leaves its line before the 500."""
    import asyncio

    from starlette.requests import Request

    from ocibridge.hubserver.answers import error
    from ocibridge.hubserver.audit import AuditLog

    log = AuditLog(str(tmp_path / "audit.jsonl"))
    scope = {"type": "http", "method": "POST", "path": "/", "headers": [], "query_string": b"",
             "path_params": {"org": "acme", "name": "m", "revision": "main"}}

    async def registry_down(request: Request) -> Any:
        return error(502, None, "the registry answered 500")

    async def broken(request: Request) -> Any:
        raise RuntimeError("a bug")

    asyncio.run(log.audited("commit", registry_down)(Request(scope)))
    with pytest.raises(RuntimeError):
        asyncio.run(log.audited("commit", broken)(Request(scope)))
    log.close()
    first, second = lines(tmp_path / "audit.jsonl")
    assert (first["outcome"], first["status"], first["reason"]) == ("failed", 502, "the registry answered 500")
    assert (second["outcome"], second["status"], second["repository"]) == ("failed", 500, "acme/m")


def test_a_write_through_a_reader_is_audited_once_by_the_writer(registry, tmp_path):
    """With one writer and readers (``--writer``), the writer decides each write and writes its
    line; the reader that forwarded it writes none (no line twice, none without its token)."""
    from serve_processes import running

    prefix = f"{registry.host}/{new_repo('audit-pair')}"
    writes, forwards = tmp_path / "writer.jsonl", tmp_path / "reader.jsonl"
    with running(tmp_path / "writer", prefix, "--audit-log", str(writes)) as writer, \
            running(tmp_path / "reader", prefix, "--audit-log", str(forwards), "--writer", writer.url) as reader:
        api = HfApi(endpoint=reader.url, token="writer-token")
        api.create_repo("acme/paired")
        done = api.upload_file(path_or_fileobj=b"through a reader\n", path_in_repo="a.txt", repo_id="acme/paired")
    landed = [(e["action"], e["token"], e.get("commit")) for e in lines(writes)]
    assert landed == [("create_repo", "ci-bot", None), ("commit", "ci-bot", done.oid)]
    assert forwards.read_text() == ""
