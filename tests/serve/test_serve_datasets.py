"""Dataset repositories through ``ocibridge serve`` (issue 104), as huggingface_hub uses them
(``repo_type="dataset"``), against serve as a process over the real registry: the write API (create,
commit over LFS and over Xet, branches and tags, settings, delete, move), the read API (dataset_info,
tree, paths-info, refs, commits, resolve, raw) and HfFileSystem's ``datasets/ORG/NAME`` paths. A
model and a dataset of one name are two repositories on every route and for every token."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi, HfFileSystem, hf_hub_download
from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError
from serving import ROOT, point_hub_at, serve_as_process, serving

from ocibridge.oci.mediatypes import Family
from tests.support.fixtures import new_repo

#: huggingface_hub's own LFS upload passes bytes as data= to httpx, which warns (not ours)
pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning")

TOKENS = "\n".join([
    "writer-token write * ci-bot",
    "reader-token user=reader read=*",  # public repositories only
    "model-x-token read acme/x model-x",  # the model acme/x only: a full repo id names one repository
    "datasets-token user=dsw write=datasets/acme/",  # acme's datasets only, never its models
    "acme-token user=acme write=acme/",  # a namespace: its models and its datasets
]) + "\n"
CARD = b"---\nlicense: mit\ntask_categories:\n- text-classification\n---\n# x\n"


@contextlib.contextmanager
def serve_process(root: Path, prefix: str) -> Iterator[str]:
    (root / "tokens.txt").write_text(TOKENS)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OCIBRIDGE_CACHE": str(root / "cache")}
    with serve_as_process([prefix, "--no-access-log", "--token-file", str(root / "tokens.txt"),
                           "--audit-log", str(root / "audit.jsonl")], env, root / "serve.log") as url:
        yield url


@pytest.fixture(scope="module")
def served(registry: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, Path]]:
    """serve over a prefix of its own of the session's registry: (its URL, the prefix, its audit log)."""
    root = tmp_path_factory.mktemp("datasets")
    prefix = f"{registry.host}/{new_repo('datasets')}"
    with serve_process(root, prefix) as url:
        yield url, prefix, root / "audit.jsonl"
    assert "Traceback" not in (root / "serve.log").read_text()


def api(url: str, token: str = "writer-token") -> HfApi:
    return HfApi(endpoint=url, token=token)


def data_dir(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "README.md").write_bytes(CARD)
    (root / "data").mkdir()
    (root / "data" / "train.csv").write_text("text,label\nhello,1\nworld,0\n")
    (root / "data" / "blob.bin").write_bytes(hashlib.sha256(b"x").digest() * 4096)  # binary: over LFS or Xet
    return root


def registry_manifest(prefix: str, repository: str, tag: str = "latest") -> tuple[dict[str, Any], Any]:
    """The manifest of ``prefix/repository:tag`` as the registry holds it, and the store."""
    from ocibridge.oci.reference import RegistryReference
    from ocibridge.stores.registry.store import open_repository

    host, _, path = prefix.partition("/")
    store = open_repository(RegistryReference(host, f"{path}/{repository}"), None)
    desc = store.resolve(tag)
    return json.loads(store.fetch_bytes(desc)), store


