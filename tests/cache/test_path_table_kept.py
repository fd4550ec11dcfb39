"""``ocibridge path`` of a layer a lazy read (or serve) already fetched and checked by its chunk
table: the model cache keeps that file under the table's content key (``chunks/layers/<key>``),
and ``path`` answers it from there with no fetch, but only for a manifest whose bound table has
that key; the file never gets the layer digest's name, which every other manifest's pull trusts."""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path

import pytest
from support import FaultProxy
from support.fixtures import new_repo

import ocibridge
from ocibridge.api.lazy_ops import open_model
from ocibridge.cache.chunks import CacheChunks
from ocibridge.cache.modelcache import ModelCache, model_cache_root
from ocibridge.cache.prune import disk_use, prune
from ocibridge.cli import main

MiB = 1024 * 1024


@pytest.fixture(scope="module")
def three_pushes(registry, tmp_path_factory):
    """One 2 MiB file pushed three times: bound by a table of 1 MiB chunks (``--chunk-threshold``),
    by a table of 256 KiB chunks (another content key), and by none. (bytes, repos by kind)"""
    src = tmp_path_factory.mktemp("model") / "model"
    src.mkdir()
    data = os.urandom(2 * MiB + 321)
    (src / "weights.bin").write_bytes(data)
    (src / "config.json").write_text('{"model_type": "tiny"}')
    repos = {"table": new_repo(), "other table": new_repo(), "no table": new_repo()}
    assert main(["push", str(src), f"{registry.host}/{repos['table']}:v1", "-q", "--chunk-threshold", "1M"]) == 0
    ocibridge.push(str(src), f"{registry.host}/{repos['other table']}:v1",
                   options=ocibridge.PushOptions(chunk_threshold=MiB, chunk_size=256 * 1024))
    assert main(["push", str(src), f"{registry.host}/{repos['no table']}:v1", "-q", "--no-chunks"]) == 0
    (src / "weights.bin").write_bytes(data[:2 * MiB] + os.urandom(321))  # v2: its last chunk changed
    assert main(["push", str(src), f"{registry.host}/{repos['table']}:v2", "-q", "--chunk-threshold", "1M"]) == 0
    return data, repos


def _blob_gets(proxy: FaultProxy) -> Counter[str]:
    found: Counter[str] = Counter()
    for r in proxy.requests_matching("GET", r"/blobs/sha256:"):
        found[re.search(r"sha256:[0-9a-f]{64}", r.path).group(0)] += 1  # type: ignore[union-attr]
    return found


def _read_whole(ref: str, size: int) -> tuple[bytes, str, Path]:
    """A lazy read of every file, as ``ocibridge mount`` reads (``keep_blobs``: the table and
    config.json kept in the cache's blobs): weights.bin from its first byte to its end is kept
    as one layer file under its table's content key. (its bytes, its layer digest, that file)"""
    with open_model(ref, warn=None, keep_blobs=True) as model:
        assert model.read("config.json", 0, 22) == b'{"model_type": "tiny"}'
        blob = model.open("weights.bin")
        assert blob.chunks is not None
        key = blob.chunks.content_key(blob.chunk_size)
        return model.read("weights.bin", 0, size), model.file("weights.bin").layer.digest, \
            model_cache_root() / "chunks" / "layers" / key


def _path(ref: str, capsys: pytest.CaptureFixture[str]) -> Path:
    capsys.readouterr()
    assert main(["path", ref]) == 0
    return Path(capsys.readouterr().out.strip())


def test_path_answers_the_layer_a_lazy_read_kept_by_its_table_with_no_fetch(three_pushes, fault_proxy, capsys):
    data, repos = three_pushes
    ref = f"{fault_proxy.host}/{repos['table']}:v1"
    got, digest, layer_file = _read_whole(ref, len(data))
    assert got == data and layer_file.stat().st_size == len(data)
    before = _blob_gets(fault_proxy)
    snapshot = _path(ref, capsys)
    assert _blob_gets(fault_proxy) == before  # no blob fetched again: the layer, the config, the table
    answered = snapshot / "weights.bin"
    assert answered.read_bytes() == data and (snapshot / "config.json").read_text() == '{"model_type": "tiny"}'
    # the very file the read kept (linked, not copied: the cache holds it once), and never under the layer digest
    assert os.stat(answered).st_ino == os.stat(layer_file).st_ino
    assert not (model_cache_root() / "blobs" / "sha256" / digest.split(":", 1)[1]).exists()


@pytest.mark.parametrize("other", ["other table", "no table"])
def test_a_manifest_whose_table_has_another_key_or_none_fetches_the_layer(three_pushes, fault_proxy, capsys, other):
    """The same layer digest, bound by another table (other chunk digests: another key) or by
    none: the table-keyed file is not what that manifest vouches for, so the layer is fetched."""
    data, repos = three_pushes
    _, digest, layer_file = _read_whole(f"{fault_proxy.host}/{repos['table']}:v1", len(data))
    before = _blob_gets(fault_proxy)[digest]
    snapshot = _path(f"{fault_proxy.host}/{repos[other]}:v1", capsys)
    assert _blob_gets(fault_proxy)[digest] > before
    answered = snapshot / "weights.bin"
    assert answered.read_bytes() == data
    assert os.stat(answered).st_ino != os.stat(layer_file).st_ino


