"""Mounts from where an earlier run saw a blob (issue 43, part 2), against the real registry:
a push into another repository sends no blob byte once a run pushed or read the blobs
elsewhere on the registry; a refused mount or a stale entry falls back to an upload; the mount
asks the source's pull scope; the on-disk index stays bounded and holds no credentials."""

from __future__ import annotations

import json
import multiprocessing
import os
import sqlite3
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import httpx
from support.hubcache import offline_hub_cache
from support.profiles import NoMount

import ocibridge
from ocibridge.api.copy import TransferOptions
from ocibridge.cli import main
from ocibridge.oci.models import Manifest
from ocibridge.oci.reference import parse_registry_reference
from ocibridge.stores.registry import open_repository
from ocibridge.stores.registry.blobhomes import BLOB_HOMES
from ocibridge.stores.registry.blobindex import HOMES_PER_BLOB, BlobIndex, index_dir
from tests.modelgen import make_model

DIGEST = "sha256:" + "ab" * 32


def _repo(prefix: str) -> str:
    return f"{prefix}/{uuid.uuid4().hex[:8]}"


def _blobs(host: str, repo: str, tag: str = "v1") -> dict[str, int]:
    """Digest → size of the config and layers the manifest at ``host/repo:tag`` names."""
    with open_repository(parse_registry_reference(f"{host}/{repo}:{tag}")) as store:
        _, data = store.read_manifest(tag)
    manifest = Manifest.model_validate_json(data)
    return {d.digest: d.size for d in [manifest.config, *manifest.layers]}


def _blob_bytes_sent(proxy, repo: str) -> int:
    """Request body bytes of every upload request (POST, PATCH, PUT) into ``repo``."""
    return sum(r.request_bytes for r in proxy.requests_matching(None, f"^/v2/{repo}/blobs/uploads/"))


def _fresh_process() -> None:
    """What a new process knows: the on-disk index only."""
    BLOB_HOMES.forget_in_process()


# -- push in a later process -------------------------------------------------------------------
def test_a_later_push_into_another_repository_mounts_every_blob(fault_proxy, tmp_path):
    model = make_model(tmp_path / "model")
    one, two = _repo("a"), _repo("b")
    first = ocibridge.push(str(model), f"{fault_proxy.host}/{one}:v1")
    blobs = _blobs(fault_proxy.host, one)
    assert first.stats.blobs_copied == len(blobs) and first.stats.blobs_mounted == 0
    _fresh_process()
    fault_proxy.clear()
    second = ocibridge.push(str(model), f"{fault_proxy.host}/{two}:v1")
    assert (second.stats.blobs_mounted, second.stats.blobs_copied, second.stats.bytes_copied) == (len(blobs), 0, 0)
    assert second.descriptor.digest == first.descriptor.digest
    assert _blob_bytes_sent(fault_proxy, two) == 0  # no PATCH or PUT carried a byte
    mounts = fault_proxy.requests_matching("POST", f"^/v2/{two}/blobs/uploads/\\?")
    assert len(mounts) == len(blobs) and all(f"from={one.replace('/', '%2F')}" in r.path for r in mounts)
    assert all(r.upstream_status == 201 for r in mounts)
    # manifest HEAD, one mount POST per blob, manifest PUT with the tag: docs/transfers.md
    assert len(fault_proxy.requests_matching(None, f"^/v2/{two}/")) == len(blobs) + 2
    assert _blobs(fault_proxy.host, two) == blobs  # the registry holds them in the new repository


def test_a_repush_into_the_same_repository_is_already_present_not_mounted(fault_proxy, tmp_path):
    model = make_model(tmp_path / "model")
    one, two = _repo("a"), _repo("b")
    ocibridge.push(str(model), f"{fault_proxy.host}/{one}:v1")
    ocibridge.push(str(model), f"{fault_proxy.host}/{two}:v1")  # both are homes now
    _fresh_process()
    fault_proxy.clear()
    again = ocibridge.push(str(model), f"{fault_proxy.host}/{two}:v2")
    count = len(_blobs(fault_proxy.host, two))
    assert (again.stats.blobs_skipped, again.stats.blobs_mounted, again.stats.blobs_copied) == (count, 0, 0)
    assert fault_proxy.requests_matching("POST", "/blobs/uploads/") == []