@pytest.mark.parametrize("xet", [False, True], ids=["lfs", "xet"])
def test_a_dataset_through_huggingface_hub(served, tmp_path, monkeypatch, xet):
    url, prefix, audit = served
    repo = f"acme/d-{'xet' if xet else 'lfs'}"
    point_hub_at(monkeypatch, url, tmp_path / "hub", xet=xet)
    hub = api(url)
    made = hub.create_repo(repo, repo_type="dataset")
    assert made.repo_type == "dataset" and made.repo_id == repo
    with pytest.raises(HfHubHTTPError) as again:
        hub.create_repo(repo, repo_type="dataset")
    assert again.value.response.status_code == 409
    first = hub.upload_folder(repo_id=repo, repo_type="dataset", folder_path=data_dir(tmp_path / "d"),
                              commit_message="first")
    info = hub.dataset_info(repo, files_metadata=True)
    assert info.id == repo and info.sha == first.oid and info.private is False
    assert {s.rfilename for s in info.siblings} == {".gitattributes", "README.md", "data/train.csv", "data/blob.bin"}
    blob = next(s for s in info.siblings if s.rfilename == "data/blob.bin")
    assert blob.lfs is not None and blob.lfs.sha256 == hashlib.sha256(hashlib.sha256(b"x").digest() * 4096).hexdigest()
    assert info.card_data is not None and info.card_data["license"] == "mit"
    assert "task_categories:text-classification" in (info.tags or [])
    assert hub.dataset_info(repo, revision=first.oid).sha == first.oid
    assert sorted(f.path for f in hub.list_repo_tree(repo, repo_type="dataset", recursive=True)) == \
        [".gitattributes", "README.md", "data", "data/blob.bin", "data/train.csv"]
    paths = hub.get_paths_info(repo, ["data/train.csv", "data", "nope"], repo_type="dataset")
    assert sorted(p.path for p in paths) == ["data", "data/train.csv"]
    # a second commit, a branch and a tag
    second = hub.create_commit(repo, [CommitOperationAdd("data/test.csv", b"text,label\nagain,1\n"),
                                      CommitOperationDelete("data/blob.bin")],
                               commit_message="second", repo_type="dataset")
    hub.create_branch(repo, branch="dev", repo_type="dataset", revision=first.oid)
    hub.create_tag(repo, tag="v1", repo_type="dataset", revision=second.oid)
    refs = hub.list_repo_refs(repo, repo_type="dataset")
    assert {b.name for b in refs.branches} == {"main", "dev"} and [t.name for t in refs.tags] == ["v1"]
    commits = hub.list_repo_commits(repo, repo_type="dataset")
    assert [c.title for c in commits][:2] == ["second", "first"]
    assert hub.file_exists(repo, "data/blob.bin", repo_type="dataset", revision="dev")
    assert not hub.file_exists(repo, "data/blob.bin", repo_type="dataset")
    # resolve and raw at the Hub's dataset paths
    got = hf_hub_download(repo, "data/test.csv", repo_type="dataset", token="writer-token")
    assert Path(got).read_bytes() == b"text,label\nagain,1\n"
    old = hf_hub_download(repo, "data/blob.bin", repo_type="dataset", revision="dev", token="writer-token")
    assert Path(old).read_bytes() == hashlib.sha256(b"x").digest() * 4096
    raw = httpx.get(f"{url}/datasets/{repo}/raw/dev/data/blob.bin", headers={"Authorization": "Bearer writer-token"})
    assert raw.status_code == 200 and raw.text.startswith("version https://git-lfs.github.com/spec/v1")
    # the audit names the dataset by its key, never as the model of its name
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    commits = {line["repository"] for line in lines if line["action"] == "commit" and line["outcome"] == "landed"}
    assert f"datasets/{repo}" in commits and repo not in commits
    # the model API and the model paths do not see it
    with pytest.raises(RepositoryNotFoundError):
        hub.model_info(repo)
    assert httpx.get(f"{url}/{repo}/resolve/main/data/test.csv",
                     headers={"Authorization": "Bearer writer-token"}).status_code == 404
    # in the registry: PREFIX/datasets/REPO, its files data layers, the manifest saying the type
    manifest, _ = registry_manifest(prefix, f"datasets/{repo}")
    assert manifest["annotations"]["io.ocibridge.hf.repo-type"] == "dataset"
    kinds = {layer["annotations"][Family.CNAI.filepath_key]: layer["mediaType"] for layer in manifest["layers"]}
    assert kinds["data/test.csv"] == "application/vnd.cnai.model.dataset.v1.raw"
    assert kinds["README.md"] == "application/vnd.cnai.model.doc.v1.raw"


