"""A Hub repository may hold no file (issue 75): deleting its last file, or a commit that deletes
every file, lands as the Hub lands it. The repository then lists nothing, ``model_info`` works,
every resolve is the Hub's EntryNotFound, and a later commit adds files again. The commit's
artifact is a manifest the registry takes: its one layer is image-spec 1.1's empty descriptor
(``ocibridge.oci.empty``), which ``pull`` and ``mount`` turn into an empty directory,
``inspect`` into "0 files" and ``validate`` accepts.

serve and the CLI run as processes over a registry of this module's own, the real
huggingface_hub as the client."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from huggingface_hub import CommitOperationDelete, HfApi, hf_hub_download
from huggingface_hub.errors import EntryNotFoundError
from mounting import Mount, mount_env
from serving import own_registry_and_serve
from support.registry import RegistryProcess

from ocibridge.oci.empty import EMPTY_DATA, EMPTY_DIGEST
from ocibridge.oci.mediatypes import OCI_EMPTY, OCI_MANIFEST

ROOT = Path(__file__).resolve().parents[2]
TOKENS = "writer-token write * ci-bot\n"

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@dataclass
class Served:
    url: str
    registry: RegistryProcess
    root: Path

    @property
    def api(self) -> HfApi:
        return HfApi(endpoint=self.url, token="writer-token")

    def manifest(self, repo: str, commit: str) -> dict[str, object]:
        """The manifest of ``commit`` as the registry holds it (by its commit tag)."""
        answer = httpx.get(f"{self.registry.url}/v2/models/{repo}/manifests/ocibridge-commit-{commit}",
                           headers={"Accept": OCI_MANIFEST})
        answer.raise_for_status()
        return dict(answer.json())

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "OCIBRIDGE_CACHE": str(self.root / "cli-cache")}
        return subprocess.run([sys.executable, "-m", "ocibridge", *args], env=env, capture_output=True, text=True,
                              timeout=300)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("empty-repo")
    with own_registry_and_serve(root, TOKENS, lambda host: [f"{host}/models"], HF_HUB_DISABLE_XET="1") as (url, reg):
        yield Served(url, reg, root)


@pytest.fixture(autouse=True)
def no_xet(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))


def test_deleting_the_last_file_leaves_an_empty_repository_that_takes_files_again(served, tmp_path):
    api = served.api
    repo = api.create_repo("acme/emptied").repo_id
    api.upload_file(path_or_fileobj=b"a", path_in_repo="a.txt", repo_id=repo)
    # one commit that deletes every file
    emptied = api.create_commit(repo, operations=[CommitOperationDelete("a.txt"),
                                                  CommitOperationDelete(".gitattributes")],
                                commit_message="nothing left").oid
    assert api.list_repo_files(repo) == []
    assert list(api.list_repo_tree(repo)) == []
    assert list(api.list_repo_tree(repo, recursive=True)) == []
    info = api.model_info(repo)
    assert info.sha == emptied and info.siblings == []
    assert api.get_paths_info(repo, ["a.txt"]) == []
    with pytest.raises(EntryNotFoundError):
        hf_hub_download(repo, "a.txt", endpoint=served.url, token="writer-token", cache_dir=tmp_path / "dl")
    assert [c.title for c in api.list_repo_commits(repo)][:2] == ["nothing left", "Upload a.txt with huggingface_hub"]

    # the registry holds a manifest whose one layer is the empty descriptor, its own diffId
    manifest = served.manifest(repo, emptied)
    assert manifest["layers"] == [{"mediaType": OCI_EMPTY, "digest": EMPTY_DIGEST, "size": 2, "data": EMPTY_DATA}]
    config = httpx.get(f"{served.registry.url}/v2/models/{repo}/blobs/{manifest['config']['digest']}")  # type: ignore[index]
    assert json.loads(config.content)["modelfs"]["diffIds"] == [EMPTY_DIGEST]

    # pull gives an empty directory, inspect says 0 files, validate takes it
    ref = f"{served.registry.host}/models/{repo}@{emptied}"
    out = tmp_path / "pulled"
    pulled = served.cli("pull", ref, str(out), "--json")
    assert pulled.returncode == 0, pulled.stderr
    assert out.is_dir() and list(out.iterdir()) == []
    assert json.loads(pulled.stdout)["files"] == []
    shown = served.cli("inspect", ref)
    assert shown.returncode == 0, shown.stderr
    assert "Files:         0" in shown.stdout
    checked = served.cli("validate", ref, "--strict")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    where = tmp_path / "mounted"
    with Mount(ref, where, mount_env(served.root / "mount"), served.root / "mount.log"):
        assert os.listdir(where) == []

    # a later commit adds files again
    api.upload_file(path_or_fileobj=b"b", path_in_repo="b.txt", repo_id=repo)
    assert api.list_repo_files(repo) == ["b.txt"]
    assert api.model_info(repo, revision=emptied).siblings == []  # the empty commit stays as it was


def test_delete_file_of_the_only_file(served, tmp_path):
    api = served.api
    repo = api.create_repo("acme/only").repo_id  # its one file: the Hub's first commit's .gitattributes
    assert api.list_repo_files(repo) == [".gitattributes"]
    api.delete_file(".gitattributes", repo)
    assert api.list_repo_files(repo) == []
    with pytest.raises(EntryNotFoundError):
        hf_hub_download(repo, ".gitattributes", endpoint=served.url, token="writer-token", cache_dir=tmp_path / "dl")
    # a second empty repository's commit holds the same one layer (its config names its own repository)
    other = api.create_repo("acme/only-too").repo_id
    api.delete_file(".gitattributes", other)
    first, second = served.manifest(repo, api.model_info(repo).sha), served.manifest(other, api.model_info(other).sha)
    assert first["layers"] == second["layers"]
