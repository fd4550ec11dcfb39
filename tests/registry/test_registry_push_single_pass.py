"""A new push to a registry hashes each new file once (in the copy, beside the others), asks
the registry, then sends what it lacks (issue 32: no blob it holds is sent, even when the
digest cache knows no file); the builder does not hash again; a re-push of an existing tag
uploads nothing; an interrupted upload restarts."""

import re

from support.faultproxy import drop_request

import ocibridge
from ocibridge.model import builder
from tests.modelgen import make_model, tree


def test_new_push_streams_once_then_repush_sends_nothing(tmp_path, registry, unique_repo, monkeypatch):
    monkeypatch.setenv("OCIBRIDGE_CACHE", str(tmp_path / "cache"))
    hashed = []
    real = builder.file_chunks
    monkeypatch.setattr(builder, "file_chunks", lambda f: (hashed.append(f.path), real(f))[1])
    model = make_model(tmp_path / "m")
    ref = f"{registry.host}/{unique_repo}:v1"
    first = ocibridge.push(str(model), ref)
    assert hashed == [], "the builder does not hash again what the copy hashed"
    assert first.stats.bytes_copied >= sum(len(c) for c, _ in tree(model).values())
    ocibridge.validate(ref)
    out = tmp_path / "out"
    ocibridge.pull(ref, str(out))
    assert tree(out) == tree(model)
    monkeypatch.setenv("OCIBRIDGE_DIGEST_CACHE", "0")  # even without the cache: hash, HEAD, skip
    again = ocibridge.push(str(model), ref)
    assert again.descriptor.digest == first.descriptor.digest
    assert again.stats.bytes_copied == 0


def test_interrupted_upload_restarts(tmp_path, fault_proxy, unique_repo, monkeypatch):
    monkeypatch.setenv("OCIBRIDGE_DIGEST_CACHE", "0")
    model = make_model(tmp_path / "m")
    rule = fault_proxy.add("PUT", r"/blobs/uploads/", drop_request(after=50_000), times=1)
    ref = f"{fault_proxy.host}/{unique_repo}:v1"
    result = ocibridge.push(str(model), ref)
    puts = fault_proxy.requests_matching("PUT", r"/blobs/uploads/")
    assert rule.applied == 1, "the upload must really have been cut"
    assert len(puts) >= 2
    out = tmp_path / "out"
    ocibridge.pull(ref, str(out))
    assert tree(out) == tree(model)
    assert re.match(r"sha256:[0-9a-f]{64}", result.descriptor.digest)
