"""Verified lazy reads from a real registry (issue 29): one tensor of a 256 MiB safetensors file
moves under 1 % of the blob; a tampered chunk, a swapped table or an unbound table never yield
an unverified byte; the ocibridge:// fsspec filesystem and ``ocibridge cat``."""

from __future__ import annotations

import hashlib
import io
import json
import os
import struct
from pathlib import Path

import fsspec
import pytest
from safetensors import safe_open
from support.faultproxy import corrupt, status
from support.fixtures import new_repo

import ocibridge
from ocibridge.api.lazy_ops import attach_chunks, open_model, open_tensors
from ocibridge.api.model_ops import push
from ocibridge.chunks.attach import attach_table
from ocibridge.chunks.chunktable import (
    ANNOTATION_DIGEST,
    DEFAULT_CHUNK_SIZE,
    ChunkTableError,
    LayerChunks,
    build_table,
    chunk_stream,
    parse_table,
)
from ocibridge.cli import main
from ocibridge.errors import DigestMismatch, SignatureError
from ocibridge.model.builder import BuildOptions
from ocibridge.oci.mediatypes import Kind, Variant
from ocibridge.stores.registry import open_repository
from tests.signing_keys import key_pair

BIG = 256 * 1024 * 1024
SMALL = 4096  # floats of the small tensor