def test_a_changed_layer_file_is_not_answered_and_the_layer_is_fetched(three_pushes, fault_proxy, capsys):
    """The layer file is hashed against the layer digest before it is linked, as a cached blob is."""
    data, repos = three_pushes
    ref = f"{fault_proxy.host}/{repos['table']}:v1"
    _, digest, layer_file = _read_whole(ref, len(data))
    os.chmod(layer_file, 0o644)
    with layer_file.open("r+b") as f:  # its size kept
        f.seek(MiB + 5)
        f.write(b"\xff" * 8)
    before = _blob_gets(fault_proxy)[digest]
    snapshot = _path(ref, capsys)
    assert _blob_gets(fault_proxy)[digest] > before
    assert (snapshot / "weights.bin").read_bytes() == data


def test_prune_counts_a_linked_layer_file_as_freeing_nothing(three_pushes, fault_proxy, capsys):
    """Chunk files go before snapshots: removing the layer file a snapshot links gives back no
    byte, so prune goes on to the chunk files, and the snapshot that fits stays."""
    data, repos = three_pushes
    ref = f"{fault_proxy.host}/{repos['table']}:v1"
    _, _, layer_file = _read_whole(ref, len(data))
    snapshot = _path(ref, capsys)
    with open_model(f"{fault_proxy.host}/{repos['other table']}:v1", warn=None) as model:
        assert model.read("weights.bin", 300_000, 400_000) == data[300_000:400_000]  # one 256 KiB chunk kept
    root = model_cache_root()
    (chunk,) = (root / "chunks" / "blake3").iterdir()
    done = prune(ModelCache(), max_size=disk_use(root) - chunk.stat().st_size)
    assert done.snapshots == [] and not chunk.exists() and done.chunks == 1
    assert (snapshot / "weights.bin").read_bytes() == data
    _assert_served_from(layer_file, data)


def _assert_served_from(layer_file: Path, data: bytes) -> None:
    """The layer file is still where serve and lazy reads look for it, by its content key."""
    assert layer_file.read_bytes() == data
    assert CacheChunks(model_cache_root()).whole_layer_of(layer_file.name, len(data)) == layer_file


def test_prune_by_age_keeps_a_layer_file_a_snapshot_links(three_pushes, fault_proxy, capsys):
    """A layer file not read for a day but linked by a snapshot in use: removing its name would
    free nothing and hide it from serve and lazy reads, so it stays while the snapshot does."""
    data, repos = three_pushes
    ref = f"{fault_proxy.host}/{repos['table']}:v1"
    _, _, layer_file = _read_whole(ref, len(data))
    snapshot = _path(ref, capsys)
    day_ago = layer_file.stat().st_mtime - 86_400
    os.utime(layer_file, (day_ago, day_ago))
    done = prune(ModelCache(), older_than=3600)
    assert done.snapshots == [] and done.chunks == 0
    assert (snapshot / "weights.bin").read_bytes() == data
    _assert_served_from(layer_file, data)


def test_prune_by_size_takes_the_layer_file_once_its_snapshot_is_gone(three_pushes, fault_proxy, capsys):
    """A size the snapshot does not fit: it goes, and the layer file it linked (an ordinary file
    now, counted in the size) goes in the same pass, so the cache ends within the size."""
    data, repos = three_pushes
    ref = f"{fault_proxy.host}/{repos['table']}:v1"
    _, _, layer_file = _read_whole(ref, len(data))
    snapshot = _path(ref, capsys)
    root = model_cache_root()
    limit = disk_use(root) - MiB
    done = prune(ModelCache(), max_size=limit)
    assert done.snapshots == [snapshot.name] and not snapshot.exists()
    assert not layer_file.exists() and done.chunks == 1
    assert done.size <= limit


def test_a_later_version_reuses_the_chunks_of_the_layer_file_path_linked(three_pushes, fault_proxy, capsys):
    """The layer file ``path`` linked is indexed as a blob would be: v2, its last chunk changed,
    fetches that chunk alone (a delta), not the whole layer."""
    data, repos = three_pushes
    _read_whole(f"{fault_proxy.host}/{repos['table']}:v1", len(data))
    _path(f"{fault_proxy.host}/{repos['table']}:v1", capsys)
    before = len(fault_proxy.requests)
    snapshot = _path(f"{fault_proxy.host}/{repos['table']}:v2", capsys)
    moved = sum(r.response_bytes for r in fault_proxy.requests[before:] if r.method == "GET" and "/blobs/" in r.path)
    v2 = (snapshot / "weights.bin").read_bytes()
    assert v2[:2 * MiB] == data[:2 * MiB] and len(v2) == len(data)
    assert moved < 64 * 1024  # its 321-byte chunk (and the v2 table, config.json): not 2 MiB
