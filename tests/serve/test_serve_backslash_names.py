"""A backslash is a character of a file's name, as on the Hub (issue 75): huggingface_hub's own
``TestHfHubDownloadRelativePaths`` uploads ``folder/..\\..\\..\\file`` and the Hub takes it. serve
stores the name as is; everything that writes files from the artifact (``pull``, ``mount``,
serve's own cache of a tar layer) writes it on POSIX as the one file it is, inside its folder,
never a traversal; on a system that reads a backslash as a separator it is refused with one line
(:mod:`ocibridge.core.backslash`, played here by patching its one question). ``..\\x``, which
climbs out from the start, is the Hub's 422.

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
from urllib.parse import quote

import httpx
import pytest
from huggingface_hub import CommitOperationAdd, HfApi, hf_hub_download
from huggingface_hub.errors import HfHubHTTPError
from mounting import Mount, mount_env
from serving import own_registry_and_serve
from support.registry import RegistryProcess

from ocibridge.core import backslash
from ocibridge.core.fsutil import safe_relpath
from ocibridge.errors import UnsafePath
from ocibridge.hubserver.repo.commits import BadCommit, EscapingPath, clean_path
from ocibridge.kinds.hf.commitdownload import bad_path
from ocibridge.model.paths import ArtifactPaths
from ocibridge.oci.mediatypes import OCI_MANIFEST
from ocibridge.oci.models import Descriptor, Manifest

ROOT = Path(__file__).resolve().parents[2]
TOKENS = "writer-token write * ci-bot\n"
CLIMBING = "folder/..\\..\\..\\file"  # the name huggingface_hub's suite uploads
PLAIN = "a\\b.txt"  # one huggingface_hub itself downloads too
CONTENT = {CLIMBING: b"content", PLAIN: b"plain"}

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


# -- the path decision ---------------------------------------------------------------------------
def test_on_posix_a_backslash_is_a_character_of_one_name():
    assert safe_relpath(CLIMBING) == CLIMBING
    paths = ArtifactPaths(_manifest(CLIMBING))
    assert [f.path for f in paths.raw] == [CLIMBING]
    assert paths.entry("folder/..\\..\\x") == "folder/..\\..\\x"  # a tar entry alike
    for absolute in ("\\x", "C:\\x", "C:x"):  # absolute on Windows: refused everywhere
        with pytest.raises(UnsafePath, match="absolute"):
            safe_relpath(absolute)


def test_on_windows_a_name_with_a_backslash_is_refused_with_one_line(monkeypatch):
    monkeypatch.setattr(backslash, "backslash_separates", lambda: True)
    with pytest.raises(UnsafePath, match="holds a backslash, a character of the name but a folder separator "
                                         "on this system") as refused:
        ArtifactPaths(_manifest(CLIMBING))
    assert "\n" not in str(refused.value)
    with pytest.raises(UnsafePath, match="holds a backslash"):
        ArtifactPaths(_manifest("x.bin")).entry("folder/..\\x")  # a tar entry alike
    assert safe_relpath("folder/x") == "folder/x"  # no backslash: nothing changes
    assert clean_path(CLIMBING) == CLIMBING  # serve stores the name whatever it runs on
    assert bad_path(PLAIN) == "holds a backslash, a folder separator on this system"  # hub sync


def test_the_hubs_refusals_and_hub_sync():
    for climbing in ("..\\ddd", "..", ".\\..\\x"):
        with pytest.raises(EscapingPath):  # the Hub's 422
            clean_path(climbing)
    with pytest.raises(BadCommit, match="absolute"):
        clean_path("\\x")
    assert bad_path(PLAIN) is None  # hub sync takes what huggingface_hub downloads
    assert "huggingface_hub will not download it" in (bad_path(CLIMBING) or "")


def _manifest(*names: str) -> Manifest:
    layers = [Descriptor(mediaType="application/vnd.cnai.model.doc.v1.raw", digest="sha256:" + "a" * 64, size=1,
                         annotations={"org.opencontainers.image.title": name}) for name in names]
    config = Descriptor(mediaType="application/vnd.cnai.model.config.v1+json", digest="sha256:" + "b" * 64, size=1)
    return Manifest(mediaType=OCI_MANIFEST, artifactType="application/vnd.cnai.model.manifest.v1+json",
                    config=config, layers=layers)


# -- through serve, pull and mount -----------------------------------------------------------------
@dataclass
class Served:
    url: str
    registry: RegistryProcess
    root: Path

    @property
    def api(self) -> HfApi:
        return HfApi(endpoint=self.url, token="writer-token")

    def env(self) -> dict[str, str]:
        return {**os.environ, "PYTHONPATH": str(ROOT), "OCIBRIDGE_CACHE": str(self.root / "cli-cache")}

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "ocibridge", *args], env=self.env(), capture_output=True,
                              text=True, timeout=300)

    def resolve(self, repo: str, name: str) -> httpx.Response:
        return httpx.get(f"{self.url}/{repo}/resolve/main/{quote(name)}",
                         headers={"Authorization": "Bearer writer-token"})


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("backslash")
    with own_registry_and_serve(root, TOKENS, lambda host: [f"{host}/models"], HF_HUB_DISABLE_XET="1") as (url, reg):
        yield Served(url, reg, root)


@pytest.fixture(autouse=True)
def no_xet(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))


def _tree(root: Path) -> set[Path]:
    return {p for p in root.rglob("*")}


def test_upload_list_resolve_pull_and_mount(served, tmp_path):
    api = served.api
    repo = api.create_repo("acme/bs").repo_id
    api.upload_file(path_or_fileobj=CONTENT[CLIMBING], path_in_repo=CLIMBING, repo_id=repo)  # as the suite does
    api.upload_file(path_or_fileobj=CONTENT[PLAIN], path_in_repo=PLAIN, repo_id=repo)
    with pytest.raises(HfHubHTTPError) as relative:
        api.upload_file(path_or_fileobj=b"x", path_in_repo="..\\ddd", repo_id=repo)
    assert relative.value.response.status_code == 422

    assert api.list_repo_files(repo) == [".gitattributes", PLAIN, CLIMBING]
    assert [e.path for e in api.list_repo_tree(repo, path_in_repo="folder")] == [CLIMBING]
    assert [e.path for e in api.get_paths_info(repo, [CLIMBING])] == [CLIMBING]
    for name, content in CONTENT.items():
        answer = served.resolve(repo, name)
        assert answer.status_code == 200 and answer.content == content
    with pytest.raises(ValueError, match="Invalid filename"):  # the client's own refusal, as the suite expects
        hf_hub_download(repo, CLIMBING, endpoint=served.url, token="writer-token", cache_dir=tmp_path / "dl")
    downloaded = hf_hub_download(repo, PLAIN, endpoint=served.url, token="writer-token", cache_dir=tmp_path / "dl")
    assert Path(downloaded).name == PLAIN and Path(downloaded).read_bytes() == CONTENT[PLAIN]

    # pull: each name is one file inside the target, nothing written beside it
    ref = f"{served.registry.host}/models/{repo}"
    work = tmp_path / "work"
    work.mkdir()
    before = _tree(tmp_path)
    pulled = served.cli("pull", ref, str(work / "out"), "--json")
    assert pulled.returncode == 0, pulled.stderr
    assert sorted(json.loads(pulled.stdout)["files"]) == sorted([".gitattributes", *CONTENT])
    assert (work / "out" / "folder" / "..\\..\\..\\file").read_bytes() == CONTENT[CLIMBING]
    assert (work / "out" / PLAIN).read_bytes() == CONTENT[PLAIN]
    assert sorted(p.name for p in (work / "out" / "folder").iterdir()) == ["..\\..\\..\\file"]
    assert all(work / "out" in p.parents for p in _tree(tmp_path) - before - {work / "out"})

    # mount: the same names, as files of the mount
    where = tmp_path / "mounted"
    with Mount(ref, where, mount_env(served.root / "mount"), served.root / "mount.log"):
        assert (where / "folder" / "..\\..\\..\\file").read_bytes() == CONTENT[CLIMBING]
        assert sorted(os.listdir(where / "folder")) == ["..\\..\\..\\file"]
        assert (where / PLAIN).read_bytes() == CONTENT[PLAIN]


def test_in_a_tar_layer_through_serves_cache_and_pull(served, tmp_path):
    """More than 64 small files go into one tar layer (the builder's grouping): serve lists them
    from its commit's record and serves each as a range of the layer (writing no file by its
    name), pull unpacks them, each name one file."""
    api = served.api
    repo = api.create_repo("acme/bs-tar").repo_id
    files = {f"docs/n{i:02}.txt": f"{i}".encode() for i in range(70)}
    files["docs/..\\..\\evil.txt"] = b"inside"
    api.create_commit(repo, operations=[CommitOperationAdd(name, data) for name, data in files.items()],
                      commit_message="many")
    manifest = httpx.get(f"{served.registry.url}/v2/models/{repo}/manifests/latest", headers={"Accept": OCI_MANIFEST})
    assert any("tar" in layer["mediaType"] for layer in manifest.json()["layers"])
    assert "docs/..\\..\\evil.txt" in api.list_repo_files(repo)
    assert served.resolve(repo, "docs/..\\..\\evil.txt").content == b"inside"
    assert not list(served.root.rglob("*evil.txt"))  # serve's cache holds it by its digest, under no name
    out = tmp_path / "deep" / "out"
    out.parent.mkdir()  # pull makes DIR in a directory that exists (core/parentdir.py)
    before = _tree(tmp_path)
    pulled = served.cli("pull", f"{served.registry.host}/models/{repo}", str(out), "--json")
    assert pulled.returncode == 0, pulled.stderr
    assert (out / "docs" / "..\\..\\evil.txt").read_bytes() == b"inside"
    assert not (tmp_path / "evil.txt").exists() and not (tmp_path / "deep" / "evil.txt").exists()
    assert all(out in p.parents or p in (out, out.parent) for p in _tree(tmp_path) - before)
