"""serve's write API over LFS (issue 55, first slice): huggingface_hub with HF_HUB_DISABLE_XET=1
publishes through ``ocibridge serve`` (a process) to a real registry; each commit is a
ModelPack artifact under the branch's tag, read back by snapshot_download and ``ocibridge pull``."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import huggingface_hub
import pytest
from huggingface_hub import CommitOperationAdd, CommitOperationCopy, CommitOperationDelete, HfApi
from huggingface_hub.errors import HfHubHTTPError
from serving import files_of, point_hub_at, published_files_of
from support.publishing import MIB, TOKENS, blob_in, model_dir, opened_store, tag_digest

from ocibridge.cli import main

#: huggingface_hub's own LFS upload passes bytes as data= to httpx, which warns (not ours)
pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning")

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def lfs_client(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """huggingface_hub as HF_HUB_DISABLE_XET=1 runs it; the LFS objects it PUTs (their paths) are listed."""
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)
    from huggingface_hub import _commit_api

    sent: list[str] = []
    real = _commit_api.lfs_upload

    def counted(operation: CommitOperationAdd, **kwargs: object) -> None:
        sent.append(operation.path_in_repo)
        real(operation=operation, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(_commit_api, "lfs_upload", counted)
    return sent


def test_publish_through_serve_is_a_modelpack_commit(tmp_path, publishing_serve, lfs_client, monkeypatch, capsys):
    """create_repo, upload_folder, upload_file, create_commit (an add and a delete): each a new
    manifest under the tag, read back exactly by snapshot_download and pull, valid --strict; a
    second upload_folder of the same files sends nothing."""
    src = model_dir(tmp_path / "model")
    url, prefix = publishing_serve.url, publishing_serve.prefix
    point_hub_at(monkeypatch, url, tmp_path / "hub")  # Xet off: uploads over LFS
    api = HfApi(endpoint=url, token="writer-token")
    assert api.whoami()["name"] == "ci-bot"
    assert api.whoami()["auth"]["accessToken"]["role"] == "write"
    assert api.create_repo("acme/tiny").repo_id == "acme/tiny"
    with pytest.raises(HfHubHTTPError) as exists:
        api.create_repo("acme/tiny")
    assert exists.value.response.status_code == 409
    api.create_repo("acme/tiny", exist_ok=True)
    with pytest.raises(HfHubHTTPError) as space:
        api.create_repo("acme/app", repo_type="space", space_sdk="static")
    assert space.value.response.status_code == 400 and "models and datasets only" in str(space.value)
    with pytest.raises(HfHubHTTPError) as reserved:  # the Hub keeps these names: no model may take them
        api.create_repo("datasets/tiny")
    assert reserved.value.response.status_code == 400 and "reserved" in str(reserved.value)

    first = api.upload_folder(repo_id="acme/tiny", folder_path=src, commit_message="first")
    assert lfs_client == ["model.safetensors"]  # binary; the small JSON files are regular: sent inline
    assert api.model_info("acme/tiny").sha == first.oid

    readme = api.upload_file(path_or_fileobj=b"---\nlicense: mit\n---\n# tiny\n", path_in_repo="README.md",
                             repo_id="acme/tiny")
    lfs_client.clear()
    third = api.create_commit("acme/tiny", [CommitOperationAdd("extra/notes.md", b"notes\n"),
                                            CommitOperationDelete("tokenizer.json"),
                                            CommitOperationCopy("model.safetensors", "copy.safetensors")],
                              commit_message="notes, no tokenizer", parent_commit=readme.oid)
    assert lfs_client == []  # notes.md is regular (inline); the copy is of a file serve holds
    expected = files_of(src)
    del expected["tokenizer.json"]
    expected |= {"README.md": b"---\nlicense: mit\n---\n# tiny\n", "extra/notes.md": b"notes\n",
                 "copy.safetensors": expected["model.safetensors"]}
    assert api.model_info("acme/tiny").sha == third.oid
    got = huggingface_hub.snapshot_download("acme/tiny", token="reader-token")
    assert published_files_of(Path(got)) == expected

    lfs_client.clear()  # the same folder again: preupload names every file's oid, nothing is sent...
    again = api.upload_folder(repo_id="acme/tiny", folder_path=src, allow_patterns=["*.safetensors", "*.json"],
                              delete_patterns=[])
    # ... but tokenizer.json, which the branch no longer holds: a regular file, it travels
    # again inline in the commit (not over LFS)
    assert lfs_client == []
    assert again.oid != third.oid  # tokenizer.json came back: a commit

    ref = f"{prefix}/acme/tiny:latest"
    assert main(["pull", ref, str(tmp_path / "tiny"), "-q"]) == 0
    assert published_files_of(tmp_path / "tiny") == expected | {"tokenizer.json": (src / "tokenizer.json").read_bytes()}
    assert main(["validate", ref, "--strict"]) == 0
    capsys.readouterr()
    # the manifest says what the commit is; its layers and config are push's of the same files
    assert main(["inspect", ref, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    annotations = json.dumps(shown)
    assert third.oid in annotations and "ci-bot" in annotations
    assert main(["push", str(tmp_path / "tiny"), f"{prefix}/same:latest", "-q"]) == 0
    assert pushed_as_serve_commits(ref) == _layers_and_config(f"{prefix}/same:latest")


def pushed_as_serve_commits(ref: str) -> tuple[list[tuple[str, str, dict[str, str]]], object]:
    """The layers and config of the commit ``ref`` names as ``push`` makes them of the same
    directory: push leaves ``.gitattributes`` out of a directory, serve keeps it, as a file of
    the repository (its one layer, and its digest in the config's lists, taken out here)."""
    layers, config = _layers_and_config(ref)
    attributes = [layer for layer in layers if ".gitattributes" in layer[2].values()]
    assert len(attributes) == 1
    return [layer for layer in layers if layer not in attributes], _without(config, attributes[0][0])


def _without(doc: object, digest: str) -> object:
    """``doc`` (a config) with the string ``digest`` taken out of every list it is in."""
    if isinstance(doc, dict):
        return {k: _without(v, digest) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_without(v, digest) for v in doc if v != digest]
    return doc


def _layers_and_config(ref: str) -> tuple[list[tuple[str, str, dict[str, str]]], object]:
    from ocibridge.model.extract import fetch_manifest

    with opened_store(ref) as (store, tag):
        _, manifest = fetch_manifest(store, store.resolve(tag).digest)
        config = json.loads(store.fetch_bytes(manifest.config))
        return [(x.digest, x.mediaType, dict(x.annotations or {})) for x in manifest.layers], config


def test_hostile_writes_are_refused_and_change_nothing(tmp_path, publishing_serve, lfs_client, monkeypatch):
    """No token, a read token, another prefix's token: 401/403; a path with '..', absolute or
    NUL, an oid never uploaded, a stale parent: refused; the registry's tag is where it was."""
    src = model_dir(tmp_path / "model")
    url, prefix, cache = publishing_serve.url, publishing_serve.prefix, publishing_serve.cache
    ref = f"{prefix}/acme/hostile:latest"
    point_hub_at(monkeypatch, url, tmp_path / "hub")  # Xet off: uploads over LFS
    writer = HfApi(endpoint=url, token="acme-token")
    writer.create_repo("acme/hostile")
    first = writer.upload_folder(repo_id="acme/hostile", folder_path=src)
    before = tag_digest(ref)
    assert before is not None and before.split(":")[1][:40] == first.oid

    for token, status in ((False, 401), ("nope", 401), ("reader-token", 403)):
        with pytest.raises(HfHubHTTPError) as refused:
            HfApi(endpoint=url, token=token).upload_file(path_or_fileobj=b"x", path_in_repo="x.txt",
                                                         repo_id="acme/hostile")
        assert refused.value.response.status_code == status
    with pytest.raises(HfHubHTTPError) as elsewhere:
        writer.create_repo("other/tiny")
    assert elsewhere.value.response.status_code == 403

    headers = {"authorization": "Bearer acme-token", "content-type": "application/x-ndjson"}

    def commit(*lines: dict[str, object]) -> httpx.Response:
        body = b"".join(json.dumps(line).encode() + b"\n" for line in
                        ({"key": "header", "value": {"summary": "evil"}}, *lines))
        return httpx.post(f"{url}/api/models/acme/hostile/commit/main", content=body, headers=headers)

    content = base64.b64encode(b"x").decode()
    for path in ("../escape.txt", "/etc/passwd", "a/\x00b", "a/../../b"):
        answer = commit({"key": "file", "value": {"path": path, "content": content, "encoding": "base64"}})
        assert answer.status_code == 400 and "Invalid path" in answer.json()["error"], (path, answer.text)
    unknown = commit({"key": "lfsFile", "value": {"path": "w.bin", "algo": "sha256", "oid": "ab" * 32,
                                                  "size": 3}})
    assert unknown.status_code == 422 and "no upload" in unknown.json()["error"]
    missing = commit({"key": "deletedFile", "value": {"path": "none.txt"}})
    assert missing.status_code == 404 and missing.headers["x-error-code"] == "EntryNotFound"
    with pytest.raises(HfHubHTTPError) as stale:
        writer.create_commit("acme/hostile", [CommitOperationAdd("b.txt", b"b")], commit_message="b",
                             parent_commit="0" * 40)
    assert stale.value.response.status_code == 412
    # an LFS PUT without serve's signature is refused; one whose bytes are not its oid too
    put = httpx.put(f"{url}/ocibridge/lfs/{'ab' * 32}/1/acme%2Fhostile", content=b"x")
    assert put.status_code == 403
    oid = hashlib.sha256(b"abc").hexdigest()
    batch = {"operation": "upload", "transfers": ["basic"], "objects": [{"oid": oid, "size": 3}]}
    href = httpx.post(f"{url}/acme/hostile.git/info/lfs/objects/batch", json=batch,
                      headers=headers).json()["objects"][0]["actions"]["upload"]["href"]
    wrong = httpx.put(href, content=b"abd")
    assert wrong.status_code == 400 and "hash to" in wrong.json()["error"]
    # an upload abandoned halfway leaves nothing in serve's staging
    staging = cache / "serve" / "staging"
    path = href.split("127.0.0.1:", 1)[1].split("/", 1)[1]
    with socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1]))) as s:
        s.sendall(f"PUT /{path} HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nab".encode())
        time.sleep(0.5)
    time.sleep(0.5)
    assert not any((staging / "tmp").iterdir()) and not (staging / "sha256" / oid).exists()
    again = commit({"key": "lfsFile", "value": {"path": "abc.txt", "algo": "sha256", "oid": oid, "size": 3}})
    assert again.status_code == 422
    # a large upload goes on to the registry as it arrives (the commit's push finds its blob
    # there), under its oid's digest: bytes that are not the oid never become a blob
    big, bad = os.urandom(9 * MIB), os.urandom(9 * MIB)
    # the last byte changed (flipped: a fixed b"x" is the byte it replaces one time in 256)
    for body, sent, status in ((big, big, 200), (bad, bad[:-1] + bytes([bad[-1] ^ 0xFF]), 400)):
        oid = hashlib.sha256(body).hexdigest()
        batch = {"operation": "upload", "objects": [{"oid": oid, "size": len(body)}]}
        href = httpx.post(f"{url}/acme/hostile.git/info/lfs/objects/batch", json=batch,
                          headers=headers).json()["objects"][0]["actions"]["upload"]["href"]
        assert httpx.put(href, content=sent, timeout=60).status_code == status
        assert blob_in(ref, oid, len(body)) == (status == 200)
    # a file push binds a chunk table for: its table made as it arrived and kept with the staged
    # file, so the commit reads it no more (not told to push's chunk cache: no side channel)
    from ocibridge.chunks.chunktable import DEFAULT_CHUNK_SIZE, chunk_stream

    large = os.urandom(64 * MIB)
    oid = hashlib.sha256(large).hexdigest()
    batch = {"operation": "upload", "objects": [{"oid": oid, "size": len(large)}]}
    href = httpx.post(f"{url}/acme/hostile.git/info/lfs/objects/batch", json=batch,
                      headers=headers).json()["objects"][0]["actions"]["upload"]["href"]
    assert httpx.put(href, content=large, timeout=120).status_code == 200
    kept = json.loads((staging / "tables" / oid).read_text())
    assert tuple(kept["chunks"]) == chunk_stream(io.BytesIO(large)).chunks and kept["size"] == len(large)
    assert (cache / "serve").is_dir()  # serve's cache, where push's chunk cache would be
    assert not (cache / "chunk-tables" / str(DEFAULT_CHUNK_SIZE) / oid).exists()
    assert tag_digest(ref) == before