def test_a_model_and_a_dataset_of_one_name_stay_apart(served, tmp_path, monkeypatch):
    url, *_ = served
    point_hub_at(monkeypatch, url, tmp_path / "hub")
    hub = api(url)
    hub.create_repo("acme/x")
    hub.create_repo("acme/x", repo_type="dataset")
    hub.upload_file(path_or_fileobj=b"model", path_in_repo="which.txt", repo_id="acme/x")
    hub.upload_file(path_or_fileobj=b"dataset", path_in_repo="which.txt", repo_id="acme/x", repo_type="dataset")

    def read(token: str, dataset: bool) -> httpx.Response:
        path = "/datasets/acme/x/resolve/main/which.txt" if dataset else "/acme/x/resolve/main/which.txt"
        return httpx.get(url + path, headers={"Authorization": f"Bearer {token}"})

    assert (read("reader-token", False).text, read("reader-token", True).text) == ("model", "dataset")
    assert hub.model_info("acme/x").sha != hub.dataset_info("acme/x").sha
    # a token of the repo id acme/x reads the model only; one of acme's datasets writes those only
    assert read("model-x-token", False).status_code == 200 and read("model-x-token", True).status_code == 404
    api(url, "datasets-token").upload_file(path_or_fileobj=b"d2", path_in_repo="two.txt", repo_id="acme/x",
                                           repo_type="dataset")
    with pytest.raises(HfHubHTTPError) as refused:
        api(url, "datasets-token").upload_file(path_or_fileobj=b"m2", path_in_repo="two.txt", repo_id="acme/x")
    assert refused.value.response.status_code == 403
    # the namespace's token writes both
    api(url, "acme-token").upload_file(path_or_fileobj=b"m3", path_in_repo="three.txt", repo_id="acme/x")
    api(url, "acme-token").upload_file(path_or_fileobj=b"d3", path_in_repo="three.txt", repo_id="acme/x",
                                       repo_type="dataset")
    # hf repos ls: the namespace's model and dataset, each its own row
    rows = httpx.get(f"{url}/api/settings/repositories", headers={"Authorization": "Bearer acme-token"}).json()
    assert {(r["id"], r["type"]) for r in rows} >= {("acme/x", "model"), ("acme/x", "dataset")}
    # private and gated are each repository's own
    hub.update_repo_settings("acme/x", repo_type="dataset", private=True)
    assert read("reader-token", True).status_code == 404 and read("reader-token", False).text == "model"
    assert read("acme-token", True).text == "dataset"  # its namespace's private repositories
    hub.update_repo_settings("acme/x", repo_type="dataset", private=False, gated="auto")
    with pytest.raises(GatedRepoError):
        hf_hub_download("acme/x", "which.txt", repo_type="dataset", token="reader-token")
    assert read("reader-token", False).text == "model"
    hub.update_repo_settings("acme/x", repo_type="dataset", gated=False)
    # a move and a delete of the dataset leave the model as it was
    hub.move_repo("acme/x", "acme/y", repo_type="dataset")
    assert hub.dataset_info("acme/y").id == "acme/y" and hub.model_info("acme/x").id == "acme/x"
    moved = httpx.get(f"{url}/api/datasets/acme/x", headers={"Authorization": "Bearer writer-token"})
    assert moved.status_code == 307 and moved.headers["location"] == "/api/datasets/acme/y"
    hub.delete_repo("acme/y", repo_type="dataset")
    with pytest.raises(RepositoryNotFoundError):
        hub.dataset_info("acme/y")
    assert read("reader-token", False).text == "model"
    assert [m.id for m in hub.list_models(search="acme/x")] == ["acme/x"]
    assert "acme/y" not in [d.id for d in hub.list_datasets()]


def test_reserved_names_and_spaces_are_refused(served):
    url, *_ = served
    hub = api(url)
    for name in ("datasets/x", "spaces/x"):
        with pytest.raises(HfHubHTTPError) as refused:
            hub.create_repo(name)
        assert refused.value.response.status_code == 400, name
    with pytest.raises(HfHubHTTPError) as space:
        hub.create_repo("acme/app", repo_type="space", space_sdk="static")
    assert space.value.response.status_code == 400
    # a model path whose first part is reserved never reads a dataset
    hub.create_repo("solo", repo_type="dataset")
    headers = {"Authorization": "Bearer writer-token"}
    assert httpx.get(f"{url}/api/datasets/ci-bot/solo", headers=headers).status_code == 200
    assert httpx.get(f"{url}/api/models/datasets/ci-bot", headers=headers).status_code == 404


def test_hf_file_system_reads_dataset_paths(served, tmp_path, monkeypatch):
    url, *_ = served
    point_hub_at(monkeypatch, url, tmp_path / "hub")
    hub = api(url)
    hub.create_repo("acme/fs", repo_type="dataset")
    hub.upload_folder(repo_id="acme/fs", repo_type="dataset", folder_path=data_dir(tmp_path / "d"))
    fs = HfFileSystem(endpoint=url, token="writer-token")
    assert sorted(fs.ls("datasets/acme/fs/data", detail=False)) == ["datasets/acme/fs/data/blob.bin",
                                                                     "datasets/acme/fs/data/train.csv"]
    assert fs.glob("datasets/acme/fs/**/*.csv") == ["datasets/acme/fs/data/train.csv"]
    with fs.open("datasets/acme/fs/data/train.csv", "rb") as f:
        assert f.read() == b"text,label\nhello,1\nworld,0\n"
    with fs.open("datasets/acme/fs/data/blob.bin", "rb") as f:
        f.seek(32)
        assert f.read(32) == hashlib.sha256(b"x").digest()
    assert not fs.exists("acme/fs/data/train.csv")  # the model of that name: there is none