def write_safetensors(path: Path, tensors: list[tuple[str, int]]) -> None:
    """F32 tensors of random data, streamed (no 256 MiB array in memory), in the layout the
    safetensors library writes: header padded with spaces to 8 bytes, data in header order."""
    header: dict[str, object] = {"__metadata__": {"format": "np"}}
    at = 0
    for name, count in tensors:
        header[name] = {"dtype": "F32", "shape": [count], "data_offsets": [at, at + 4 * count]}
        at += 4 * count
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with path.open("wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for _, count in tensors:
            left = 4 * count
            while left:
                n = min(left, 16 * 1024 * 1024)
                f.write(os.urandom(n))
                left -= n


@pytest.fixture(scope="module")
def big_model(registry, tmp_path_factory):
    """A model of one 256 MiB safetensors file pushed with ``--chunks``: (repo, file, layer)."""
    src = tmp_path_factory.mktemp("big") / "model"
    src.mkdir()
    file = src / "model.safetensors"
    write_safetensors(file, [("a.big", BIG // 4 - SMALL), ("b.small", SMALL)])
    repo = new_repo()
    result = ocibridge.push(str(src), f"{registry.host}/{repo}:v1")
    with open_model(f"{registry.host}/{repo}:v1") as model:
        layer = model.file("model.safetensors").layer
    return repo, file, layer, result


def _blob_bytes(proxy) -> int:
    return sum(r.response_bytes for r in proxy.requests_matching("GET", "/blobs/"))


def test_one_tensor_moves_under_one_percent_and_equals_safetensors(big_model, fault_proxy):
    repo, file, layer, _ = big_model
    warnings: list[str] = []
    tensors = open_tensors(f"{fault_proxy.host}/{repo}:v1", "model.safetensors", warn=warnings.append)
    try:
        got = tensors.get_tensor("b.small")
        with safe_open(str(file), framework="numpy") as real:
            expected = real.get_tensor("b.small")
        assert got.dtype == expected.dtype and got.shape == expected.shape
        assert got.tobytes() == expected.tobytes()
        moved = _blob_bytes(fault_proxy)
        assert 0 < moved <= layer.size // 100, moved
        assert all(r.status == 206 for r in fault_proxy.requests_matching("GET", f"/blobs/{layer.digest}"))
        assert not warnings
    finally:
        tensors.blob.close()


def test_a_tampered_chunk_fails_the_read_and_returns_nothing(big_model, fault_proxy):
    repo, _, layer, _ = big_model
    fault_proxy.add("GET", f"/blobs/{layer.digest}", corrupt(offset=100))
    with open_model(f"{fault_proxy.host}/{repo}:v1") as model:
        with pytest.raises(DigestMismatch, match="chunk 0 of .* does not match its digest in the chunk table"):
            model.read("model.safetensors", 0, 4096)
        # the fault was one answer: the same range read again is verified and served
        assert model.read("model.safetensors", 0, 8) == big_model[1].read_bytes()[:8]


def _forged(layer, chunk_size: int = DEFAULT_CHUNK_SIZE) -> bytes:
    """A table naming the real layer whose chunk digests are those of other bytes."""
    chunks = tuple(hashlib.sha256(b"x%d" % i).hexdigest() for i in range(-(-layer.size // chunk_size)))
    return build_table([LayerChunks(layer.digest, layer.size, chunks, "sha256")], chunk_size).to_bytes()


def test_a_swapped_table_is_refused(big_model, fault_proxy):
    repo, _, layer, result = big_model
    table_digest = result.extra["chunks"]["table"]
    forged = _forged(layer)
    fault_proxy.add("GET", f"/blobs/{table_digest}",
                    status(200, body=forged, headers={"Content-Type": "application/octet-stream"}), times=None)
    with open_model(f"{fault_proxy.host}/{repo}:v1") as model, pytest.raises(ChunkTableError, match="refused"):
        model.read("model.safetensors", 0, 8)


def test_a_referrer_with_another_table_is_not_used_when_the_manifest_binds_one(big_model, registry):
    repo, file, layer, result = big_model
    ref = f"{registry.host}/{repo}:v1"
    with open_model(ref) as model, open_repository(host=registry.host, repository=repo) as store:
        attach_table(store, model.descriptor, parse_table(_forged(layer)))
        assert model.manifest.annotations[ANNOTATION_DIGEST] == result.extra["chunks"]["table"]
    with open_model(ref) as model:
        assert model.read("model.safetensors", 5_000_000, 5_000_100) == file.read_bytes()[5_000_000:5_000_100]


# -- a model pushed without a bound table ------------------------------------------------------
@pytest.fixture(scope="module")
def unbound_model(registry, tmp_path_factory):
    """A 20 MiB file pushed plainly, then given a table by ``chunks`` (unbound): (repo, bytes)."""
    src = tmp_path_factory.mktemp("unbound") / "model"
    src.mkdir()
    data = os.urandom(20 * 1024 * 1024 + 123)
    (src / "weights.bin").write_bytes(data)
    repo = new_repo()
    push(str(src), f"{registry.host}/{repo}:v1")
    result = attach_chunks(f"{registry.host}/{repo}:v1")
    assert not result.bound and result.layers == 1
    return repo, data, result


def test_an_unbound_table_falls_back_to_a_whole_verified_read_and_says_so(unbound_model, fault_proxy):
    repo, data, _ = unbound_model
    warnings: list[str] = []
    with open_model(f"{fault_proxy.host}/{repo}:v1", warn=warnings.append) as model:
        assert model.read("weights.bin", 10, 20) == data[10:20]
        assert model.read("weights.bin", 7_000_000, 7_000_010) == data[7_000_000:7_000_010]
    assert len(warnings) == 1 and "the manifest does not bind it" in warnings[0]
    assert "reading the whole blob" in warnings[0]
    assert _blob_bytes(fault_proxy) >= len(data)  # the whole blob, once


def test_an_unbound_table_is_used_when_its_referrer_is_signed(unbound_model, registry, fault_proxy, tmp_path):
    repo, data, result = unbound_model
    key, pub = key_pair(tmp_path)
    ref = f"{fault_proxy.host}/{repo}:v1"
    assert main(["sign", f"{registry.host}/{repo}:v1", "--key", str(key)]) == 0  # the model itself
    warnings: list[str] = []
    with open_model(ref, verify=ocibridge.verification([pub]), warn=warnings.append) as model:  # the table: unsigned
        assert model.read("weights.bin", 10, 20) == data[10:20]
    assert len(warnings) == 1 and "signed by a trusted key" in warnings[0]
    assert main(["sign", f"{registry.host}/{repo}@{result.referrer}", "--key", str(key)]) == 0
    fault_proxy.clear()
    with open_model(ref, verify=ocibridge.verification([pub]), warn=warnings.append) as model:
        assert model.read("weights.bin", 10, 20) == data[10:20]
        assert model.chain.how.startswith("chunk table in signed referrer")
        assert model.bytes_fetched == DEFAULT_CHUNK_SIZE
    assert len(warnings) == 1
    _, other = key_pair(tmp_path / "other")
    with pytest.raises(SignatureError):  # as pull's --verify-key: the model must be signed by it
        open_model(ref, verify=ocibridge.verification([other]))


def test_a_tampered_chunk_under_a_signed_table_is_refused(unbound_model, registry, fault_proxy, tmp_path):
    repo, data, result = unbound_model
    key, pub = key_pair(tmp_path)
    for signed in (f"{registry.host}/{repo}:v1", f"{registry.host}/{repo}@{result.referrer}"):
        assert main(["sign", signed, "--key", str(key)]) == 0
    with open_model(f"{registry.host}/{repo}:v1", warn=None) as model:
        layer = model.file("weights.bin").layer
    fault_proxy.add("GET", f"/blobs/{layer.digest}", corrupt(offset=5))
    with open_model(f"{fault_proxy.host}/{repo}:v1", verify=ocibridge.verification([pub])) as model, \
            pytest.raises(DigestMismatch, match="chunk 0"):
        model.read("weights.bin", 0, 10)


def test_open_model_takes_verify_as_every_other_call_and_the_old_keywords_warn(unbound_model, registry, tmp_path):
    """``verify=`` (what pull, path and copy_reference take): its keys and its policy file both
    hold; ``verify_key=``/``policy=`` still work, with a DeprecationWarning naming ``verify=``."""
    repo, data, _ = unbound_model
    ref = f"{registry.host}/{repo}:v1"
    key, pub = key_pair(tmp_path)
    assert main(["sign", ref, "--key", str(key)]) == 0
    with open_model(ref, verify=ocibridge.verification(keys=[pub]), warn=None) as model:
        assert model.read("weights.bin", 0, 10) == data[:10]
    _, other = key_pair(tmp_path / "other")
    with pytest.raises(SignatureError):
        open_model(ref, verify=ocibridge.verification(keys=[other]), warn=None)
    rejecting = tmp_path / "policy.json"
    rejecting.write_text(json.dumps({"default": [{"type": "reject"}]}))
    with pytest.raises(SignatureError, match="refused"):  # the policy file of verify=, before a request
        open_model(ref, verify=ocibridge.verification(keys=[pub], policy=rejecting), warn=None)

    with pytest.warns(DeprecationWarning, match=r"open_model\(verify_key=\.\.\.\) is deprecated: pass verify="), \
            open_model(ref, verify_key=[str(pub)], warn=None) as model:
        assert model.read("weights.bin", 0, 10) == data[:10]
    with pytest.warns(DeprecationWarning, match=r"open_model\(policy=\.\.\.\).*verify="), \
            pytest.raises(SignatureError, match="refused"):
        open_model(ref, policy=str(rejecting), warn=None)
    with pytest.raises(TypeError, match="not both"), pytest.warns(DeprecationWarning):
        open_model(ref, verify=ocibridge.verification(keys=[pub]), verify_key=[str(pub)])
    with pytest.raises(TypeError, match="'verify_keys'"):
        open_model(ref, verify_keys=[str(pub)])


# -- push --chunks is reproducible ------------------------------------------------------------
def test_push_chunks_gives_the_same_manifest_digest_twice(registry, tmp_path):
    src = tmp_path / "m"
    src.mkdir()
    (src / "w.bin").write_bytes(b"\x01" * (17 * 1024 * 1024))
    (src / "config.json").write_text("{}")
    a = ocibridge.push(str(src), f"{registry.host}/{new_repo()}:v1",
                       options=ocibridge.PushOptions(chunk_threshold=16 << 20))
    b = ocibridge.push(str(src), f"{registry.host}/{new_repo()}:v1",
                       options=ocibridge.PushOptions(chunk_threshold=16 << 20))
    assert a.descriptor.digest == b.descriptor.digest and a.extra["chunks"] == b.extra["chunks"]
    plain = push(str(src), f"{registry.host}/{new_repo()}:v1")
    assert plain.descriptor.digest != a.descriptor.digest  # the annotation is what binds the table


# -- the table format -------------------------------------------------------------------------
def test_table_round_trip_and_malformed_tables_are_refused():
    entry = chunk_stream(io.BytesIO(b"a" * (DEFAULT_CHUNK_SIZE + 1)))
    table = build_table([entry])
    assert parse_table(table.to_bytes()) == table and len(entry.chunks) == 2
    doc = json.loads(table.to_bytes())
    doc["layers"][0]["chunks"].pop()
    with pytest.raises(ChunkTableError, match="1 chunks for"):
        parse_table(json.dumps(doc).encode())
    doc = json.loads(table.to_bytes())
    doc["chunkSize"] = 10
    with pytest.raises(ChunkTableError, match="chunkSize"):
        parse_table(json.dumps(doc).encode())


# -- fsspec ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def dataset_model(registry, tmp_path_factory):
    import pyarrow as pa  # in the [test] extra
    import pyarrow.parquet as pq

    src = tmp_path_factory.mktemp("ds") / "model"
    (src / "data").mkdir(parents=True)
    table = pa.table({"id": list(range(1000)), "name": [f"row{i}" for i in range(1000)]})
    pq.write_table(table, src / "data" / "train.parquet")
    (src / "README.md").write_text("hello lazy world\n")
    repo = new_repo()
    options = BuildOptions(variants={Kind.DATASET: Variant.RAW, Kind.DOC: Variant.RAW}, auto_group=False)
    push(str(src), f"{registry.host}/{repo}:v1", options=ocibridge.PushOptions(build=options))
    return repo, src, table


def test_fsspec_ls_info_cat_and_open(dataset_model, registry):
    repo, src, _ = dataset_model
    fs = fsspec.filesystem("ocibridge")
    root = f"{registry.host}/{repo}:v1"
    names = fs.ls(f"ocibridge://{root}", detail=False)
    assert sorted(names) == [f"{root}/README.md", f"{root}/data"]
    assert fs.ls(f"{root}/data", detail=False) == [f"{root}/data/train.parquet"]
    assert fs.info(f"{root}/README.md")["size"] == len("hello lazy world\n")
    assert fs.cat_file(f"{root}/README.md", 6, 10) == b"lazy"
    assert fs.cat_file(f"{root}/README.md", -6) == b"world\n"
    with fsspec.open(f"ocibridge://{root}/README.md", "rb") as f:
        assert f.read() == (src / "README.md").read_bytes()
    with pytest.raises(FileNotFoundError):
        fs.info(f"{root}/nope")


def test_pyarrow_reads_a_parquet_dataset_layer_through_the_filesystem(dataset_model, registry):
    import pyarrow.parquet as pq

    repo, _, table = dataset_model
    fs = fsspec.filesystem("ocibridge")
    got = pq.read_table(f"{registry.host}/{repo}:v1/data/train.parquet", filesystem=fs)
    assert got.equals(table)


# -- cat ---------------------------------------------------------------------------------------
def test_cat_prints_a_range_and_refuses_a_bad_one(unbound_model, registry, capsysbinary):
    repo, data, _ = unbound_model
    ref = f"{registry.host}/{repo}:v1"
    assert main(["cat", ref, "weights.bin", "--range", "100-164"]) == 0
    out = capsysbinary.readouterr()
    assert out.out == data[100:164] and b"does not bind it" in out.err
    assert main(["cat", ref, "weights.bin", "--range", "nope"]) != 0
    err = capsysbinary.readouterr().err.decode()
    assert "--range 'nope'" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert main(["cat", ref, "missing.bin"]) != 0
    assert "no file 'missing.bin'" in capsysbinary.readouterr().err.decode()


def test_a_whole_file_read_through_fsspec_is_the_file(big_model, registry):
    """Sequential reads (spans of chunks, read on ahead) give the file's bytes exactly; a range
    across chunk boundaries too."""
    repo, file, layer, _ = big_model
    fs = fsspec.filesystem("ocibridge", skip_instance_cache=True)
    path = f"{registry.host}/{repo}:v1/model.safetensors"
    digest = hashlib.sha256()
    with fs.open(path, "rb") as f:
        while piece := f.read(10 * 1024 * 1024 + 7):
            digest.update(piece)
    assert "sha256:" + digest.hexdigest() == layer.digest
    with file.open("rb") as local:
        local.seek(DEFAULT_CHUNK_SIZE - 5)
        assert fs.cat_file(path, DEFAULT_CHUNK_SIZE - 5, 3 * DEFAULT_CHUNK_SIZE + 5) == \
            local.read(2 * DEFAULT_CHUNK_SIZE + 10)


def test_without_fsspec_the_error_names_the_extra(monkeypatch):
    import sys

    import ocibridge
    from ocibridge.errors import OcibridgeError

    monkeypatch.setitem(sys.modules, "fsspec", None)
    monkeypatch.delitem(sys.modules, "fsspec.spec", raising=False)
    monkeypatch.delitem(sys.modules, "ocibridge.api.fsspec_fs", raising=False)
    with pytest.raises(OcibridgeError, match=r"pip install 'ocibridge\[fsspec\]'"):
        ocibridge.filesystem()


def test_cli_push_chunks_then_cat_is_lazy_and_chunks_reports_bound(registry, fault_proxy, tmp_path, capsysbinary):
    src = tmp_path / "m"
    src.mkdir()
    data = os.urandom(17 * 1024 * 1024)
    (src / "w.bin").write_bytes(data)
    repo = new_repo()
    assert main(["push", str(src), f"{registry.host}/{repo}:v1", "--chunks", "--chunk-threshold", "16M", "-q",
                 "--json"]) == 0
    pushed = json.loads(capsysbinary.readouterr().out)
    assert pushed["chunks"]["layers"] == 1
    fault_proxy.clear()
    assert main(["cat", f"{fault_proxy.host}/{repo}:v1", "w.bin", "--range", "-16"]) == 0
    out = capsysbinary.readouterr()
    assert out.out == data[-16:] and not out.err
    assert _blob_bytes(fault_proxy) < 2 * DEFAULT_CHUNK_SIZE
    assert main(["chunks", f"{registry.host}/{repo}:v1", "--json"]) == 0
    attached = json.loads(capsysbinary.readouterr().out)
    assert attached["bound"] is True and attached["table"] == pushed["chunks"]["table"]


def test_a_copy_with_referrers_keeps_the_chain(registry, fault_proxy, tmp_path):
    from ocibridge.api.copy import copy_reference

    src = tmp_path / "m"
    src.mkdir()
    data = os.urandom(17 * 1024 * 1024 + 5)
    (src / "w.bin").write_bytes(data)
    first, second = new_repo(), new_repo()
    ocibridge.push(str(src), f"{registry.host}/{first}:v1", options=ocibridge.PushOptions(chunk_threshold=16 << 20))
    copy_reference(f"{registry.host}/{first}:v1", f"{registry.host}/{second}:v1", referrers=True)
    warnings: list[str] = []
    with open_model(f"{fault_proxy.host}/{second}:v1", warn=warnings.append) as model:
        assert model.read("w.bin", len(data) - 3) == data[-3:]
        assert model.chain.how.endswith("bound by the manifest") and not warnings
        assert model.bytes_fetched == len(data) - 17 * DEFAULT_CHUNK_SIZE  # the last, short chunk only


def test_chunks_says_how_to_make_an_unbound_table_usable(unbound_model, registry, capsys):
    repo, _, result = unbound_model
    assert main(["chunks", f"{registry.host}/{repo}:v1"]) == 0  # the same table again: the same referrer
    out = capsys.readouterr().out
    assert f"as referrer {result.referrer}" in out
    assert f"ocibridge sign {registry.host}/{repo}@{result.referrer} --key KEY" in out
