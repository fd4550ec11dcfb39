"""A mirror job's Hub entry naming a dataset, ``source = "hf://datasets/ORG/NAME"``: planned, listed and
downloaded through the Hub's dataset API (``/api/datasets/...``, ``/datasets/ORG/NAME/resolve/...``) with
the real huggingface_hub client, and copied as the artifact ``push hf:datasets/ORG/NAME@COMMIT`` builds.

The Hub here is a stand-in of a few routes answering one dataset commit (serve answers datasets on
another branch; the job against serve is the lead's to run once both are merged): it records every
request, so the test sees that no model route was asked."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

import pytest
from serving import point_hub_at

from ocibridge.cli import main
from ocibridge.cli.mirror import mirror_command
from ocibridge.kinds.hf.locator import parse_hub_reference
from ocibridge.mirror import load_job, run_job
from ocibridge.mirror.hub import hub_source
from ocibridge.mirror.job import SyncEntry

COMMIT = "0badc0de0badc0de0badc0de0badc0de0badc0de"
FILES = {"README.md": b"---\nlicense: mit\ntask_categories: [translation]\n---\n# pairs\n",
         "data/train.jsonl": b'{"en": "hello", "fr": "bonjour"}\n{"en": "thanks", "fr": "merci"}\n'}


class DatasetHub(BaseHTTPRequestHandler):
    """The Hub's routes for one dataset, acme/pairs at COMMIT; anything else is a 404."""

    asked: list[str] = []

    def log_message(self, *args: object) -> None:
        pass

    def _answer(self, status: int, body: bytes, headers: dict[str, str] | None = None, send: bool = True) -> None:
        self.send_response(status)
        for key, value in {"Content-Length": str(len(body)), **(headers or {})}.items():
            self.send_header(key, value)
        self.end_headers()
        if send:
            self.wfile.write(body)

    def do_HEAD(self) -> None:
        self.do_GET(send=False)

    def do_GET(self, send: bool = True) -> None:
        path = unquote(urlsplit(self.path).path)
        self.asked.append(f"{self.command} {path}")
        api = "/api/datasets/acme/pairs"
        if path == f"{api}/refs":
            doc = {"branches": [{"name": "main", "ref": "refs/heads/main", "targetCommit": COMMIT}], "tags": [],
                   "converts": []}
        elif path in (f"{api}/revision/main", f"{api}/revision/{COMMIT}"):
            doc = {"id": "acme/pairs", "sha": COMMIT, "private": False,
                   "siblings": [{"rfilename": name, "size": len(data)} for name, data in FILES.items()]}
        elif path == f"{api}/tree/{COMMIT}":
            doc = [{"type": "file", "path": name, "size": len(data), "oid": git_blob(data)}
                   for name, data in FILES.items()]
        elif path.startswith(f"/datasets/acme/pairs/resolve/{COMMIT}/"):
            data = FILES.get(path.split(f"/resolve/{COMMIT}/", 1)[1])
            if data is None:
                return self._answer(404, b"{}", send=send)
            etag = f'"{git_blob(data)}"'
            return self._answer(200, data, {"ETag": etag, "X-Repo-Commit": COMMIT}, send=send)
        else:
            return self._answer(404, b'{"error": "not here"}', {"Content-Type": "application/json"}, send=send)
        self._answer(200, json.dumps(doc).encode(), {"Content-Type": "application/json"}, send=send)


def git_blob(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # noqa: S324 - git's name for a file


@pytest.fixture
def dataset_hub() -> Iterator[str]:
    DatasetHub.asked = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), DatasetHub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_dataset_entry_is_a_dataset_source():
    ref = parse_hub_reference("hf://datasets/acme/pairs@main")
    entry = SyncEntry(source="hf://datasets/acme/pairs", target="oci:/tmp/x")
    from ocibridge.mirror.job import MirrorJob

    src = hub_source(MirrorJob(sync=[entry]), entry, ref)
    assert (src.repo_id, src.repo_type, src.revision) == ("acme/pairs", "dataset", "main")
    assert src.name == "hf://datasets/acme/pairs" and src.page == "https://huggingface.co/datasets/acme/pairs"


def test_a_job_mirrors_a_dataset_through_the_dataset_api(tmp_path, capsys, monkeypatch, dataset_hub, registry,
                                                         unique_repo):
    hub = tmp_path / "hf-home" / "hub"
    point_hub_at(monkeypatch, dataset_hub, hub)
    target = f"{registry.host}/{unique_repo}/datasets/acme/pairs"
    job = tmp_path / "job.toml"
    job.write_text(f'[defaults]\nendpoint = "{dataset_hub}"\n\n[[sync]]\nsource = "hf://datasets/acme/pairs"\n'
                   f'target = "{target}"\n')
    capsys.readouterr()
    assert mirror_command(str(job), dry_run=True) == 0
    said = capsys.readouterr().out
    assert f"would copy hf://datasets/acme/pairs@main ({COMMIT}) -> {target}:main-{COMMIT[:12]}" in said, said
    assert "2 file(s) to download" in said
    summary = run_job(load_job(job))
    assert summary.exit_code == 0, summary.format_text()
    assert [a.target for a in summary.with_status("copied")] == [f"{target}:main-{COMMIT[:12]}"]
    assert DatasetHub.asked and all("/datasets/acme/pairs" in line for line in DatasetHub.asked), DatasetHub.asked
    snapshot = hub / "datasets--acme--pairs" / "snapshots" / COMMIT
    assert {p.relative_to(snapshot).as_posix(): p.read_bytes() for p in snapshot.rglob("*") if p.is_file()} == FILES
    # the artifact push hf:datasets/... builds of the same snapshot, byte for byte
    check = f"{registry.host}/{unique_repo}/check:pushed"
    assert main(["push", f"hf:datasets/acme/pairs@{COMMIT}", check, "-q"]) == 0
    capsys.readouterr()
    digests = []
    for ref in (check, f"{target}:main"):
        assert main(["inspect", ref, "--json"]) == 0
        info = json.loads(capsys.readouterr().out)
        digests.append(info["digest"])
    assert digests[0] == digests[1]
    assert info["repoType"] == "dataset"
    assert info["annotations"]["org.opencontainers.image.source"] == "https://huggingface.co/datasets/acme/pairs"
    assert info["annotations"]["io.ocibridge.card.task_categories"] == "translation"
