"""Private means private by content too (issue 85): bytes serve holds are reached by their hash
only by a token that could download them from a repository holding them, by the whole rule
(read prefixes, a private repository's private scope, a gated one's authorized list:
``access.Gate.may_take``), tried as an attacker would with huggingface_hub and raw httpx
against serve over the real registry and over an OCI layout.

- Over the registry: mallory, a writer of ``mallory/``, learns a gated file's oid from its tree
  (every reader sees it) and guesses a private one's; the LFS batch of her own repository answers
  both as a random oid (an upload asked), a commit naming them without the bytes is refused, and
  her repository serves nothing of theirs. A writer the gate does list (its write prefix covers
  the gated repository) still takes the file without sending it.
- Over a layout (one index for every repository): a digest as revision answers only through a
  repository one of whose names is that manifest, so a private or gated repository's digest
  read through another repository, or through one that does not exist, is not found, and no
  branch of mallory's can be made from it.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import huggingface_hub
import pytest
from huggingface_hub import HfApi
from huggingface_hub.errors import HfHubHTTPError
from test_serve_hostile import ServeProcess, serve_process

from ocibridge.stores.layout import LayoutStore

#: huggingface_hub's own LFS upload passes bytes as data= to httpx, which warns (not ours)
pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning")

TOKENS = ("owner-token user=owner write=vault/",  # owns vault/gated and vault/private
          "mallory-token user=mallory write=mallory/",  # the attacker: reads every public repository
          "keeper-token user=keeper write=keeper/,vault/gated",  # on vault/gated's authorized list
          "reader-token user=reader")
GATED = b"vault/gated's weights " + os.urandom(48 * 1024)
PRIVATE = b"vault/private's weights " + os.urandom(48 * 1024)


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def oid_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def batch(url: str, repo: str, token: str, data: bytes) -> dict[str, Any]:
    """The LFS batch's answer for ``data`` in ``repo`` (the one object)."""
    body = {"operation": "upload", "transfers": ["basic"], "objects": [{"oid": oid_of(data), "size": len(data)}]}
    answer = httpx.post(f"{url}/{repo}.git/info/lfs/objects/batch", json=body, headers=auth(token), timeout=30)
    assert answer.status_code == 200, answer.text
    return dict(answer.json()["objects"][0])


def commit_unsent(url: str, repo: str, token: str, path: str, data: bytes) -> httpx.Response:
    """A commit naming ``data`` as the lfsFile ``path``, its bytes never sent."""
    body = b"".join(json.dumps(line).encode() + b"\n" for line in (
        {"key": "header", "value": {"summary": "take it"}},
        {"key": "lfsFile", "value": {"path": path, "algo": "sha256", "oid": oid_of(data), "size": len(data)}}))
    return httpx.post(f"{url}/api/models/{repo}/commit/main", content=body, headers=auth(token), timeout=60)


def vault(url: str) -> HfApi:
    """vault/gated (gated, ``weights.bin``) and vault/private (private, ``secret.bin``), as their
    owner makes them through huggingface_hub."""
    owner = HfApi(endpoint=url, token="owner-token")
    with pytest.MonkeyPatch.context() as patch:  # over LFS, as every upload of this module
        patch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)
        made(owner)
    return owner


def made(owner: HfApi) -> None:
    owner.create_repo("vault/gated")
    owner.upload_file(path_or_fileobj=GATED, path_in_repo="weights.bin", repo_id="vault/gated")
    owner.update_repo_settings("vault/gated", gated="auto")
    owner.create_repo("vault/private", private=True)
    owner.upload_file(path_or_fileobj=PRIVATE, path_in_repo="secret.bin", repo_id="vault/private")


@pytest.fixture(autouse=True)
def lfs_only(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)


@pytest.fixture(scope="module")
def over_registry(registry: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServeProcess, str]]:
    """serve as a process (the blob homes it learns are its own) over a fresh prefix of the
    registry, writing; (it, the prefix)."""
    root = tmp_path_factory.mktemp("p85-registry")
    prefix = f"{registry.host}/p85/{uuid.uuid4().hex[:8]}"
    with serve_process(root, prefix, "--token-file", tokens_in(root)) as (served, log):
        vault(served.url)
        yield served, prefix
    assert not [line for line in log if "Traceback" in line], log


@pytest.fixture(scope="module")
def over_layout(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServeProcess, Path]]:
    """serve as a process over an OCI layout of its own, writing; (it, the layout)."""
    root = tmp_path_factory.mktemp("p85-layout")
    LayoutStore(root / "lay", create=True)
    with serve_process(root, f"oci:{root / 'lay'}", "--token-file", tokens_in(root)) as (served, log):
        vault(served.url)
        yield served, root / "lay"
    assert not [line for line in log if "Traceback" in line], log


def tokens_in(root: Path) -> str:
    (root / "tokens").write_text("\n".join(TOKENS) + "\n")
    return str(root / "tokens")


