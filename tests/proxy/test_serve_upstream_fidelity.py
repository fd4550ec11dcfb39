"""serve as a proxy answers a fetched commit as the upstream answers it (docs/serve.md, "A proxy of
an upstream Hub"), field by field, with huggingface_hub as the client, while the commit is fetched
and once it landed: model_info(files_metadata=True), list_repo_tree(recursive=True, expand=True),
get_paths_info, the revision's own entry of list_repo_commits, get_hf_file_metadata and resolve's
HEAD headers, and what hf_hub_download lays out in the Hub cache. What cannot be equal is left out
here and said in docs/serve.md: a file's ``lastCommit`` names the fetched commit, the proxy's commit
list holds only the commits it fetched, ``xetHash`` is the answering server's (the proxy's own, none
in flight), and model_info's ``ocibridge`` extension names the registry that answers. The upstream
and the proxy: tests/upstream_proxy.py."""

from __future__ import annotations

import datetime
import os
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import huggingface_hub
import pytest
from huggingface_hub import HfApi
from support.faultproxy import hold, status
from upstream_proxy import (
    CLIENT_TOKEN,
    UP_TOKEN,
    Proxied,
    lfs_only,  # noqa: F401 - autouse: every test here over LFS
)

from tests.modelgen import make_bert_model

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

#: fields that are the answering server's, not the commit's (docs/serve.md says why)
THE_SERVERS = {"xet_hash", "xetHash", "ocibridge"}
#: the resolve headers huggingface_hub reads
HEADERS = ("etag", "x-repo-commit", "x-linked-etag", "x-linked-size")
#: a file of each kind: in git (a blob id), in LFS (a sha256), the first commit's .gitattributes
PATHS = ["config.json", "model.safetensors", ".gitattributes", "extra/notes.md"]


def plain(value: Any) -> Any:
    """A huggingface_hub answer as plain data to compare (the answering server's fields left out)."""
    if not isinstance(value, PLAIN):  # ModelInfo, RepoFile, ...: dataclasses, the extra keys among their fields
        value = vars(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items() if k not in THE_SERVERS}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, datetime.datetime):
        return value.isoformat()
    return value


PLAIN = (dict, list, tuple, str, int, float, bool, type(None), datetime.datetime)


def published(proxied: Proxied, repo_id: str, root: Path) -> str:
    """``repo_id`` at the upstream in three commits (its first: .gitattributes; a model; a README
    changed), its head's id."""
    up = HfApi(endpoint=proxied.upstream, token=UP_TOKEN)
    up.create_repo(repo_id)
    up.upload_folder(repo_id=repo_id, folder_path=make_bert_model(root / repo_id.replace("/", "-")))
    return up.upload_file(path_or_fileobj=b"# a card\n", path_in_repo="README.md", repo_id=repo_id,
                          commit_message="A card", commit_description="says what it is").oid


def heads(endpoint: str, token: str, repo_id: str, commit: str) -> dict[str, dict[str, str]]:
    """resolve's HEAD headers huggingface_hub reads, of each file of :data:`PATHS`."""
    found = {}
    for path in PATHS:
        answer = httpx.head(f"{endpoint}/{repo_id}/resolve/{commit}/{path}",
                            headers={"Authorization": f"Bearer {token}"})
        assert answer.status_code == 200, (endpoint, path, answer.status_code)
        found[path] = {k: answer.headers.get(k) for k in HEADERS}
    return found


def metadata(endpoint: str, token: str, repo_id: str, commit: str) -> dict[str, tuple[Any, ...]]:
    """get_hf_file_metadata of each file of :data:`PATHS`: (commit, etag, size)."""
    found = {}
    for path in PATHS:
        url = huggingface_hub.hf_hub_url(repo_id, path, revision=commit, endpoint=endpoint)
        said = huggingface_hub.get_hf_file_metadata(url, token=token)
        found[path] = (said.commit_hash, said.etag, said.size)
    return found


def downloads_alike(proxied: Proxied, repo_id: str, commit: str, paths: list[str], root: Path) -> None:
    """hf_hub_download of each of ``paths`` from the proxy and from the upstream: the same bytes,
    in the Hub cache under the same blob name (the ETag)."""
    for path in paths:
        got = [Path(huggingface_hub.hf_hub_download(repo_id, path, revision=commit, endpoint=endpoint,
                                                    token=token, cache_dir=root / name))
               for endpoint, token, name in ((proxied.proxy, CLIENT_TOKEN, "proxy"),
                                             (proxied.upstream, UP_TOKEN, "up"))]
        assert got[0].read_bytes() == got[1].read_bytes(), path
        blobs = [os.path.relpath(os.path.realpath(got[0]), root / "proxy"),
                 os.path.relpath(os.path.realpath(got[1]), root / "up")]
        assert blobs[0] == blobs[1], path


def tree(api: HfApi, repo_id: str, commit: str) -> list[Any]:
    return plain(list(api.list_repo_tree(repo_id, revision=commit, recursive=True, expand=True)))


def older(upstream: list[dict[str, Any]], commit: str) -> set[str]:
    """The paths of tree or paths-info entries whose last commit the upstream names older than
    ``commit``: the proxy names ``commit`` (it holds no history: docs/serve.md)."""
    return {e["path"] for e in upstream if (e.get("last_commit") or {}).get("oid") != commit}


def but_last_commits(entries: list[dict[str, Any]], paths: set[str]) -> list[dict[str, Any]]:
    """The entries, the last commit of those of ``paths`` left out."""
    return [{k: v for k, v in e.items() if e["path"] not in paths or k not in ("last_commit", "lastCommit")}
            for e in entries]