@pytest.mark.parametrize(("line", "said"), [("tok admin", "line 2: scope 'admin'"),
                                            ("good write acme/", "lines 1 and 2 give the same token"),
                                            ("tok write acme/ name extra", "line 2: expected 'TOKEN")])
def test_a_malformed_token_line_is_one_error_line(tmp_path, capsys, line, said):
    (tmp_path / "tokens.txt").write_text(f"good\n{line}\n")
    assert main(["serve", "127.0.0.1:9/models", "--token-file", str(tmp_path / "tokens.txt")]) != 0
    err = capsys.readouterr().err
    where = f"ocibridge: error: --token-file {tmp_path / 'tokens.txt'} "
    assert err.count("\n") == 1 and err.startswith(where) and said in err, err


def test_branches_tags_history_and_commits_at_once(tmp_path, publishing_serve, lfs_client, monkeypatch):
    """create_branch, an upload to it, create_tag: registry tags; list_repo_commits walks the
    parents; two commits sent at once both land, the second on the first; deletes are refused
    (405); ``hf upload`` publishes too."""
    import threading

    src = model_dir(tmp_path / "model")
    url = publishing_serve.url
    point_hub_at(monkeypatch, url, tmp_path / "hub")  # Xet off: uploads over LFS
    api = HfApi(endpoint=url, token="writer-token")
    api.create_repo("acme/branches")
    first = api.upload_folder(repo_id="acme/branches", folder_path=src, commit_message="first")

    results: list[object] = []

    def add(name: str) -> None:
        try:
            results.append(api.upload_file(path_or_fileobj=name.encode(), path_in_repo=name,
                                           repo_id="acme/branches", commit_message=f"add {name}"))
        except Exception as e:  # noqa: BLE001 - the assertion below shows it
            results.append(e)

    threads = [threading.Thread(target=add, args=(f"at-once-{n}.txt",)) for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(not isinstance(r, Exception) for r in results), results
    names = {f.rfilename for f in api.model_info("acme/branches").siblings or []}
    assert {"at-once-0.txt", "at-once-1.txt", "config.json"} <= names

    api.create_branch("acme/branches", branch="dev", revision=first.oid)
    with pytest.raises(HfHubHTTPError) as twice:
        api.create_branch("acme/branches", branch="dev")
    assert twice.value.response.status_code == 409
    on_dev = api.upload_file(path_or_fileobj=b"dev\n", path_in_repo="dev.txt", repo_id="acme/branches",
                             revision="dev", commit_message="on dev")
    api.create_tag("acme/branches", tag="v1", revision=first.oid)
    refs = api.list_repo_refs("acme/branches")
    assert {t.name: t.target_commit for t in refs.tags} == {"v1": first.oid}
    assert {b.name: b.target_commit for b in refs.branches} == {"main": api.model_info("acme/branches").sha,
                                                               "dev": on_dev.oid}
    assert {f.rfilename for f in api.model_info("acme/branches", revision="dev").siblings or []} == {
        ".gitattributes", "config.json", "model.safetensors", "tokenizer.json", "dev.txt"}

    history = api.list_repo_commits("acme/branches")
    assert [c.title for c in history][-2:] == ["first", "initial commit"] and len(history) == 4
    assert {c.title for c in history[:2]} == {"add at-once-0.txt", "add at-once-1.txt"}
    assert history[0].authors == ["ci-bot"] and history[-2].commit_id == first.oid
    assert [c.title for c in api.list_repo_commits("acme/branches", revision="dev")] == [
        "on dev", "first", "initial commit"]

    # deleting them: tests/serve/test_serve_hub_repos.py

    hf = Path(sys.executable).with_name("hf")
    (tmp_path / "card.md").write_text("# card\n")
    env = {**os.environ, "HF_ENDPOINT": url, "HF_TOKEN": "writer-token", "HF_HUB_DISABLE_XET": "1",
           "HF_HOME": str(tmp_path / "hf-home")}
    done = subprocess.run([str(hf), "upload", "acme/branches", str(tmp_path / "card.md"), "README.md"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    readme = huggingface_hub.hf_hub_download("acme/branches", "README.md", token="reader-token")
    assert Path(readme).read_text() == "# card\n"


def xet_only(monkeypatch: pytest.MonkeyPatch, url: str, hub: Path) -> None:
    """huggingface_hub pointed at serve with hf_xet on, the LFS batch API forbidden: what it
    uploads goes over Xet or the test fails."""
    point_hub_at(monkeypatch, url, hub, xet=True)
    from huggingface_hub import _commit_api

    def no_lfs(*args: object, **kwargs: object) -> None:
        raise AssertionError("the LFS batch API was used: this test is of Xet uploads")

    monkeypatch.setattr(_commit_api, "post_lfs_batch_info", no_lfs)


def test_publish_over_xet_commits_what_hf_xet_uploaded(tmp_path, publishing_serve, monkeypatch):
    """huggingface_hub as it runs by default (hf_xet): the files it sends over Xet (xetupload.py)
    land in the same staging, and the same commit route makes them a ModelPack artifact."""
    src = model_dir(tmp_path / "model")
    url, prefix = publishing_serve.url, publishing_serve.prefix
    xet_only(monkeypatch, url, tmp_path / "hub")
    api = HfApi(endpoint=url, token="writer-token")
    api.create_repo("acme/xet")
    done = api.upload_folder(repo_id="acme/xet", folder_path=src, commit_message="over xet")
    assert api.model_info("acme/xet").sha == done.oid
    got = huggingface_hub.snapshot_download("acme/xet", token="reader-token")
    assert published_files_of(Path(got)) == files_of(src)
    assert main(["validate", f"{prefix}/acme/xet:latest", "--strict"]) == 0


#: serve started as ``python -c`` with uvloop made unimportable: uvicorn's ``loop="auto"`` then
#: runs it on asyncio's own loop, as on Windows, where uvloop does not build
WITHOUT_UVLOOP = ("import runpy, sys; sys.modules['uvloop'] = None; "
                  "runpy.run_module('ocibridge', run_name='__main__', alter_sys=True)")


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_serve_runs_on_either_loop_and_publishes(tmp_path, registry, unique_repo, monkeypatch, loop):
    """``ocibridge[serve]`` installs uvloop, and serve runs on it (uvicorn's ``loop="auto"``): its
    process has uvloop's extension loaded. Where uvloop is missing (Windows) serve runs on
    asyncio's loop. On each, a publish through it (hf_xet, the default) reads back."""
    from serving import stop, wait_until_healthy

    (tmp_path / "tokens.txt").write_text(TOKENS)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path / "serve.log"
    start = ["-m", "ocibridge"] if loop == "uvloop" else ["-c", WITHOUT_UVLOOP]
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, *start, "serve", f"{registry.host}/{unique_repo}",
                                 "--listen", f"127.0.0.1:{port}", "--no-access-log",
                                 "--token-file", str(tmp_path / "tokens.txt")],
                                env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_healthy(proc, url, log)
        on_uvloop = "/uvloop/loop." in Path(f"/proc/{proc.pid}/maps").read_text()
        assert on_uvloop == (loop == "uvloop"), f"serve is {'' if on_uvloop else 'not '}running on uvloop"
        point_hub_at(monkeypatch, url, tmp_path / "hub", xet=True)
        src = model_dir(tmp_path / "model")
        api = HfApi(endpoint=url, token="writer-token")
        api.create_repo("acme/loop")
        api.upload_folder(repo_id="acme/loop", folder_path=src)
        got = Path(huggingface_hub.snapshot_download("acme/loop", cache_dir=tmp_path / "hub", token="reader-token"))
        assert published_files_of(got) == files_of(src)
    finally:
        stop(proc)
