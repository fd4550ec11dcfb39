"""A new push to a registry streams each new file once (digest learnt while uploading);
a re-push of an existing tag uploads nothing; an interrupted streaming upload restarts."""

import re

from support.faultproxy import drop_request

import ocibridge
from ocibridge.model import builder
from tests.modelgen import make_model, tree


def test_new_push_streams_once_then_repush_sends_nothing(tmp_path, registry, unique_repo, monkeypatch):
    monkeypatch.setenv("OCIBRIDGE_CACHE_DIR", str(tmp_path / "cache"))
    hashed = []
    real = builder.file_chunks
    monkeypatch.setattr(builder, "file_chunks", lambda f: (hashed.append(f.path), real(f))[1])
    model = make_model(tmp_path / "m")
    ref = f"{registry.host}/{unique_repo}:v1"
    first = ocibridge.push(str(model), ref)
    assert hashed == [], "no separate hashing pass for a new push"
    assert first.stats.bytes_copied >= sum(len(c) for c, _ in tree(model).values())
    ocibridge.validate(ref)
    out = tmp_path / "out"
    ocibridge.pull(ref, str(out))
    assert tree(out) == tree(model)
    monkeypatch.setenv("OCIBRIDGE_DIGEST_CACHE", "0")  # even without the cache: hash, HEAD, skip
    again = ocibridge.push(str(model), ref)
    assert again.descriptor.digest == first.descriptor.digest
    assert again.stats.bytes_copied == 0


def test_interrupted_streaming_upload_restarts(tmp_path, fault_proxy, unique_repo, monkeypatch):
    monkeypatch.setenv("OCIBRIDGE_DIGEST_CACHE", "0")
    model = make_model(tmp_path / "m")
    rule = fault_proxy.add("PATCH", r"/blobs/uploads/", drop_request(after=50_000), times=1)
    ref = f"{fault_proxy.host}/{unique_repo}:v1"
    result = ocibridge.push(str(model), ref)
    patches = fault_proxy.requests_matching("PATCH", r"/blobs/uploads/")
    assert rule.applied == 1, "the upload must really have been cut"
    assert len(patches) >= 2
    out = tmp_path / "out"
    ocibridge.pull(ref, str(out))
    assert tree(out) == tree(model)
    assert re.match(r"sha256:[0-9a-f]{64}", result.descriptor.digest)
