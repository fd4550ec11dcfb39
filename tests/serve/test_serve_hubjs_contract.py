"""The Hub's contract as its JavaScript client (@huggingface/hub, huggingface.js) sends it (issue
88), through real HTTP against serve as a process over a registry of this module's own: what the
client's own tests taught (bench/hubjs_suite.py runs them against serve) that huggingface_hub
never sends. ``createRepo({files, license})``, ``createBranch({empty, overwrite})``, the LFS batch's
Xet answer to a client that offers ``xet`` (and the unchanged answer to huggingface_hub, which
offers none), and ``whoAmI``'s full name and organisations."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import huggingface_hub
import pytest
from huggingface_hub import HfApi
from serving import own_registry_and_serve, point_hub_at

TOKENS = ("js-token user=hubjs write=hubjs/ fullname=Hub%20JS+Bot orgs=acme:Acme%20Corp%2C+Inc.,labs\n"
          "plain-token user=plain write=plain/\n"
          "anonymous read=*\n")
AUTH = {"Authorization": "Bearer js-token"}
LFS = {**AUTH, "Accept": "application/vnd.git-lfs+json", "Content-Type": "application/vnd.git-lfs+json"}

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("hubjs")
    with own_registry_and_serve(root, TOKENS, lambda host: [host, "--plain-http"]) as (served, _):
        yield served


@pytest.fixture(autouse=True)
def hub_at_serve(monkeypatch: pytest.MonkeyPatch, url: str, tmp_path: Path) -> None:
    point_hub_at(monkeypatch, url, tmp_path / "hub")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)


def create(url: str, name: str, **body: object) -> httpx.Response:
    """``createRepo`` as @huggingface/hub sends it (create-repo.ts)."""
    return httpx.post(f"{url}/api/repos/create", headers=AUTH, timeout=60,
                      json={"name": name, "organization": "hubjs", "type": "model", **body})


def raw(url: str, repo: str, path: str, rev: str = "main") -> httpx.Response:
    return httpx.get(f"{url}/{repo}/raw/{rev}/{path}", headers=AUTH, timeout=30)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_create_repo_commits_the_files_it_sends_in_its_first_commit(url):
    attributes = b"*.html filter=lfs diff=lfs merge=lfs -text"
    answer = create(url, "with-files", files=[
        {"path": ".gitattributes", "content": b64(attributes), "encoding": "base64"},
        {"path": "docs/notes.txt", "content": b64(b"first notes\n"), "encoding": "base64"}])
    assert answer.status_code == 200, answer.text
    assert raw(url, "hubjs/with-files", ".gitattributes").content == attributes  # the Hub's default replaced
    assert raw(url, "hubjs/with-files", "docs/notes.txt").content == b"first notes\n"
    commits = HfApi(token="js-token").list_repo_commits("hubjs/with-files")
    assert [c.title for c in commits] == ["initial commit"]  # one commit, as on the Hub


def test_create_repo_refuses_a_malformed_file_before_making_anything(url):
    answer = create(url, "bad-files", files=[{"path": "x.txt", "content": "not base64!", "encoding": "base64"}])
    assert answer.status_code == 400 and "base64" in answer.json()["error"]
    escaping = create(url, "bad-files", files=[{"path": "../x.txt", "content": b64(b"x"), "encoding": "base64"}])
    assert escaping.status_code == 400
    assert not HfApi(token="js-token").repo_exists("hubjs/bad-files")


def test_create_repo_with_a_license_commits_its_model_card(url):
    assert create(url, "licensed", license="mit").status_code == 200
    assert raw(url, "hubjs/licensed", "README.md").text == "---\nlicense: mit\n---\n"
    info = HfApi(token="js-token").model_info("hubjs/licensed")
    assert info.card_data is not None and info.card_data.get("license") == "mit"


def branch(url: str, repo: str, name: str, **body: object) -> httpx.Response:
    """``createBranch`` as @huggingface/hub sends it (create-branch.ts)."""
    return httpx.post(f"{url}/api/models/{repo}/branch/{name}", headers=AUTH, json=body, timeout=60)


def test_an_empty_branch_holds_no_file_and_no_history(url):
    api = HfApi(token="js-token")
    assert create(url, "empty-branch").status_code == 200
    api.upload_file(path_or_fileobj=b"file content", path_in_repo="file.txt", repo_id="hubjs/empty-branch")
    answer = branch(url, "hubjs/empty-branch", "empty", emptyBranch=True)
    assert answer.status_code == 200, answer.text
    assert api.list_repo_files("hubjs/empty-branch", revision="empty") == []
    assert raw(url, "hubjs/empty-branch", "file.txt", rev="empty").status_code == 404
    assert len(api.list_repo_commits("hubjs/empty-branch", revision="empty")) == 1  # no parent
    assert "file.txt" in api.list_repo_files("hubjs/empty-branch")  # main untouched


def test_overwrite_moves_an_existing_branch_instead_of_a_409(url):
    api = HfApi(token="js-token")
    repo = "hubjs/overwrite"
    assert create(url, "overwrite").status_code == 200
    assert branch(url, repo, "dev").status_code == 200
    api.upload_file(path_or_fileobj=b"later", path_in_repo="later.txt", repo_id=repo)
    assert branch(url, repo, "dev").status_code == 409  # without overwrite: as before
    assert branch(url, repo, "dev", overwrite=True).status_code == 200  # nothing asked: left as it is
    assert "later.txt" not in api.list_repo_files(repo, revision="dev")
    assert branch(url, repo, "dev", overwrite=True, startingPoint="main").status_code == 200
    main, dev = (api.list_repo_commits(repo, revision=r)[0].commit_id for r in ("main", "dev"))
    assert dev == main
    assert branch(url, repo, "dev", overwrite=True, emptyBranch=True).status_code == 200
    assert api.list_repo_files(repo, revision="dev") == []
    assert branch(url, repo, "fresh", overwrite=True).status_code == 200  # a new one: made from main
    assert "later.txt" in api.list_repo_files(repo, revision="fresh")


def test_whoami_answers_the_full_name_and_organisations_the_token_file_says(url):
    me = HfApi(token="js-token").whoami()
    assert (me["name"], me["fullname"]) == ("hubjs", "Hub JS Bot")
    assert [(o["name"], o["type"]) for o in me["orgs"]] == [("acme", "org"), ("labs", "org")]
    plain = HfApi(token="plain-token").whoami()
    assert (plain["fullname"], plain["orgs"]) == ("plain", [])


def test_whoami_answers_each_organisations_full_name_the_token_file_gives_else_its_name(url):
    orgs = HfApi(token="js-token").whoami()["orgs"]
    assert [(o["name"], o["fullname"]) for o in orgs] == [("acme", "Acme Corp, Inc."), ("labs", "labs")]


def test_a_missing_repository_is_401_without_a_token_and_404_with_one(url):
    """checkRepoAccess: the Hub answers a request that sends no token 401 for a repository it
    does not show (missing, or private: one answer, so neither leaks), an authenticated one 404;
    both say ``RepoNotFound``, which huggingface_hub reads as RepositoryNotFoundError."""
    anonymous = httpx.get(f"{url}/api/models/i--d/dont")
    assert (anonymous.status_code, anonymous.headers.get("X-Error-Code")) == (401, "RepoNotFound")
    signed = httpx.get(f"{url}/api/models/i--d/dont", headers=AUTH)
    assert (signed.status_code, signed.headers.get("X-Error-Code")) == (404, "RepoNotFound")
    assert not HfApi(token=False).repo_exists("nobody/dont")
    assert create(url, "public-one").status_code == 200
    assert httpx.get(f"{url}/api/models/hubjs/public-one").status_code == 200  # the anonymous line reads it


def batch(url: str, repo: str, data: bytes, transfers: list[str]) -> dict:
    body = {"operation": "upload", "transfers": transfers, "hash_algo": "sha_256", "ref": {"name": "main"},
            "objects": [{"oid": hashlib.sha256(data).hexdigest(), "size": len(data)}]}
    answer = httpx.post(f"{url}/{repo}.git/info/lfs/objects/batch", headers=LFS, content=json.dumps(body),
                        timeout=60)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_a_client_offering_xet_is_answered_xet_and_its_upload_commits(url, tmp_path):
    """commit.ts: ``transfers: ["basic", "multipart", "xet"]``; on ``"transfer": "xet"`` each object
    to upload names the token refresh route (``href``) and the CAS URL and token (headers); the
    client sends xorbs and a shard there, then commits the file by its SHA-256."""
    hf_xet = pytest.importorskip("hf_xet")
    repo = "hubjs/over-xet"
    assert create(url, "over-xet").status_code == 200
    data = bytes(range(256)) * 2048  # 512 KiB: several chunks
    answer = batch(url, repo, data, ["basic", "multipart", "xet"])
    assert answer["transfer"] == "xet"
    upload = answer["objects"][0]["actions"]["upload"]
    assert upload["href"] == f"{url}/api/models/{repo}/xet-write-token/main"
    header = upload["header"]
    assert header["X-Xet-Cas-Url"] == f"{url}/xet-write/{repo}" and header["X-Xet-Access-Token"]
    assert int(header["X-Xet-Token-Expiration"]) > 0
    refreshed = httpx.get(upload["href"], headers=AUTH).json()  # what the client asks once it expires
    assert refreshed["casUrl"] == header["X-Xet-Cas-Url"]
    session = hf_xet.XetSession()
    with session.new_upload_commit(token_refresh_url=upload["href"], token_refresh_headers=AUTH) as commit:
        handle = commit.start_upload_bytes(data, sha256=hf_xet.COMPUTE_SHA256)
    sha = handle.result().xet_info.sha256
    assert sha == hashlib.sha256(data).hexdigest()
    lines = [{"key": "header", "value": {"summary": "over xet"}},
             {"key": "lfsFile", "value": {"path": "weights.bin", "algo": "sha256", "oid": sha, "size": len(data)}}]
    committed = httpx.post(f"{url}/api/models/{repo}/commit/main", timeout=60,
                           headers={**AUTH, "Content-Type": "application/x-ndjson"},
                           content="\n".join(json.dumps(line) for line in lines))
    assert committed.status_code == 200, committed.text
    got = huggingface_hub.hf_hub_download(repo, "weights.bin", token="js-token", cache_dir=tmp_path / "c")
    assert Path(got).read_bytes() == data
    again = batch(url, repo, data, ["basic", "multipart", "xet"])  # the branch holds it: nothing to send
    assert "actions" not in again["objects"][0]


def test_huggingface_hubs_batch_offers_no_xet_and_is_answered_as_before(url, tmp_path):
    """huggingface_hub's batch (lfs.py: ``["basic", "multipart"]``) gets the LFS answer: its Xet
    path is the xet-write-token route, never the batch; its LFS upload reads back unchanged."""
    repo = "hubjs/over-lfs"
    assert create(url, "over-lfs").status_code == 200
    data = b"lfs bytes " * 5000
    answer = batch(url, repo, data, ["basic", "multipart"])
    assert answer["transfer"] == "basic"
    assert "X-Xet-Cas-Url" not in answer["objects"][0]["actions"]["upload"].get("header", {})
    HfApi(token="js-token").upload_file(path_or_fileobj=data, path_in_repo="weights.bin", repo_id=repo)
    got = huggingface_hub.hf_hub_download(repo, "weights.bin", token="js-token", cache_dir=tmp_path / "c")
    assert Path(got).read_bytes() == data