def test_the_cli_in_separate_processes_mounts_and_says_so(registry, tmp_path):
    """Two `ocibridge push` processes sharing only the cache root: the second prints its mounts,
    in the summary line and in --json."""
    model = make_model(tmp_path / "model")
    one, two = _repo("a"), _repo("b")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}

    def push(repo: str, *flags: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "ocibridge", "push", str(model), f"{registry.host}/{repo}:v1",
                               "-q", *flags], env=env, capture_output=True, text=True, timeout=120)

    done = push(one)
    assert done.returncode == 0, done.stderr
    count = len(_blobs(registry.host, one))
    assert f"{count} blobs uploaded" in done.stdout + done.stderr
    done = push(two, "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["blobsMounted"], result["blobsCopied"], result["bytesCopied"]) == (count, 0, 0)
    done = push(_repo("c"))
    assert done.returncode == 0, done.stderr
    said = done.stdout + done.stderr
    assert f"0 blobs uploaded (0 B of layers and config), 0 already present, {count} mounted" in said


def test_push_to_another_family_mounts_too(registry, tmp_path):
    model = make_model(tmp_path / "model")
    one, two = _repo("a"), _repo("b")
    first = ocibridge.push(str(model), f"{registry.host}/{one}:v1", options=ocibridge.PushOptions(to="docker-model"))
    _fresh_process()
    second = ocibridge.push(str(model), f"{registry.host}/{two}:v1", options=ocibridge.PushOptions(to="docker-model"))
    count = len(_blobs(registry.host, one))
    assert first.stats.blobs_copied == count
    assert (second.stats.blobs_mounted, second.stats.blobs_copied) == (count, 0)


def test_push_from_the_hub_cache_mounts_too(registry, tmp_path, monkeypatch, capsys):
    from tests.hub.test_hf_cache import COMMIT, write_with_huggingface_hub
    from tests.modelgen import make_bert_model

    hub = offline_hub_cache(tmp_path, monkeypatch)
    write_with_huggingface_hub(hub, "acme/source", make_bert_model(tmp_path / "src"), COMMIT)
    one, two = _repo("a"), _repo("b")
    assert main(["push", "hf:acme/source", f"{registry.host}/{one}:v1", "-q"]) == 0
    _fresh_process()
    capsys.readouterr()
    assert main(["push", "hf:acme/source", f"{registry.host}/{two}:v1", "-q", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    count = len(_blobs(registry.host, one))
    assert (result["blobsMounted"], result["blobsCopied"]) == (count, 0)


def test_a_manifest_read_tells_where_its_blobs_are(registry, tmp_path):
    """A pull (a manifest read) in one run, a push of the same model elsewhere in the next."""
    model = make_model(tmp_path / "model")
    one, two = _repo("a"), _repo("b")
    ocibridge.push(str(model), f"{registry.host}/{one}:v1")
    BLOB_HOMES.forget_all()  # nothing known: only the pull below can teach it
    assert BLOB_HOMES.candidates(f"http://{registry.host}", next(iter(_blobs(registry.host, one)))) \
        == [one]  # _blobs read the manifest: that taught it
    BLOB_HOMES.forget_all()
    ocibridge.pull(f"{registry.host}/{one}:v1", str(tmp_path / "out"))
    _fresh_process()
    second = ocibridge.push(str(model), f"{registry.host}/{two}:v1")
    assert (second.stats.blobs_mounted, second.stats.blobs_copied) == (len(_blobs(registry.host, one)), 0)


def test_a_manifest_read_does_not_wait_for_the_index(registry, tmp_path, monkeypatch):
    """What a manifest read learns is written behind it (issue 91: the read comes before a
    download's first byte): an index another writer holds locked delays the read by nothing,
    and the homes land once the lock is let go."""
    model = make_model(tmp_path / "model")
    one = _repo("a")
    ocibridge.push(str(model), f"{registry.host}/{one}:v1")
    BLOB_HOMES.forget_all()
    index = BLOB_HOMES._index
    assert index is not None
    # a connection made from here on waits out the lock: a read that waited on it would still be
    # waiting when the lock is let go, long after this test gave up
    monkeypatch.setattr(index._conns, "_timeout", 600.0)
    holder = sqlite3.connect(index_dir() / "index.sqlite", timeout=0)
    holder.execute("BEGIN EXCLUSIVE")  # as a push in another process writing at length
    read: dict[str, dict[str, int]] = {}
    try:
        reader = threading.Thread(target=lambda: read.setdefault("blobs", _blobs(registry.host, one)))
        reader.start()  # a manifest read, in a thread of its own: a fresh connection
        reader.join(120)
        assert "blobs" in read, "the manifest read waited for the index's lock"  # answered while it is held
    finally:
        holder.rollback()
        holder.close()
    blobs = read["blobs"]
    _fresh_process()
    assert all(BLOB_HOMES.candidates(f"http://{registry.host}", d) == [one] for d in blobs)


# -- falling back ------------------------------------------------------------------------------
def test_a_registry_that_never_mounts_gets_the_upload(fault_proxy, tmp_path):
    """ECR's behaviour: the mount POST opens an upload session (202), which the upload uses."""
    model = make_model(tmp_path / "model")
    one, two = _repo("a"), _repo("b")
    ocibridge.push(str(model), f"{fault_proxy.host}/{one}:v1")
    blobs = _blobs(fault_proxy.host, one)
    _fresh_process()
    fault_proxy.clear()
    fault_proxy.quirks[:] = [NoMount()]
    second = ocibridge.push(str(model), f"{fault_proxy.host}/{two}:v1")
    assert (second.stats.blobs_mounted, second.stats.blobs_copied) == (0, len(blobs))
    assert second.stats.bytes_copied == sum(blobs.values())
    assert _blob_bytes_sent(fault_proxy, two) >= sum(blobs.values())
    # one POST per blob: the session the refused mount opened carried the upload
    assert len(fault_proxy.requests_matching("POST", f"^/v2/{two}/blobs/uploads/")) == len(blobs)
    assert fault_proxy.requests_matching("DELETE", "/blobs/uploads/") == []
    assert _blobs(fault_proxy.host, two) == blobs


def test_a_stale_entry_falls_back_quietly_and_is_forgotten(registry, fault_proxy, tmp_path):
    """The repository the index names lost the blobs (deleted since): the mounts are refused
    (202), the push uploads, succeeds, and the stale homes are forgotten."""
    model = make_model(tmp_path / "model")
    one, two = _repo("a"), _repo("b")
    ocibridge.push(str(model), f"{fault_proxy.host}/{one}:v1")
    blobs = _blobs(fault_proxy.host, one)
    for digest in blobs:  # the registry's own blob delete: the links in `one` are gone
        gone = httpx.delete(f"{registry.url}/v2/{one}/blobs/{digest}")
        assert gone.status_code == 202, gone.text
    base = f"http://{fault_proxy.host}"
    assert all(BLOB_HOMES.candidates(base, d) == [one] for d in blobs)
    _fresh_process()
    fault_proxy.clear()
    second = ocibridge.push(str(model), f"{fault_proxy.host}/{two}:v1")
    assert (second.stats.blobs_mounted, second.stats.blobs_copied) == (0, len(blobs))
    assert [r.upstream_status for r in fault_proxy.requests_matching("POST", "mount=")] == [202] * len(blobs)
    assert _blobs(fault_proxy.host, two) == blobs
    _fresh_process()
    assert all(BLOB_HOMES.candidates(base, d) == [two] for d in blobs)  # `one` forgotten


# -- bearer tokens -----------------------------------------------------------------------------
def test_the_mount_token_asks_pull_on_the_repository_the_index_names(token_registry, tmp_path):
    model = make_model(tmp_path / "model")
    one, two = _repo("team"), _repo("team")
    creds = TransferOptions(username=token_registry.username, password=token_registry.password)
    ocibridge.push(str(model), f"{token_registry.host}/{one}:v1", transfer=creds)
    _fresh_process()
    ts = token_registry.token_server
    ts.clear()
    second = ocibridge.push(str(model), f"{token_registry.host}/{two}:v1", transfer=creds)
    count = len(_blobs_with(token_registry, one, creds))
    assert (second.stats.blobs_mounted, second.stats.blobs_copied) == (count, 0)
    mount_tokens = [r for r in ts.requests if f"repository:{one}:pull" in r.scopes]
    assert mount_tokens, ts.requests
    assert set(mount_tokens[0].scopes) == {f"repository:{two}:pull,push", f"repository:{one}:pull"}
    assert set(mount_tokens[0].granted) == set(mount_tokens[0].scopes)
    # never leak: the index holds base URL, digest, repository and time, nothing of the login
    BLOB_HOMES.settle()  # (written behind the reads: read here as another process would)
    index = index_dir() / "index.sqlite"
    with sqlite3.connect(index) as conn:
        columns = [row[1] for row in conn.execute("PRAGMA table_info(homes)")]
        rows = conn.execute("SELECT base, digest, repository FROM homes").fetchall()
    assert columns == ["base", "digest", "repository", "seen"]
    assert {repo for _, _, repo in rows} == {one, two}
    for path in index.parent.iterdir():
        data = path.read_bytes()
        assert token_registry.password.encode() not in data and b"Bearer" not in data


def _blobs_with(reg, repo: str, creds: TransferOptions) -> dict[str, int]:
    with open_repository(parse_registry_reference(f"{reg.host}/{repo}:v1"),
                         creds.registry_options()) as store:
        _, data = store.read_manifest("v1")
    manifest = Manifest.model_validate_json(data)
    return {d.digest: d.size for d in [manifest.config, *manifest.layers]}


# -- the index itself --------------------------------------------------------------------------
def test_the_index_is_bounded_per_blob_and_in_all(tmp_path):
    index = BlobIndex(max_rows=5, check_every=1, directory=tmp_path / "idx")
    for repo in ("r/a", "r/b", "r/c", "r/d", "r/b"):
        index.remember("http://reg", repo, [DIGEST])
    assert index.candidates("http://reg", DIGEST) == ["r/b", "r/d", "r/c"][:HOMES_PER_BLOB]
    assert index.candidates("http://other", DIGEST) == []  # another registry knows nothing
    digests = [f"sha256:{n:064x}" for n in range(10)]
    index.remember("http://reg", "r/many", digests)
    assert index.rows() == 5
    assert index.candidates("http://reg", DIGEST) == []  # the least recently seen went first
    index.forget("http://reg", digests[-1], "r/many")
    assert index.candidates("http://reg", digests[-1]) == []


def test_the_index_refuses_what_names_no_blob_or_repository(tmp_path):
    index = BlobIndex(directory=tmp_path / "idx")
    index.remember("http://reg", "../etc", [DIGEST])
    index.remember("http://reg", "ok/repo", ["sha256:short", DIGEST])
    assert index.rows() == 1
    with sqlite3.connect(tmp_path / "idx" / "index.sqlite") as conn:  # edited by hand
        conn.execute("INSERT INTO homes VALUES ('http://reg', ?, 'x?mount=y&from=z', 9e18)", (DIGEST,))
    assert index.candidates("http://reg", DIGEST) == ["ok/repo"]


def test_an_index_that_cannot_be_opened_is_silent(tmp_path, monkeypatch):
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    index = BlobIndex(directory=blocked / "idx")
    index.remember("http://reg", "r/a", [DIGEST])
    assert index.candidates("http://reg", DIGEST) == [] and index.rows() == 0
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "index.sqlite").write_bytes(b"garbage" * 100)
    corrupt = BlobIndex(directory=tmp_path / "bad")
    corrupt.remember("http://reg", "r/a", [DIGEST])
    assert corrupt.candidates("http://reg", DIGEST) == []
    monkeypatch.setenv("OCIBRIDGE_BLOB_HOMES", "0")
    off = BlobIndex(directory=tmp_path / "off")
    off.remember("http://reg", "r/a", [DIGEST])
    assert not (tmp_path / "off").exists()


def _writer(directory: str, worker: int) -> None:
    index = BlobIndex(directory=Path(directory), check_every=16)
    for n in range(100):
        index.remember("http://reg", f"w/{worker}", [f"sha256:{n:064x}"])


def test_processes_writing_at_once_lose_nothing(tmp_path):
    directory = tmp_path / "idx"
    BlobIndex(directory=directory).rows()  # created once, as the first run does
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_writer, args=(str(directory), w)) for w in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    assert [w.exitcode for w in workers] == [0] * 4
    index = BlobIndex(directory=directory)
    assert index.rows() == 4 * 100 - 100  # three homes per blob kept, of four writers
    assert all(len(index.candidates("http://reg", f"sha256:{n:064x}")) == HOMES_PER_BLOB for n in range(100))
