"""Issue 43, both promises at once: a push sends no blob byte the registry holds, and reads a
file of new content once. A file of more than 2 MiB the digest cache does not know is looked up
in the content-sample index (size, first and last MiB -> digest): a known candidate is asked
about and confirmed by a local hash (nothing sent); new content is sent while it is hashed.
Counted on the wire (the fault proxy's PATCH/PUT body bytes to ``/blobs/uploads/``) and at the
file's opener (every read of the file's content goes through ``ModelFile.open``)."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest

import ocibridge
from ocibridge.model.extract import fetch_manifest
from ocibridge.model.package import ModelFile
from ocibridge.places.locate import open_target as open_store_target
from ocibridge.transfer import sampleindex
from tests.modelgen import make_model, tree

MIB = 1 << 20
BIG = 3 * MIB + 12_345  # over the index's 2 MiB floor, with a middle that is neither end


def _blob_bytes_sent(proxy) -> int:
    return sum(r.request_bytes for r in proxy.requests
               if r.method in ("PATCH", "PUT") and "/blobs/uploads/" in r.path)


def _big_bytes(seed: int) -> bytes:
    return b"".join(hashlib.sha256(f"{seed}:{i}".encode()).digest() for i in range(BIG // 32 + 1))[:BIG]


def _layer(ref: str, title: str):
    target = open_store_target(ref)
    _, manifest = fetch_manifest(target.store, target.reference)
    return next(d for d in manifest.layers if d.annotations["org.opencontainers.image.title"] == title)


def _manifest_bytes(ref: str) -> bytes:
    target = open_store_target(ref)
    return target.store.fetch_bytes(target.store.resolve(target.reference))


class Reads:
    """Every open of a model file's content and the bytes read through it, by file path; a
    *pass* is an open that read more than a MiB (the metadata reader opens a weight file for
    its header's few bytes, apart from the content's passes)."""

    def __init__(self, monkeypatch):
        self.reads: dict[str, list[int]] = {}  # path -> bytes read through each open
        real = ModelFile.open
        log = self.reads

        class Counted:
            def __init__(self, inner, path):
                self.inner = inner
                self.slot = len(log.setdefault(path, []))
                self.path = path
                log[path].append(0)

            def read(self, n=-1):
                data = self.inner.read(n)
                log[self.path][self.slot] += len(data)
                return data

            def __getattr__(self, name):  # seek, readinto, close: the real file's
                return getattr(self.inner, name)

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                self.inner.close()

        monkeypatch.setattr(ModelFile, "open", lambda f: Counted(real(f), f.path))

    def passes(self, path: str) -> list[int]:
        return [n for n in self.reads.get(path, []) if n > MIB]


@pytest.fixture()
def big_model(tmp_path, monkeypatch):
    monkeypatch.setenv("OCIBRIDGE_CACHE", str(tmp_path / "cache"))
    model = make_model(tmp_path / "model")
    (model / "model.safetensors").write_bytes(_big_bytes(1))
    return model


@pytest.mark.parametrize("index", ["1", "0"])
def test_new_file_is_read_once_and_sent_once(index, big_model, fault_proxy, unique_repo, monkeypatch):
    """With ``OCIBRIDGE_SAMPLE_INDEX=0`` (nothing indexed) a large file is new content too."""
    monkeypatch.setenv("OCIBRIDGE_SAMPLE_INDEX", index)
    reads = Reads(monkeypatch)
    ref = f"{fault_proxy.host}/{unique_repo}:v1"
    ocibridge.push(str(big_model), ref, options=ocibridge.PushOptions(chunks=False))
    assert reads.passes("model.safetensors") == [BIG], "one pass over the file, no separate hashing read"
    sent = _blob_bytes_sent(fault_proxy)
    assert BIG <= sent < BIG + 420_000, sent  # the big file once, plus the small files and config
    assert _layer(ref, "model.safetensors").digest == "sha256:" + hashlib.sha256(_big_bytes(1)).hexdigest()
    weights = big_model / "model.safetensors"
    monkeypatch.setenv("OCIBRIDGE_SAMPLE_INDEX", "1")
    indexed = sampleindex.lookup(*sampleindex.sample_of(weights))
    assert indexed == (_layer(ref, "model.safetensors").digest if index == "1" else None)


def test_fresh_copy_sends_no_blob_byte_via_the_sample_index(tmp_path, big_model, fault_proxy, unique_repo,
                                                           monkeypatch):
    """A default push (chunk table on, its threshold lowered to take the big file): the copy's
    confirming read makes the same table, so the manifest is byte-identical."""
    repo = f"{fault_proxy.host}/{unique_repo}"
    ocibridge.push(str(big_model), f"{repo}:v1", options=ocibridge.PushOptions(chunk_threshold=MIB))
    fault_proxy.clear()
    copy = tmp_path / "elsewhere" / "model"  # same name: the same config, the same manifest
    shutil.copytree(big_model, copy)  # new inodes and times: the digest cache knows none
    reads = Reads(monkeypatch)
    result = ocibridge.push(str(copy), f"{repo}:v2", options=ocibridge.PushOptions(chunk_threshold=MIB))
    assert _blob_bytes_sent(fault_proxy) == 0
    assert result.stats.bytes_copied == 0 and result.stats.blobs_copied == 0
    assert reads.passes("model.safetensors") == [BIG], "confirmed by one local read"
    assert _manifest_bytes(f"{repo}:v2") == _manifest_bytes(f"{repo}:v1")
    annotations = json.loads(_manifest_bytes(f"{repo}:v2"))["annotations"]
    assert any("chunk" in key for key in annotations), annotations  # the table is still bound


def test_same_ends_other_middle_is_detected_and_sent(tmp_path, big_model, fault_proxy, unique_repo, monkeypatch):
    repo = f"{fault_proxy.host}/{unique_repo}"
    ocibridge.push(str(big_model), f"{repo}:v1", options=ocibridge.PushOptions(chunks=False))
    fault_proxy.clear()
    original = _big_bytes(1)
    other = original[:MIB] + _big_bytes(2)[MIB:BIG - MIB] + original[BIG - MIB:]
    assert len(other) == BIG and other != original
    changed = tmp_path / "changed" / "model"
    shutil.copytree(big_model, changed)
    (changed / "model.safetensors").write_bytes(other)
    assert sampleindex.sample_of(changed / "model.safetensors") == \
        sampleindex.sample_of(big_model / "model.safetensors"), "the same sample: a candidate is found"
    reads = Reads(monkeypatch)
    result = ocibridge.push(str(changed), f"{repo}:v2", options=ocibridge.PushOptions(chunks=False))
    assert reads.passes("model.safetensors") == [BIG, BIG], "the confirming read fails, then the send"
    assert _layer(f"{repo}:v2", "model.safetensors").digest == "sha256:" + hashlib.sha256(other).hexdigest()
    assert BIG <= _blob_bytes_sent(fault_proxy) < BIG + 5_000  # the file and the config, no more
    assert result.stats.blobs_copied >= 1
    out = tmp_path / "out"
    ocibridge.pull(f"{repo}:v2", str(out))
    assert tree(out) == tree(changed)
    # the index now names the newer content for that sample
    assert sampleindex.lookup(*sampleindex.sample_of(changed / "model.safetensors")) == \
        "sha256:" + hashlib.sha256(other).hexdigest()


def test_known_content_the_registry_lacks_is_read_once(tmp_path, big_model, fault_proxy, unique_repo,
                                                     monkeypatch):
    """The index names a candidate this repository does not hold (a push into a layout made the
    entry): the HEAD says no, so the file is sent while hashed, one read, no confirming read."""
    ocibridge.push(str(big_model), f"oci:{tmp_path}/layout:v1",
                   options=ocibridge.PushOptions(chunks=False))  # indexes the file
    assert sampleindex.lookup(*sampleindex.sample_of(big_model / "model.safetensors"))
    copy = tmp_path / "elsewhere" / "model"
    shutil.copytree(big_model, copy)  # unknown to the digest cache: the sample index decides
    reads = Reads(monkeypatch)
    ref = f"{fault_proxy.host}/{unique_repo}:v1"
    ocibridge.push(str(copy), ref, options=ocibridge.PushOptions(chunks=False))
    assert reads.passes("model.safetensors") == [BIG], "sent while hashed, no confirming read"
    sent = _blob_bytes_sent(fault_proxy)
    assert BIG <= sent < BIG + 420_000, sent
    assert fault_proxy.requests_matching("HEAD", r"/blobs/sha256:"), "the candidate was asked about"


def test_two_equal_new_files_are_sent_once(tmp_path, big_model, fault_proxy, unique_repo, monkeypatch):
    """Equal files of one push share a sample: the first is sent while hashed, the second then
    finds it indexed and held, and is only confirmed."""
    shutil.copy(big_model / "model.safetensors", big_model / "weights" / "copy.safetensors")
    reads = Reads(monkeypatch)
    ref = f"{fault_proxy.host}/{unique_repo}:v1"
    result = ocibridge.push(str(big_model), ref, options=ocibridge.PushOptions(chunks=False))
    assert BIG <= _blob_bytes_sent(fault_proxy) < BIG + 420_000
    assert reads.passes("model.safetensors") + reads.passes("weights/copy.safetensors") == [BIG, BIG]
    assert _layer(ref, "weights/copy.safetensors").digest == _layer(ref, "model.safetensors").digest
    assert BIG <= result.stats.bytes_copied < 2 * BIG, "the summary counts the shared blob once"


@pytest.mark.parametrize("index", ["1", "0"])
def test_another_machine_sends_nothing_the_repository_holds_under_another_tag(index, tmp_path, big_model,
                                                                              fault_proxy, unique_repo, monkeypatch):
    """Pushed from a machine that never hashed the file (no digest cache, no sample index), under
    a new tag: the repository's manifest names a file of that path and size, the registry's blob
    has the same first and last MiB (two Range requests), so it is confirmed locally, not sent."""
    repo = f"{fault_proxy.host}/{unique_repo}"
    ocibridge.push(str(big_model), f"{repo}:v1", options=ocibridge.PushOptions(chunks=False))
    monkeypatch.setenv("OCIBRIDGE_CACHE", str(tmp_path / "another-machine"))
    monkeypatch.setenv("OCIBRIDGE_SAMPLE_INDEX", index)
    copy = tmp_path / "elsewhere" / "model"
    shutil.copytree(big_model, copy)
    fault_proxy.clear()
    reads = Reads(monkeypatch)
    result = ocibridge.push(str(copy), f"{repo}:v2", options=ocibridge.PushOptions(chunks=False))
    assert _blob_bytes_sent(fault_proxy) == 0
    assert result.stats.blobs_copied == 0
    assert reads.passes("model.safetensors") == [BIG], "confirmed by one local read"
    digest = _layer(f"{repo}:v1", "model.safetensors").digest
    sampled = [r for r in fault_proxy.requests_matching("GET", f"/blobs/{digest}")]
    assert len(sampled) == 2 and all(r.headers.get("range") for r in sampled)  # its two ends
    assert sum(r.response_bytes for r in sampled) == 2 * MIB
    assert _manifest_bytes(f"{repo}:v2") == _manifest_bytes(f"{repo}:v1")


def test_a_same_size_file_with_other_ends_is_sent_without_a_confirming_read(tmp_path, big_model, fault_proxy,
                                                                            unique_repo, monkeypatch):
    """A fine-tune of the same size under a new tag, from another machine: the repository names a
    candidate for its path and size, but the blob's ends differ from the file's: new content,
    one read, sent once (the 2 MiB of the two ends are all it cost)."""
    repo = f"{fault_proxy.host}/{unique_repo}"
    ocibridge.push(str(big_model), f"{repo}:v1", options=ocibridge.PushOptions(chunks=False))
    monkeypatch.setenv("OCIBRIDGE_CACHE", str(tmp_path / "another-machine"))
    tuned = tmp_path / "tuned" / "model"
    shutil.copytree(big_model, tuned)
    (tuned / "model.safetensors").write_bytes(_big_bytes(3))  # same size, other bytes
    fault_proxy.clear()
    reads = Reads(monkeypatch)
    ocibridge.push(str(tuned), f"{repo}:v2", options=ocibridge.PushOptions(chunks=False))
    assert reads.passes("model.safetensors") == [BIG], "sent while hashed, no confirming read"
    assert BIG <= _blob_bytes_sent(fault_proxy) < BIG + 5_000
    assert _layer(f"{repo}:v2", "model.safetensors").digest == "sha256:" + hashlib.sha256(_big_bytes(3)).hexdigest()
