"""The shared model cache behind ``ocibridge path`` (issue 28), against real registries: blobs
once, snapshots of hard links, concurrent resolvers, offline use, prune."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from support import FaultProxy, corrupt, drop_response, throttle
from support.registry import RegistryProcess

import ocibridge
from ocibridge.cache.modelcache import ModelCache, model_cache_root
from ocibridge.cache.prune import disk_use, prune
from ocibridge.cli import main

SIZE = 64 * 1024


def make_version(root: Path, changed: str) -> Path:
    """Ten files of SIZE bytes each, all different; ``changed`` picks the content of file w9."""
    root.mkdir(parents=True)
    for i in range(9):
        (root / f"w{i}.bin").write_bytes(_pattern(i))
    (root / "w9.bin").write_bytes(_pattern(100 + sum(changed.encode())))
    return root


def _pattern(seed: int) -> bytes:
    import hashlib

    out = bytearray()
    block = hashlib.sha256(str(seed).encode()).digest()
    while len(out) < SIZE:
        block = hashlib.sha256(block).digest()
        out += block
    return bytes(out[:SIZE])


def push_version(tmp_path: Path, ref: str, changed: str) -> Path:
    src = make_version(tmp_path / f"src-{changed}", changed)
    assert main(["push", str(src), ref, "-q", "--no-auto-group"]) == 0
    return src


def same_files(snapshot: Path, src: Path) -> bool:
    mine = sorted(p.relative_to(snapshot).as_posix() for p in snapshot.rglob("*") if p.is_file())
    theirs = sorted(p.relative_to(src).as_posix() for p in src.rglob("*") if p.is_file())
    return mine == theirs and all((snapshot / n).read_bytes() == (src / n).read_bytes() for n in mine)


def blob_gets(proxy: FaultProxy) -> Counter[str]:
    found: Counter[str] = Counter()
    for r in proxy.requests_matching("GET", r"/blobs/sha256:"):
        found[re.search(r"sha256:[0-9a-f]{64}", r.path).group(0)] += 1  # type: ignore[union-attr]
    return found


def test_two_versions_sharing_nine_of_ten_files_take_eleven(tmp_path, capsys, registry, unique_repo, fault_proxy):
    one = push_version(tmp_path, f"{registry.host}/{unique_repo}:v1", "one")
    two = push_version(tmp_path, f"{registry.host}/{unique_repo}:v2", "two")
    capsys.readouterr()
    first = ocibridge.path(f"{fault_proxy.host}/{unique_repo}:v1")
    fetched_first = sum(blob_gets(fault_proxy).values())
    second = ocibridge.path(f"{fault_proxy.host}/{unique_repo}:v2")
    fetched_second = sum(blob_gets(fault_proxy).values()) - fetched_first
    assert first != second and same_files(first, one) and same_files(second, two)
    assert (fetched_first, fetched_second) == (10, 1)  # the second version fetched its one new file
    inodes = {(p.stat().st_dev, p.stat().st_ino) for snap in (first, second) for p in snap.iterdir()}
    assert len(inodes) == 11
    cache = model_cache_root()
    assert 11 * SIZE <= disk_use(cache) < 11 * SIZE + 16 * 1024  # + two small manifests
    assert all(p.stat().st_mode & 0o222 == 0 for p in first.iterdir())  # read-only
    assert first.stat().st_mode & 0o222 == 0
    # a third call answers from the cache: nothing fetched, the same directory
    before = sum(blob_gets(fault_proxy).values())
    assert ocibridge.path(f"{fault_proxy.host}/{unique_repo}:v1") == first
    assert sum(blob_gets(fault_proxy).values()) == before


def test_path_cli_prints_the_directory_alone_and_include_makes_a_partial_snapshot(
        tmp_path, capsys, registry, unique_repo):
    src = push_version(tmp_path, f"{registry.host}/{unique_repo}:v1", "one")
    capsys.readouterr()
    assert main(["path", f"{registry.host}/{unique_repo}:v1"]) == 0
    whole = Path(capsys.readouterr().out.strip())
    assert same_files(whole, src)
    assert main(["path", f"{registry.host}/{unique_repo}:v1", "--include", "w1.*", "--json"]) == 0
    partial = Path(json.loads(capsys.readouterr().out)["path"])
    assert partial != whole and sorted(p.name for p in partial.iterdir()) == ["w1.bin"]
    assert (partial / "w1.bin").stat().st_ino == (whole / "w1.bin").stat().st_ino


_RESOLVE = """
import sys, ocibridge
print(ocibridge.path(sys.argv[1]))
"""


def test_eight_processes_at_once_get_complete_snapshots_and_fetch_each_blob_once(
        tmp_path, capsys, registry, unique_repo, fault_proxy):
    sources = {tag: push_version(tmp_path, f"{registry.host}/{unique_repo}:{tag}", tag)
               for tag in ("a", "b", "c")}
    capsys.readouterr()
    # slow blobs (0.5 s each): the processes' downloads overlap in time, so only the cache's
    # locks keep a shared blob from being fetched by several of them
    fault_proxy.add("GET", r"/blobs/sha256:", throttle(128 * 1024), times=None)
    tags = ["a", "b", "c", "a", "b", "c", "a", "b"]
    procs = [subprocess.Popen([sys.executable, "-c", _RESOLVE, f"{fault_proxy.host}/{unique_repo}:{tag}"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for tag in tags]
    results = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err for _, err in results]
    for tag, (out, _) in zip(tags, results, strict=True):
        assert same_files(Path(out.strip()), sources[tag])
    gets = blob_gets(fault_proxy)
    assert len(gets) == 9 + 3 and set(gets.values()) == {1}, gets  # 9 shared files, 3 of their own


def test_offline_after_the_registry_is_gone(tmp_path, capsys, monkeypatch):
    with RegistryProcess(tmp_path / "own-registry") as reg:
        ref = f"{reg.host}/offline/model:v1"
        src = push_version(tmp_path, ref, "one")
        capsys.readouterr()
        online = ocibridge.path(ref)
    assert not reg.running()
    assert main(["path", ref]) == 0  # online: the registry cannot be reached, the snapshot is complete
    out, err = capsys.readouterr()  # (tests/cache/test_path_outage.py)
    assert out.strip() == str(online) and err.count("\n") == 1 and "ocibridge: warning: " in err
    assert main(["path", ref, "--offline"]) == 0
    assert capsys.readouterr().out.strip() == str(online)
    monkeypatch.setenv("OCIBRIDGE_OFFLINE", "1")
    assert ocibridge.path(ref) == online and same_files(online, src)
    # a selection never made before is built from the cache alone
    partial = ocibridge.path(ref, include=["w2.bin"])
    assert [p.name for p in partial.iterdir()] == ["w2.bin"]
    # pinned by digest: the manifest the cache holds, whatever name fetched it
    assert main(["resolve", f"{reg.host}/offline/model:v1"]) == 1  # (the registry is gone)
    capsys.readouterr()
    digest = next(p.name for p in (model_cache_root() / "refs").iterdir())  # one record so far
    recorded = json.loads((model_cache_root() / "refs" / digest).read_text())["digest"]
    assert ocibridge.path(f"{reg.host}/offline/model@{recorded}") == online
    assert main(["path", f"{reg.host}/offline/model:never"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "never fetched" in err and "Traceback" not in err


def test_offline_a_model_never_fetched_says_to_run_path_online_first(tmp_path):
    """``path --offline`` of a model the cache never held said only that it was never fetched,
    not what to do (``mount --offline`` says to mount it online first); the line now says to run
    ``path`` on it once online. Nothing is asked of the registry (there is none here)."""
    ref = "registry.invalid:5000/acme/tiny:v1"
    cache = tmp_path / "cache"
    env = {**os.environ, "OCIBRIDGE_CACHE": str(cache), "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run([sys.executable, "-m", "ocibridge", "path", ref, "--offline"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (
        1, "", f"ocibridge: error: offline: {ref} was never fetched into the model cache ({cache / 'models'}): "
               "run 'ocibridge path' on it once online first\n")


def test_a_corrupt_blob_leaves_no_snapshot_and_nothing_in_the_cache(tmp_path, capsys, registry, unique_repo,
                                                                    fault_proxy):
    push_version(tmp_path, f"{registry.host}/{unique_repo}:v1", "one")
    capsys.readouterr()
    fault_proxy.add("GET", r"/blobs/sha256:", corrupt(offset=100), times=100)
    assert main(["path", f"{fault_proxy.host}/{unique_repo}:v1"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    cache = ModelCache()
    assert cache.snapshot_dirs() == [] and list(cache.snapshots.iterdir()) == []
    layers = [p for p in (cache.root / "blobs" / "sha256").iterdir() if p.stat().st_size >= SIZE]
    assert layers == []


def test_prune_by_age_then_size(tmp_path, capsys, registry, unique_repo):
    push_version(tmp_path, f"{registry.host}/{unique_repo}:v1", "one")
    push_version(tmp_path, f"{registry.host}/{unique_repo}:v2", "two")
    capsys.readouterr()
    first = ocibridge.path(f"{registry.host}/{unique_repo}:v1")
    second = ocibridge.path(f"{registry.host}/{unique_repo}:v2")
    old = time.time() - 10 * 86400
    os.utime(first, (old, old))
    assert main(["cache", "prune", "--older-than", "7d", "--json"]) == 0
    done = json.loads(capsys.readouterr().out)
    # its own file and its manifest
    assert done["snapshots"] == [first.name] and done["blobs"] == 2 and done["freed"] >= SIZE
    assert not first.exists() and len(list(second.iterdir())) == 10
    assert 10 * SIZE <= disk_use(model_cache_root()) < 11 * SIZE
    assert prune(ModelCache(), max_size=SIZE).snapshots == [second.name]
    assert disk_use(model_cache_root()) < SIZE
    assert main(["cache", "prune"]) == 2  # no policy given: a usage mistake
    assert "--older-than" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["cache", "prune", "--older-than", "soon"],
                                  ["cache", "prune", "--max-size", "lots"]])
def test_prune_policy_mistakes_are_one_line(capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_verify_key_refuses_an_unsigned_model_then_resolves_the_signed_digest(tmp_path, capsys, registry,
                                                                               unique_repo):
    from signing_keys import key_pair

    ref = f"{registry.host}/{unique_repo}:v1"
    src = push_version(tmp_path, ref, "one")
    private, public = key_pair(tmp_path / "k")
    capsys.readouterr()
    assert main(["path", ref, "--verify-key", str(public)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not signed" in err
    assert ModelCache().snapshot_dirs() == []  # nothing fetched for an unverified model
    assert main(["sign", ref, "--key", str(private)]) == 0
    capsys.readouterr()
    assert main(["path", ref, "--verify-key", str(public)]) == 0
    assert same_files(Path(capsys.readouterr().out.strip()), src)
    assert main(["path", ref, "--verify-key", str(public), "--offline"]) == 2
    assert "offline" in capsys.readouterr().err


def test_a_model_of_many_small_files_in_a_tar_layer(tmp_path, capsys, registry, unique_repo):
    src = tmp_path / "small"
    (src / "tok").mkdir(parents=True)
    for i in range(80):  # more than AUTO_GROUP_THRESHOLD files of one kind
        (src / "tok" / f"part{i:02}.json").write_text(json.dumps({"i": i}))
    (src / "config.json").write_text("{}")
    ref = f"{registry.host}/{unique_repo}:v1"
    assert main(["push", str(src), ref, "-q"]) == 0  # small files are grouped into a tar layer
    capsys.readouterr()
    assert main(["inspect", ref, "--json"]) == 0
    assert any(layer["variant"] != "raw" for layer in json.loads(capsys.readouterr().out)["layers"])
    snap = ocibridge.path(ref)
    assert same_files(snap, src)
    assert all(p.stat().st_mode & 0o222 == 0 for p in snap.rglob("*"))


def test_path_of_a_layout_model_with_empty_and_duplicate_files(tmp_path, capsys):
    """A layout is no ranged source: its blobs come in through the cache's plain write."""
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "__init__.py").write_bytes(b"")
    (src / "empty.txt").write_bytes(b"")
    (src / "a.bin").write_bytes(_pattern(1))
    (src / "copy-of-a.bin").write_bytes(_pattern(1))
    ref = f"oci:{tmp_path / 'layout'}:v1"
    assert main(["push", str(src), ref, "-q", "--no-auto-group"]) == 0
    capsys.readouterr()
    snap = ocibridge.path(ref)
    assert same_files(snap, src)
    assert ocibridge.path(ref, offline=True) == snap


