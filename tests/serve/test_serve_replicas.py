"""One writer, many readers (issue 61, "Replicas that lose nothing"): ``ocibridge serve --writer URL``
forwards every write to the writer and reads itself, so that serves over one registry, each with
its own cache, act as one. Processes, a real registry, the real huggingface_hub."""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import huggingface_hub
import pytest
from huggingface_hub import HfApi
from huggingface_hub.errors import HfHubHTTPError
from serve_processes import ServeProcess, free_port, running
from serving import files_of, hub_retries_at_once, point_hub_at, published_files_of
from support.publishing import model_dir

from ocibridge.hubserver.app import ServeApp
from ocibridge.hubserver.repo.catalog import Catalog
from ocibridge.hubserver.repo.sources import parse_sources
from ocibridge.hubserver.server import ServerSettings, build_app

pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning")

WRITE = {"Authorization": "Bearer writer-token"}


@pytest.fixture(scope="module")
def pair(registry, tmp_path_factory) -> Iterator[tuple[ServeProcess, ServeProcess]]:
    """A writer and a reader over one registry prefix, each with its own cache."""
    home = tmp_path_factory.mktemp("replicas")
    prefix = f"{registry.host}/test/{uuid.uuid4().hex[:8]}"
    with running(home / "writer", prefix, "--xet-min-size", "1M") as writer, \
            running(home / "reader", prefix, "--xet-min-size", "1M", "--writer", writer.url) as reader:
        yield writer, reader


def test_writes_through_a_reader_land_and_its_urls_lead_back_to_it(pair, tmp_path, monkeypatch):
    """create_repo and upload_folder over LFS through the reader: the batch's hrefs and the Xet
    CAS URL name the reader (the client may reach nothing else); the commit is read back
    through both processes."""
    writer, reader = pair
    point_hub_at(monkeypatch, reader.url, tmp_path / "hub")
    src = model_dir(tmp_path / "model")
    api = HfApi(endpoint=reader.url, token="writer-token")
    api.create_repo("acme/lfs")
    batch = httpx.post(f"{reader.url}/acme/lfs.git/info/lfs/objects/batch", headers=WRITE, json={
        "operation": "upload", "transfers": ["basic"],
        "objects": [{"oid": "ab" * 32, "size": 5}]})
    assert batch.status_code == 200, batch.text
    href = batch.json()["objects"][0]["actions"]["upload"]["href"]
    assert href.startswith(f"{reader.url}/"), href
    token = httpx.get(f"{reader.url}/api/models/acme/lfs/xet-write-token/main", headers=WRITE)
    assert token.status_code == 200 and token.json()["casUrl"].startswith(f"{reader.url}/"), token.text

    done = api.upload_folder(repo_id="acme/lfs", folder_path=src, commit_message="through a reader")
    assert HfApi(endpoint=writer.url, token="reader-token").model_info("acme/lfs").sha == done.oid
    assert api.model_info("acme/lfs").sha == done.oid
    got = huggingface_hub.snapshot_download("acme/lfs", token="reader-token")
    assert published_files_of(Path(got)) == files_of(src)


def test_xet_uploads_through_a_reader(pair, tmp_path, monkeypatch):
    """hf_xet's xorbs and shards, sent to the CAS URL the reader handed out, reach the writer."""
    pytest.importorskip("hf_xet")
    from test_serve_publish import xet_only

    writer, reader = pair
    xet_only(monkeypatch, reader.url, tmp_path / "hub")
    src = model_dir(tmp_path / "model")
    api = HfApi(endpoint=reader.url, token="writer-token")
    api.create_repo("acme/xet")
    done = api.upload_folder(repo_id="acme/xet", folder_path=src)
    assert HfApi(endpoint=writer.url, token="reader-token").model_info("acme/xet").sha == done.oid
    got = huggingface_hub.snapshot_download("acme/xet", token="reader-token")
    assert published_files_of(Path(got)) == files_of(src)