def test_a_writer_gets_no_gated_or_private_bytes_by_naming_their_oids(over_registry):
    served, _ = over_registry
    url = served.url
    mallory = HfApi(endpoint=url, token="mallory-token")
    # the premise: the gated file's oid is in its tree, which mallory reads; its bytes are not hers
    tree = {f.path: f for f in mallory.list_repo_tree("vault/gated")}
    assert tree["weights.bin"].lfs is not None and tree["weights.bin"].lfs.sha256 == oid_of(GATED)
    assert httpx.get(f"{url}/vault/gated/resolve/main/weights.bin", headers=auth("mallory-token")).status_code == 403
    assert httpx.get(f"{url}/vault/private/resolve/main/secret.bin", headers=auth("mallory-token")).status_code == 404

    mallory.create_repo("mallory/loot")
    random = batch(url, "mallory/loot", "mallory-token", os.urandom(len(GATED)))
    for data, name in ((GATED, "g.bin"), (PRIVATE, "p.bin")):
        asked = batch(url, "mallory/loot", "mallory-token", data)
        # answered as an oid serve never saw: an upload asked, nothing said of who holds it
        assert "actions" in asked and set(asked) == set(random), asked
        assert set(asked["actions"]) == set(random["actions"])
        taken = commit_unsent(url, "mallory/loot", "mallory-token", name, data)
        assert taken.status_code == 422 and "no upload" in taken.json()["error"], taken.text
        for token in ("mallory-token", "reader-token"):
            got = httpx.get(f"{url}/mallory/loot/resolve/main/{name}", headers=auth(token))
            assert got.status_code == 404 and data not in got.content
    assert [f.path for f in mallory.list_repo_tree("mallory/loot")] == [".gitattributes"]

    # the rule, not a blanket refusal: keeper, on the gate's list, takes the file without sending it
    keeper = HfApi(endpoint=url, token="keeper-token")
    keeper.create_repo("keeper/copy")
    assert "actions" not in batch(url, "keeper/copy", "keeper-token", GATED)
    assert commit_unsent(url, "keeper/copy", "keeper-token", "w.bin", GATED).status_code == 200
    got = httpx.get(f"{url}/keeper/copy/resolve/main/w.bin", headers=auth("reader-token"))
    assert got.status_code == 200 and got.content == GATED
    # and the owner, whose private scope covers vault/, from its private repository
    HfApi(endpoint=url, token="owner-token").create_repo("vault/again")
    assert "actions" not in batch(url, "vault/again", "owner-token", PRIVATE)
    assert commit_unsent(url, "vault/again", "owner-token", "s.bin", PRIVATE).status_code == 200


def test_a_digest_answers_only_through_a_repository_it_is_a_revision_of(over_layout, over_registry, registry):
    served, lay = over_layout
    url = served.url
    private = LayoutStore(lay).resolve("vault/private:latest").digest
    gated = LayoutStore(lay).resolve("vault/gated:latest").digest
    mallory = HfApi(endpoint=url, token="mallory-token")
    mallory.create_repo("mallory/x")
    mallory.upload_file(path_or_fileobj=b"mine\n", path_in_repo="mine.txt", repo_id="mallory/x")
    for repo in ("mallory/x", "nobody/here"):
        for digest, path in ((private, "secret.bin"), (gated, "weights.bin")):
            for token in ("mallory-token", "reader-token"):
                got = httpx.get(f"{url}/{repo}/resolve/{digest}/{path}", headers=auth(token))
                assert got.status_code == 404 and got.headers["x-error-code"] in ("RepoNotFound", "RevisionNotFound")
            xet = httpx.get(f"{url}/api/models/{repo}/xet-read-token/{digest}", headers=auth("mallory-token"))
            assert xet.status_code == 404, xet.text
    with pytest.raises(HfHubHTTPError) as refused:
        mallory.model_info("mallory/x", revision=private)
    assert refused.value.response.status_code == 404
    with pytest.raises(HfHubHTTPError) as refused:  # no branch of hers is made of the private manifest
        mallory.create_branch("mallory/x", branch="loot", revision=private)
    assert refused.value.response.status_code == 404
    assert [b.name for b in mallory.list_repo_refs("mallory/x").branches] == ["main"]
    # through its own repository, to who may read it, a digest is a revision as before
    got = httpx.get(f"{url}/vault/private/resolve/{private}/secret.bin", headers=auth("owner-token"))
    assert got.status_code == 200 and got.content == PRIVATE
    own = LayoutStore(lay).resolve("mallory/x:latest").digest
    assert httpx.get(f"{url}/mallory/x/resolve/{own}/mine.txt", headers=auth("reader-token")).content == b"mine\n"

    # a registry keeps each repository's manifests apart: the same holds there
    registry_served, prefix = over_registry
    path = prefix.partition("/")[2]
    head = httpx.head(f"{registry.url}/v2/{path}/vault/private/manifests/latest",
                      headers={"Accept": "application/vnd.oci.image.manifest.v1+json"})
    digest = head.headers["docker-content-digest"]
    for repo in ("mallory/loot", "nobody/here"):
        got = httpx.get(f"{registry_served.url}/{repo}/resolve/{digest}/secret.bin", headers=auth("mallory-token"))
        assert got.status_code == 404 and PRIVATE not in got.content
