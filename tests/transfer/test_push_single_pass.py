"""New pushes read each file once (hash while writing); unchanged re-pushes read nothing."""

import json

import pytest

import ocibridge
from ocibridge.model import builder, digestcache
from ocibridge.stores.layout import LayoutStore
from tests.modelgen import make_model


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("OCIBRIDGE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("OCIBRIDGE_DIGEST_CACHE", "1")
    return tmp_path / "cache"


def _count_opens(monkeypatch):
    opened = []
    real = builder.file_chunks

    def counting(f):
        opened.append(f.path)
        return real(f)

    monkeypatch.setattr(builder, "file_chunks", counting)
    return opened


def test_new_push_hashes_while_writing_and_repush_reads_nothing(tmp_path, cache, monkeypatch):
    model = make_model(tmp_path / "m")
    opened = _count_opens(monkeypatch)
    first = ocibridge.push(str(model), f"oci:{tmp_path}/s:v1")
    assert opened == [], "a new push must not run a separate hashing pass"
    assert first.stats.bytes_copied > 400_000
    second = ocibridge.push(str(model), f"oci:{tmp_path}/s:v1")
    assert second.descriptor.digest == first.descriptor.digest
    assert opened == [] and second.stats.bytes_copied == 0
    # The layout is complete and valid after the single-pass push.
    ocibridge.validate(f"oci:{tmp_path}/s:v1")
    out = tmp_path / "out"
    ocibridge.pull(f"oci:{tmp_path}/s:v1", str(out))
    assert (out / "model.safetensors").read_bytes() == (model / "model.safetensors").read_bytes()


def test_digest_cache_is_invalidated_by_a_change(tmp_path, cache, monkeypatch):
    model = make_model(tmp_path / "m")
    target = model / "model.safetensors"
    ocibridge.push(str(model), f"oci:{tmp_path}/s:v1")
    assert digestcache.lookup(target) is not None
    target.write_bytes(b"new content")
    assert digestcache.lookup(target) is None
    result = ocibridge.push(str(model), f"oci:{tmp_path}/s:v1")  # existing tag: hash first, then HEAD-skip
    layers = json.loads(LayoutStore(tmp_path / "s").fetch_bytes(result.descriptor))["layers"]
    weight = next(x for x in layers if x["annotations"]["org.opencontainers.image.title"] == "model.safetensors")
    assert weight["size"] == len(b"new content")


def test_cache_can_be_switched_off(tmp_path, cache, monkeypatch):
    monkeypatch.setenv("OCIBRIDGE_DIGEST_CACHE", "0")
    model = make_model(tmp_path / "m")
    ocibridge.push(str(model), f"oci:{tmp_path}/s:v1")
    assert digestcache.lookup(model / "model.safetensors") is None
    assert not (cache / "digests.sqlite").exists()