def test_pages_list_and_show_datasets(served, tmp_path):
    url, *_ = served
    hub = api(url)
    hub.create_repo("acme/web", repo_type="dataset")
    hub.create_repo("acme/web")
    hub.upload_folder(repo_id="acme/web", repo_type="dataset", folder_path=data_dir(tmp_path / "d"),
                      commit_message="the shards")
    hub.upload_file(path_or_fileobj=b"---\nlicense: mit\n---\n# The model web\n", path_in_repo="README.md",
                    repo_id="acme/web")
    login = httpx.post(f"{url}/ocibridge/login", data={"token": "writer-token", "next": "/"})
    assert login.status_code == 303
    cookies = login.cookies

    def page(path: str) -> str:
        answer = httpx.get(url + path, cookies=cookies, timeout=30)
        assert answer.status_code == 200, (path, answer.status_code, answer.text[:300])
        return answer.text

    listing = page("/datasets?search=web")
    assert "1 dataset matching" in listing and 'href="/datasets/acme/web"' in listing
    assert 'href="/acme/web"' not in page("/datasets") and 'href="/datasets/acme/web"' not in page("/models")
    shown = page("/datasets/acme/web")
    assert 'Dataset card</h2>' in shown and '<div class="card"><h3>x</h3>' in shown  # its card, rendered
    assert "load_dataset(&#39;acme/web&#39;)" in shown and "repo_type=&#39;dataset&#39;" in shown
    assert 'href="/datasets/acme/web/tree/main"' in shown and 'href="/datasets/acme/web/commits/main"' in shown
    assert "The model web" in page("/acme/web") and "The model web" not in shown
    assert "train.csv" in page("/datasets/acme/web/tree/main/data")
    assert "hello,1" in page("/datasets/acme/web/blob/main/data/train.csv")
    assert "the shards" in page("/datasets/acme/web/commits/main")


def test_a_dataset_in_an_oci_layout(tmp_path, monkeypatch):
    """A layout source keeps a dataset as the registry does: named datasets/ORG/NAME:TAG, beside
    a model of the same name."""
    from ocibridge.hubserver.repo.publishing import Publishing
    from ocibridge.stores.layout import LayoutStore

    LayoutStore(tmp_path / "lay", create=True).close()
    with serving([f"oci:{tmp_path / 'lay'}"], tokens=("writer write * ci-bot",), publish=Publishing()) as s:
        point_hub_at(monkeypatch, s.url, tmp_path / "hub")
        hub = HfApi(endpoint=s.url, token="writer")
        hub.create_repo("acme/lay", repo_type="dataset")
        hub.create_repo("acme/lay")
        hub.upload_file(path_or_fileobj=b"n\n1\n", path_in_repo="data/a.csv", repo_id="acme/lay", repo_type="dataset")
        got = hf_hub_download("acme/lay", "data/a.csv", repo_type="dataset", token="writer")
        assert Path(got).read_bytes() == b"n\n1\n"
        assert [d.id for d in hub.list_datasets()] == ["acme/lay"] and [m.id for m in hub.list_models()] == ["acme/lay"]
        assert not hub.file_exists("acme/lay", "data/a.csv")  # the model of that name holds no such file
    names = LayoutStore(tmp_path / "lay").tags()
    assert "datasets/acme/lay:latest" in names and "acme/lay:latest" in names


@pytest.mark.parametrize("xet", [False, True], ids=["lfs", "xet"])
def test_copy_files_from_a_model_into_a_dataset(served, tmp_path, monkeypatch, xet):
    """huggingface_hub's cross-repository ``copy_files`` asks the source's ``lfs-files/duplicate``
    before the target's commit names the LFS files: a dataset takes a model's file, byte for byte."""
    url, *_ = served
    point_hub_at(monkeypatch, url, tmp_path / "hub", xet=xet)
    hub = api(url)
    model, dataset = f"acme/cp-model-{xet}", f"acme/cp-data-{xet}"
    hub.create_repo(model)
    hub.create_repo(dataset, repo_type="dataset")
    weights = hashlib.sha256(b"copied").digest() * 2048
    hub.create_commit(model, [CommitOperationAdd("config.json", b'{"k": 1}'),
                              CommitOperationAdd("sub/w.bin", weights)], commit_message="model")
    hub.copy_files(f"hf://{model}/sub", f"hf://datasets/{dataset}/copied")
    hub.copy_files(f"hf://{model}/config.json", f"hf://datasets/{dataset}/config.json")
    got = hf_hub_download(dataset, "copied/w.bin", repo_type="dataset", token="writer-token")
    assert Path(got).read_bytes() == weights
    assert hub.get_paths_info(dataset, ["config.json"], repo_type="dataset")[0].size == len(b'{"k": 1}')
    # what a token may not read of the source is refused, however it names the bytes
    sha = hashlib.sha256(weights).hexdigest()
    answer = httpx.post(f"{url}/api/models/{model}/lfs-files/duplicate",
                        headers={"Authorization": "Bearer datasets-token"},
                        json={"target": {"type": "dataset", "name": "acme/elsewhere"}, "files": [{"sha256": sha}]})
    assert answer.status_code == 200 and [f["sha256"] for f in answer.json()["failed"]] == []
    refused = httpx.post(f"{url}/api/models/{model}/lfs-files/duplicate",
                         headers={"Authorization": "Bearer datasets-token"},
                         json={"target": {"type": "model", "name": model}, "files": [{"sha256": sha}]})
    assert refused.status_code == 403
