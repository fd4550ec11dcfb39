"""A writer gets only its own bytes, and one writer cannot starve the rest (issue 62 items 1,
3, 6 and the red team's ``xet-write-token`` name), tried as an attacker would: serve as a
process on loopback over the real registry, raw httpx for the crafted requests, huggingface_hub
for the honest client.

- 1: a writer of ``acme/`` naming only the SHA-256 of a file of ``secret/vault`` (which the
  policy serve enforces rejects) is asked for the bytes as for a random SHA-256, its commit of
  that ``lfsFile`` is refused, and nothing of secret's is served from acme/.
- 3: multipart parts are one upload's of one repository: a bogus completion on one
  repository's URL leaves another's upload of the same file whole, and two honest uploads of
  one file to two repositories at once both land.
- 6: one writer staging without committing gets 507 once past its share, while another writer
  still uploads and commits.
- a repo id that is not one (``acme%2F..%2Fsecret/vault``) is refused by its name on every write route.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from huggingface_hub import HfApi
from serving import point_hub_at
from test_serve_hostile import ServeProcess, serve_process

from ocibridge.cli import main
from ocibridge.hubserver.access import parse_line

pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning")

MIB = 1024 * 1024
ALICE = "alice write acme/ alice"  # the attacker: writes acme/ only
LINES = (ALICE, "owner write secret/ owner", "bob write beta/ bob", "reader")
PARTS = ("--lfs-multipart-min", "2M", "--lfs-part-size", "1M")


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def oid_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def batch(url: str, repo: str, token: str, data: bytes, *, parts: bool = False) -> httpx.Response:
    """The LFS batch answer for ``data`` in ``repo`` (``parts``: multipart offered, as huggingface_hub does)."""
    body = {"operation": "upload", "transfers": ["basic", "multipart"] if parts else ["basic"],
            "objects": [{"oid": oid_of(data), "size": len(data)}]}
    return httpx.post(f"{url}/{repo}.git/info/lfs/objects/batch", json=body, headers=auth(token), timeout=30)


def commit(url: str, repo: str, token: str, path: str, data: bytes) -> httpx.Response:
    """A commit naming ``data`` as the lfsFile ``path`` (whether or not it was uploaded)."""
    body = b"".join(json.dumps(line).encode() + b"\n" for line in (
        {"key": "header", "value": {"summary": "take it"}},
        {"key": "lfsFile", "value": {"path": path, "algo": "sha256", "oid": oid_of(data), "size": len(data)}}))
    return httpx.post(f"{url}/api/models/{repo}/commit/main", content=body, headers=auth(token), timeout=60)


def create(url: str, repo: str, token: str) -> None:
    org, name = repo.split("/")
    made = httpx.post(f"{url}/api/repos/create", json={"name": name, "organization": org}, headers=auth(token))
    assert made.status_code == 200, made.text


def honest_api(monkeypatch: pytest.MonkeyPatch, url: str, hub: Path, token: str) -> HfApi:
    """huggingface_hub as ``HF_HUB_DISABLE_XET=1`` runs it, against serve."""
    point_hub_at(monkeypatch, url, hub)
    return HfApi(endpoint=url, token=token)


#: the registry prefix each serve of this module serves (by its URL)
PREFIXES: dict[str, str] = {}


@pytest.fixture(scope="module")
def served(registry: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    """serve over a fresh prefix of the registry, with a policy rejecting its secret/vault, the
    tokens of :data:`LINES`, and files from 2 MiB offered in 1 MiB parts."""
    root = tmp_path_factory.mktemp("writer-bounds")
    prefix = f"{registry.host}/p62/{uuid.uuid4().hex[:8]}"
    policy = root / "policy.json"
    policy.write_text(json.dumps({"default": [{"type": "insecureAcceptAnything"}],
                                  "transports": {"docker": {f"{prefix}/secret/vault": [{"type": "reject"}]}}}))
    (root / "tokens").write_text("\n".join(LINES) + "\n")
    with serve_process(root, prefix, "--policy", str(policy), "--token-file", str(root / "tokens"),
                       *PARTS) as (process, log):
        PREFIXES[process.url] = prefix
        yield process
    assert not [line for line in log if "Traceback" in line], log


# -- 1: only bytes the writer could read are mounted ----------------------------------------------
def test_a_file_the_policy_refuses_is_neither_offered_nor_committed_by_its_hash(served, monkeypatch, tmp_path):
    url = served.url
    secret = b"secret/vault's weights " + os.urandom(64 * 1024)
    # its owner pushes it (serve builds no commit on a head its policy refuses to serve)
    (tmp_path / "vault").mkdir()
    (tmp_path / "vault" / "weights.bin").write_bytes(secret)
    assert main(["push", str(tmp_path / "vault"), f"{PREFIXES[url]}/secret/vault:latest", "-q"]) == 0
    refused = httpx.get(f"{url}/secret/vault/resolve/main/weights.bin", headers=auth("reader"))
    assert refused.status_code == 403  # the policy: nobody reads it

    create(url, "acme/x", "alice")
    held, random = batch(url, "acme/x", "alice", secret), batch(url, "acme/x", "alice", os.urandom(len(secret)))
    assert held.status_code == random.status_code == 200
    asked, asked_random = held.json()["objects"][0], random.json()["objects"][0]
    # no existence oracle: the refused file's oid is answered as a random one (an upload action)
    assert "actions" in asked and "actions" in asked_random, asked
    assert set(asked) == set(asked_random) and set(asked["actions"]) == set(asked_random["actions"])
    taken = commit(url, "acme/x", "alice", "loot.bin", secret)
    assert taken.status_code == 422 and "no upload" in taken.json()["error"], taken.text
    loot = httpx.get(f"{url}/acme/x/resolve/main/loot.bin", headers=auth("reader"))
    assert loot.status_code == 404 and loot.content != secret


def test_a_file_the_writer_reads_where_it_is_served_is_mounted_not_uploaded(served, monkeypatch, tmp_path):
    """The other side of the rule: a file of acme/src (alice reads it, the policy serves it) is
    hers to name in acme/y without sending it again; one of beta/pub is hers exactly when the
    access module says her token reads beta/pub."""
    url = served.url
    mine, theirs = b"acme's own file " + os.urandom(32 * 1024), b"beta's public file " + os.urandom(32 * 1024)
    for repo, token, data in (("acme/src", "alice", mine), ("beta/pub", "bob", theirs)):
        create(url, repo, token)
        honest_api(monkeypatch, url, tmp_path / "hub", token).upload_file(
            path_or_fileobj=data, path_in_repo="w.bin", repo_id=repo)
    create(url, "acme/y", "alice")
    assert "actions" not in batch(url, "acme/y", "alice", mine).json()["objects"][0]
    assert commit(url, "acme/y", "alice", "w.bin", mine).status_code == 200
    got = httpx.get(f"{url}/acme/y/resolve/main/w.bin", headers=auth("reader"))
    assert got.status_code == 200 and got.content == mine

    reads = parse_line(ALICE).may_read("beta/pub")  # the access module's answer, whatever its scopes
    assert ("actions" not in batch(url, "acme/y", "alice", theirs).json()["objects"][0]) == reads
    assert (commit(url, "acme/y", "alice", "theirs.bin", theirs).status_code == 200) == reads


# -- 3: parts are one upload's of one repository -------------------------------------------------
def put_parts(upload: dict[str, Any], data: bytes) -> list[dict[str, Any]]:
    """Every part PUT at its URL; the completion's parts (number and ETag)."""
    chunk = int(upload["header"]["chunk_size"])
    done = []
    for n in range(1, -(-len(data) // chunk) + 1):
        answer = httpx.put(upload["header"][f"{n:05d}"], content=data[(n - 1) * chunk:n * chunk], timeout=60)
        assert answer.status_code == 200, answer.text
        done.append({"partNumber": n, "etag": answer.headers["etag"]})
    return done


def test_a_bogus_completion_on_one_repository_leaves_anothers_upload_of_the_file_whole(served):
    url = served.url
    data = os.urandom(3 * MIB)
    for repo, token in (("acme/parts", "alice"), ("beta/parts", "bob")):
        create(url, repo, token)
    theirs = batch(url, "beta/parts", "bob", data, parts=True).json()["objects"][0]["actions"]["upload"]
    mine = batch(url, "acme/parts", "alice", data, parts=True).json()["objects"][0]["actions"]["upload"]
    parts = put_parts(theirs, data)  # bob's parts all in
    # alice, who knows the file's hash, completes her own upload with made-up parts
    bogus = {"oid": oid_of(data), "parts": [{"partNumber": n, "etag": "0" * 64} for n in (1, 2, 3)]}
    assert httpx.post(mine["href"], json=bogus).status_code == 400
    done = httpx.post(theirs["href"], json={"oid": oid_of(data), "parts": parts}, timeout=60)
    assert done.status_code == 200, done.text
    assert commit(url, "beta/parts", "bob", "w.bin", data).status_code == 200
    got = httpx.get(f"{url}/beta/parts/resolve/main/w.bin", headers=auth("reader"), timeout=60)
    assert got.content == data


def test_two_honest_uploads_of_one_file_to_two_repositories_both_land(served, monkeypatch, tmp_path):
    url = served.url
    data = os.urandom(3 * MIB)  # above --lfs-multipart-min: 3 parts of 1 MiB
    for repo, token in (("acme/twin", "alice"), ("beta/twin", "bob")):
        create(url, repo, token)
    # raw, in the order that interleaves them: both batches, all parts of each, then both completions
    uploads = [batch(url, repo, token, data, parts=True).json()["objects"][0]["actions"]["upload"]
               for repo, token in (("acme/twin", "alice"), ("beta/twin", "bob"))]
    parts = [put_parts(upload, data) for upload in uploads]
    for upload, named in zip(uploads, parts, strict=True):
        answer = httpx.post(upload["href"], json={"oid": oid_of(data), "parts": named}, timeout=60)
        assert answer.status_code == 200, answer.text
    # and huggingface_hub's own multipart upload, both at once in two threads
    point_hub_at(monkeypatch, url, tmp_path / "hub")
    again = os.urandom(3 * MIB)
    failures: list[BaseException] = []

    def upload(repo: str, token: str) -> None:
        try:
            HfApi(endpoint=url, token=token).upload_file(path_or_fileobj=again, path_in_repo="again.bin", repo_id=repo)
        except BaseException as e:  # noqa: BLE001 - reported by the test's thread
            failures.append(e)

    threads = [threading.Thread(target=upload, args=pair) for pair in (("acme/twin", "alice"), ("beta/twin", "bob"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not failures, failures
    for repo in ("acme/twin", "beta/twin"):
        for path, want in (("w.bin", None), ("again.bin", again)):
            if want is None:
                assert commit(url, repo, "alice" if repo.startswith("acme") else "bob", path, data).status_code == 200
                want = data
            got = httpx.get(f"{url}/{repo}/resolve/main/{path}", headers=auth("reader"), timeout=60)
            assert got.content == want, (repo, path)


# -- the red team's name ---------------------------------------------------------------------------
@pytest.mark.parametrize("method, path", [
    ("GET", "/api/models/{repo}/xet-write-token/main"),
    ("POST", "/api/models/{repo}/preupload/main"),
    ("POST", "/{repo}.git/info/lfs/objects/batch"),
    ("POST", "/api/models/{repo}/commit/main"),
    ("POST", "/api/models/{repo}/branch/dev"),
])
@pytest.mark.parametrize("repo", ["acme%2F..%2Fsecret/vault", "acme/x%2F..%2F..%2Fsecret", "acme/-x"])
def test_a_repo_id_that_is_none_is_refused_by_name_on_every_write_route(served, method, path, repo):
    body = {"files": [], "objects": [], "operation": "upload"} if method == "POST" else None
    answer = httpx.request(method, served.url + path.format(repo=repo), json=body, headers=auth("alice"))
    assert answer.status_code == 400, (answer.status_code, answer.text)
    assert "accessToken" not in answer.text and "Invalid repo name" in answer.json()["error"]


def test_a_repo_name_that_is_none_is_refused_by_create_repo(served):
    answer = httpx.post(f"{served.url}/api/repos/create", json={"name": "vault", "organization": "acme/../secret"},
                        headers=auth("alice"))
    assert answer.status_code == 400 and "Invalid repo name" in answer.json()["error"]


# -- 6: each writer's share of the staging budget ------------------------------------------------
def test_one_writer_staging_without_committing_leaves_the_others_their_share(registry, tmp_path, monkeypatch):
    """--staging-budget 3M and two write tokens: each has 768 KiB guaranteed, the other half a
    pool. alice stages 1 MiB objects and never commits: she is refused once the pool is gone,
    and bob still uploads and commits his 1 MiB file with huggingface_hub."""
    (tmp_path / "tokens").write_text("alice write acme/ alice\nbob write beta/ bob\n")
    prefix = f"{registry.host}/p62/{uuid.uuid4().hex[:8]}"
    with serve_process(tmp_path, prefix, "--token-file", str(tmp_path / "tokens"),
                       "--staging-budget", "3M") as (process, _):
        url = process.url
        create(url, "acme/hog", "alice")
        objects = [os.urandom(MIB) for _ in range(3)]  # granted while nothing is staged yet
        hrefs = [batch(url, "acme/hog", "alice", data).json()["objects"][0]["actions"]["upload"]["href"]
                 for data in objects]
        statuses = [httpx.put(href, content=data, timeout=60).status_code
                    for href, data in zip(hrefs, objects, strict=True)]
        assert statuses == [200, 200, 507], statuses
        # a batch asking for more is refused too, before any URL is granted
        assert batch(url, "acme/hog", "alice", os.urandom(MIB)).status_code == 507
        create(url, "beta/m", "bob")
        api = honest_api(monkeypatch, url, tmp_path / "hub", "bob")
        mine = os.urandom(MIB)
        api.upload_file(path_or_fileobj=mine, path_in_repo="w.bin", repo_id="beta/m")
        got = httpx.get(f"{url}/beta/m/resolve/main/w.bin", headers=auth("bob"), timeout=60)
        assert got.content == mine
        refused = batch(url, "acme/hog", "alice", os.urandom(MIB))
        assert refused.status_code == 507 and "other writers" in refused.json()["error"], refused.text


def test_a_commit_gives_back_its_own_writers_pin_and_the_share_it_took(tmp_path):
    """Two writers of one repository hold a pin each on one staged file: the commit of one gives
    back that writer's pin, so the file counts in the other's share only (Staging, as serve runs it)."""
    from ocibridge.hubserver.uploads.shares import holdings
    from ocibridge.hubserver.uploads.staging import Staging

    staging = Staging(tmp_path / "staging", budget=4 * MIB)
    staging.writers = lambda: 2
    data = os.urandom(MIB)
    with staging.reserve(len(data), "acme/m", "a" * 16), staging.new_file() as (path, fd):
        os.write(fd, data)
        staging.commit_file(path, oid_of(data))
    for writer in ("a" * 16, "b" * 16):
        assert staging.pin(oid_of(data), "acme/m", writer)
    assert holdings(staging.pins, staging.files, staging.parts) == {"a" * 16: MIB, "b" * 16: MIB}
    staging.release([oid_of(data)], "acme/m", "b" * 16)
    assert holdings(staging.pins, staging.files, staging.parts) == {"a" * 16: MIB}
    # b is within its share (1 MiB guaranteed) again; a, holding 1 MiB, may take the pool's 2 MiB, no more
    assert staging.room_for(MIB, "b" * 16) is None
    assert staging.room_for(2 * MIB, "a" * 16) is None
    assert "other writers" in (staging.room_for(2 * MIB + 1, "a" * 16) or "")