def test_a_cut_download_resumes_with_a_range(tmp_path, capsys, registry, unique_repo, fault_proxy):
    src = push_version(tmp_path, f"{registry.host}/{unique_repo}:v1", "one")
    capsys.readouterr()
    fault_proxy.add("GET", r"/blobs/sha256:", drop_response(after=10_000), times=1)
    snap = ocibridge.path(f"{fault_proxy.host}/{unique_repo}:v1")
    assert same_files(snap, src)
    ranges = [r.range for r in fault_proxy.requests_matching("GET", r"/blobs/sha256:") if r.range]
    assert ranges == ["bytes=10000-"]  # the 10,000 bytes received were kept, not fetched again


@pytest.mark.parametrize("algorithm", ["sha256", "blake3"])  # (the old tables' directory, and BLAKE3's)
def test_prune_removes_the_chunk_index_files_of_blobs_it_removed(tmp_path, capsys, algorithm):
    """``chunks/tables/<hex>`` (what a delta download reuses) of a blob prune removed went
    only when a later delta happened to meet it among the newest 512: they stayed and counted
    against --max-size. The table of a blob still linked by a snapshot stays."""
    import io

    from ocibridge.chunks.chunkindex import ChunkIndex
    from ocibridge.chunks.chunktable import chunk_stream

    cache = ModelCache()
    blobs = cache.root / "blobs" / "sha256"
    blobs.mkdir(parents=True, exist_ok=True)
    index = ChunkIndex(cache.root)
    names = []
    for n, linked in ((1, True), (2, False)):
        data = bytes([n]) * (3 * 64 * 1024 + 1)
        entry = chunk_stream(io.BytesIO(data), 64 * 1024, algorithm)
        hexpart = entry.digest.removeprefix("sha256:")
        (blobs / hexpart).write_bytes(data)
        if linked:  # as a snapshot's file links it
            os.link(blobs / hexpart, tmp_path / "snapshot-file")
        index.remember(entry, 64 * 1024)
        names.append(hexpart)
    assert sorted(p.name for p in index.dir_of(algorithm).iterdir()) == sorted(names)
    assert main(["cache", "prune", "--older-than", "7d", "--json"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["blobs"] == 1 and done["tables"] == 1
    assert [p.name for p in index.dir_of(algorithm).iterdir()] == [names[0]]