def test_twenty_concurrent_commits_through_a_reader_and_the_writer_all_land(pair, tmp_path, monkeypatch):
    """Twenty upload_file calls at once, no parent_commit, ten through each process: all
    succeed, each commit is in the branch's history with its file, and the branch holds all."""
    writer, reader = pair
    point_hub_at(monkeypatch, writer.url, tmp_path / "hub")
    HfApi(endpoint=writer.url, token="writer-token").create_repo("acme/many")
    results: dict[str, str] = {}
    failures: list[BaseException] = []

    def upload(n: int) -> None:
        via = (reader, writer)[n % 2]
        try:
            done = HfApi(endpoint=via.url, token="writer-token").upload_file(
                path_or_fileobj=f"file {n}\n".encode(), path_in_repo=f"f/{n:02d}.txt", repo_id="acme/many",
                commit_message=f"file {n}")
            results[f"f/{n:02d}.txt"] = done.oid
        except BaseException as e:  # noqa: BLE001 - reported below
            failures.append(e)

    threads = [threading.Thread(target=upload, args=(n,)) for n in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not failures, failures
    assert len(results) == 20 and len(set(results.values())) == 20
    for via in (writer, reader):
        api = HfApi(endpoint=via.url, token="reader-token")
        history = {c.commit_id for c in api.list_repo_commits("acme/many")}
        assert set(results.values()) <= history, via
        assert set(results) <= set(api.list_repo_files("acme/many")), via
    api = HfApi(endpoint=writer.url, token="reader-token")
    for path, oid in results.items():  # each commit holds its own file
        assert path in api.list_repo_files("acme/many", revision=oid)
        got = huggingface_hub.hf_hub_download("acme/many", path, revision=oid, endpoint=writer.url,
                                              cache_dir=tmp_path / "hub", token="reader-token")
        assert Path(got).read_bytes() == f"file {int(path[2:4])}\n".encode()


def test_a_writer_that_is_down_is_a_503_and_reads_go_on(pair, tmp_path, monkeypatch):
    """A reader whose writer does not answer: writes are the Hub's 503, reads are answered."""
    writer, _ = pair
    hub_retries_at_once(monkeypatch)  # upload_file's 5 retries of the 503 (the writer stays down)
    HfApi(endpoint=writer.url, token="writer-token").create_repo("acme/down", exist_ok=True)
    HfApi(endpoint=writer.url, token="writer-token").upload_file(path_or_fileobj=b"x", path_in_repo="x.txt",
                                                                 repo_id="acme/down")
    prefix = next(a for a in writer.args if "/" in a)
    with running(tmp_path / "orphan", prefix, "--writer", f"http://127.0.0.1:{free_port()}") as orphan:
        answer = httpx.post(f"{orphan.url}/api/models/acme/down/preupload/main", headers=WRITE,
                            json={"files": [{"path": "y.txt", "size": 1, "sample": ""}]})
        assert answer.status_code == 503 and "did not answer" in answer.headers["x-error-message"]
        assert answer.json()["error"] == answer.headers["x-error-message"]
        with pytest.raises(HfHubHTTPError) as refused:
            HfApi(endpoint=orphan.url, token="writer-token").upload_file(
                path_or_fileobj=b"y", path_in_repo="y.txt", repo_id="acme/down")
        assert refused.value.response.status_code == 503
        assert "x.txt" in HfApi(endpoint=orphan.url, token="reader-token").list_repo_files("acme/down")


def test_forwarded_host_is_believed_only_from_trusted_peers(pair, tmp_path):
    """X-Forwarded-Host makes the writer's hrefs name the reader; from a peer not trusted
    (here: loopback, once --trust-forwarded names another network) it is ignored."""
    writer, _ = pair
    body = {"operation": "upload", "transfers": ["basic"], "objects": [{"oid": "cd" * 32, "size": 5}]}
    forwarded = {**WRITE, "X-Forwarded-Host": "reader.example:8443", "X-Forwarded-Proto": "https"}
    HfApi(endpoint=writer.url, token="writer-token").create_repo("acme/fwd", exist_ok=True)
    HfApi(endpoint=writer.url, token="writer-token").upload_file(  # in the registry: any serve knows it
        path_or_fileobj=b"x", path_in_repo="x.txt", repo_id="acme/fwd")
    trusting = httpx.post(f"{writer.url}/acme/fwd.git/info/lfs/objects/batch", headers=forwarded, json=body)
    assert trusting.json()["objects"][0]["actions"]["upload"]["href"].startswith("https://reader.example:8443/")
    prefix = next(a for a in writer.args if "/" in a)
    # a writer of its own prefix: over the writer's, the writer lease would have it refuse every write
    with running(tmp_path / "wary", f"{prefix}-wary", "--trust-forwarded", "10.0.0.0/8") as wary:
        HfApi(endpoint=wary.url, token="writer-token").create_repo("acme/fwd")
        HfApi(endpoint=wary.url, token="writer-token").upload_file(path_or_fileobj=b"x", path_in_repo="x.txt",
                                                                   repo_id="acme/fwd")
        answer = httpx.post(f"{wary.url}/acme/fwd.git/info/lfs/objects/batch", headers=forwarded, json=body)
        assert answer.json()["objects"][0]["actions"]["upload"]["href"].startswith(f"{wary.url}/"), answer.text


#: what a reader answers itself though its method is not GET: reads with a body, the login form
#: (list_models and list_datasets at /api/{repo_type}; /v1/telemetry: hf_xet's report, taken and dropped where it lands)
READS_NOT_GET = {("/api/{repo_type:hub_api_type}", "POST"), ("/api/validate-yaml", "POST"),
                 ("/ocibridge/login", "POST"), ("/v1/telemetry", "POST"),
                 # copy_files' question before its commit: which files the target may take (copies nothing)
                 ("/api/{repo_type:hub_api_type}/{org:hub_part}/{name:hub_part}/lfs-files/duplicate", "POST"),
                 ("/api/{repo_type:hub_api_type}/{name:hub_part}/lfs-files/duplicate", "POST")}


def test_every_route_that_writes_is_forwarded(registry):
    """The route table of a reader: each route whose method is not GET or HEAD is forwarded
    unless it only reads; and the Xet write grant (a GET) is forwarded too."""
    catalog = Catalog(parse_sources([f"{registry.host}/test/routes"]))
    app = build_app(catalog, ServerSettings(writer="http://127.0.0.1:9", tokens=("t write",)))
    serve: ServeApp = app.state.serve
    assert serve.forwarder is not None
    forwarded, kept = set(), set()
    for route in app.routes:
        methods = sorted(getattr(route, "methods", None) or ())
        entry = (route.path, ",".join(methods))  # type: ignore[attr-defined]
        (forwarded if getattr(route, "endpoint", None) == serve.forwarder.forward else kept).add(entry)
    written = {path for path, methods in forwarded}
    assert all(any(w in path for path in written) for w in (
        "/preupload/", "/commit/{revision", "/{kind:hub_ref_kind}/", "/xet-write-token/", "/api/repos/create",
        "/api/repos/delete", ".git/info/lfs/objects/batch", "/ocibridge/lfs/verify", "/ocibridge/lfs/part/",
        "/ocibridge/lfs/complete/", "/xet-write/{org:hub_part}/{name:hub_part}/v1/xorbs/",
        "/xet-write/{repo_type:hub_dataset}/{org:hub_part}/{name:hub_part}/v1/xorbs/",
        "/{repo_type:hub_dataset}/{org:hub_part}/{name:hub_part}.git/info/lfs/objects/batch",
        "/v1/xorb-grants/", "/{version:xet_version}/shards", "/v1/chunks/")), written
    for path, methods in kept:  # what is answered here either reads or is a catch-all
        others = set(methods.split(",")) - {"GET", "HEAD"} if methods else set()
        if others and "{verb:hub_keyword}" not in path and "{rest:" not in path:
            assert all((path, m) in READS_NOT_GET or "paths-info" in path for m in others), (path, methods)
    catalog.close()
    assert os.environ.get("OCIBRIDGE_CACHE")  # built on the test's own cache (conftest)


def test_a_bad_writer_or_peer_is_one_line(capsys):
    from ocibridge.cli import main

    for flags, words in ((["--writer", "ftp://writer"], "--writer 'ftp://writer': expected http(s)://"),
                         (["--trust-forwarded", "the readers"], "--trust-forwarded 'the readers': expected")):
        assert main(["serve", "registry.internal:5000/models", *flags]) == 2
        err = capsys.readouterr().err
        assert words in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_a_repository_created_and_not_committed_to_yet_reads_the_same_through_a_reader(pair):
    """create_repo on the writer marks the repository in the writer's cache only (the registry has
    no byte of it until the first commit). A file asked of it is the Hub's EntryNotFound on the
    writer (transformers asks for a card right after create_repo, and goes on), but a reader found
    nothing and said RepoNotFound (transformers stops). A reader now asks its writer before it says
    a repository is not there."""
    writer, reader = pair
    HfApi(endpoint=writer.url, token="writer-token").create_repo("acme/fresh-empty")
    for serve in (writer, reader):
        with pytest.raises(huggingface_hub.errors.EntryNotFoundError):
            huggingface_hub.hf_hub_download("acme/fresh-empty", "README.md", endpoint=serve.url,
                                            token="reader-token", cache_dir=str(serve.home / "hub"))
        with pytest.raises(huggingface_hub.errors.RepositoryNotFoundError):  # neither knows it: still 404
            huggingface_hub.hf_hub_download("acme/never-made", "README.md", endpoint=serve.url,
                                            token="reader-token", cache_dir=str(serve.home / "hub"))