def test_a_commit_in_flight_is_listed_as_the_upstream_lists_it(proxied: Proxied, tmp_path: Path):
    up, api = HfApi(endpoint=proxied.upstream, token=UP_TOKEN), proxied.api()
    commit = published(proxied, "acme/fidelity-flight", tmp_path)
    release = threading.Event()  # the weights held at the upstream until the checks are done (then cut: resumed)
    proxied.counted.add("GET", r"/acme/fidelity-flight/resolve/.*/model\.safetensors", hold(release))
    try:
        info = api.model_info("acme/fidelity-flight", revision=commit, files_metadata=True)  # starts the fetch
        assert proxied.tags("proxy/acme/fidelity-flight") == []  # still in flight: what follows is too
        assert plain(info) == plain(up.model_info("acme/fidelity-flight", revision=commit, files_metadata=True))
        assert tree(api, "acme/fidelity-flight", commit) == tree(up, "acme/fidelity-flight", commit)
        assert heads(proxied.proxy, CLIENT_TOKEN, "acme/fidelity-flight", commit) == \
            heads(proxied.upstream, UP_TOKEN, "acme/fidelity-flight", commit)
        assert metadata(proxied.proxy, CLIENT_TOKEN, "acme/fidelity-flight", commit) == \
            metadata(proxied.upstream, UP_TOKEN, "acme/fidelity-flight", commit)
        downloads_alike(proxied, "acme/fidelity-flight", commit, ["config.json", ".gitattributes"], tmp_path)
        assert proxied.tags("proxy/acme/fidelity-flight") == []
    finally:
        release.set()
    proxied.landed("proxy/acme/fidelity-flight", commit)


def test_a_landed_commit_is_answered_as_the_upstream_answers_it(proxied: Proxied, tmp_path: Path):
    up, api = HfApi(endpoint=proxied.upstream, token=UP_TOKEN), proxied.api()
    commit = published(proxied, "acme/fidelity", tmp_path)
    api.model_info("acme/fidelity", revision=commit)
    proxied.landed("proxy/acme/fidelity", commit)
    time.sleep(0.2)  # the fetch's own follow-ups (its tags) done: every answer below is the registry's
    asked = len(proxied.counted.requests)

    def info(hub: HfApi) -> Any:
        return plain(hub.model_info("acme/fidelity", revision=commit, files_metadata=True))

    said = info(up)
    assert said["last_modified"] and said["created_at"]
    assert info(api) == said
    upstream_tree = tree(up, "acme/fidelity", commit)
    assert ".gitattributes" in older(upstream_tree, commit) and "README.md" not in older(upstream_tree, commit)
    assert but_last_commits(tree(api, "acme/fidelity", commit), older(upstream_tree, commit)) == \
        but_last_commits(upstream_tree, older(upstream_tree, commit))
    paths = PATHS + ["extra", "README.md"]
    upstream_paths = plain(up.get_paths_info("acme/fidelity", paths, revision=commit, expand=True))
    kept_older = older(upstream_paths, commit)
    assert but_last_commits(plain(api.get_paths_info("acme/fidelity", paths, revision=commit, expand=True)),
                            kept_older) == but_last_commits(upstream_paths, kept_older)
    # the revision's own commit, as the upstream lists it (the proxy holds no older one)
    assert plain(api.list_repo_commits("acme/fidelity", revision=commit))[0] == \
        plain(up.list_repo_commits("acme/fidelity", revision=commit))[0]
    assert heads(proxied.proxy, CLIENT_TOKEN, "acme/fidelity", commit) == \
        heads(proxied.upstream, UP_TOKEN, "acme/fidelity", commit)
    assert metadata(proxied.proxy, CLIENT_TOKEN, "acme/fidelity", commit) == \
        metadata(proxied.upstream, UP_TOKEN, "acme/fidelity", commit)
    downloads_alike(proxied, "acme/fidelity", commit, PATHS, tmp_path)
    assert proxied.counted.requests[asked:] == []  # all answered from the registry


def test_a_commit_whose_facts_the_upstream_cannot_say_now_does_not_land_until_it_can(proxied: Proxied,
                                                                                     tmp_path: Path):
    """The facts are part of the manifest (its digest): one the upstream failed to say (a 5xx) is
    never left out, the fetch fails and the next request's lands with it (the files it had fetched
    kept: not asked again)."""
    up, api = HfApi(endpoint=proxied.upstream, token=UP_TOKEN), proxied.api()
    commit = published(proxied, "acme/fidelity-later", tmp_path)
    proxied.counted.add("GET", rf"/api/models/acme/fidelity-later/commits/{commit}", status(502))
    api.model_info("acme/fidelity-later", revision=commit)  # in flight: the upstream's answer
    assert proxied.ended("acme/fidelity-later", 1) == ["failed"]
    assert proxied.tags("proxy/acme/fidelity-later") == []
    api.model_info("acme/fidelity-later", revision=commit)  # fetched again: its files kept, its facts asked
    proxied.landed("proxy/acme/fidelity-later", commit)
    assert len(proxied.counted.requests_matching("GET", r"/acme/fidelity-later/resolve/.*/model\.safetensors")) == 1
    assert plain(api.list_repo_commits("acme/fidelity-later", revision=commit))[0] == \
        plain(up.list_repo_commits("acme/fidelity-later", revision=commit))[0]
