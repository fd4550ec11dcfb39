"""No wasted requests: what a real registry sees (counted by the fault proxy in front of it)
for a push into a new repository, a re-push, pulls and a cross-repository copy."""

from __future__ import annotations

import os
from collections import Counter

from ocibridge.cli import main


def _model(root, files: int = 3):
    root.mkdir()
    for i in range(files):
        (root / f"f{i}.bin").write_bytes(os.urandom(1000 + i))
    return root


def _run(proxy, args: list[str]) -> list:
    before = len(proxy.requests)
    assert main([*args, "-q"]) == 0
    return proxy.requests[before:]


def _kinds(requests) -> Counter:
    return Counter((r.method, r.path.split("/")[4] if r.path.count("/") >= 4 else r.path)
                   for r in requests)


def test_push_repush_pull_request_counts(fault_proxy, unique_repo, tmp_path):
    model = _model(tmp_path / "m")
    ref = f"{fault_proxy.host}/{unique_repo}:v1"

    push = _run(fault_proxy, ["push", str(model), ref])
    heads = Counter(r.path for r in push if r.method == "HEAD" and "/blobs/" in r.path)
    assert heads and max(heads.values()) == 1  # one existence check per blob, at most
    manifest_puts = [r for r in push if r.method == "PUT" and "/manifests/" in r.path]
    assert [r.path.rsplit("/", 1)[1] for r in manifest_puts] == ["v1"]  # pushed with its tag
    assert not [r for r in push if r.method == "GET"]
    # 3 files streamed (POST, PATCH, PUT each), the config (HEAD, POST, PUT), the tag HEAD,
    # the manifest HEAD and its PUT: 15 (21 before)
    assert len(push) <= 15, _kinds(push)

    repush = _run(fault_proxy, ["push", str(model), ref])
    assert len(repush) <= 4, _kinds(repush)
    assert not [r for r in repush if "/blobs/" in r.path]

    pull = _run(fault_proxy, ["pull", ref, "-o", str(tmp_path / "out")])
    blob_gets = [r for r in pull if r.method == "GET" and "/blobs/" in r.path]
    # the tag's manifest once (one GET), though the pull reads it twice (to tell the model's
    # family, then to copy its files): HEAD, GET, HEAD, GET before
    manifests = [(r.method, r.path.rsplit("/", 1)[1]) for r in pull if "/manifests/" in r.path]
    assert manifests == [("GET", "v1")], manifests
    assert len(blob_gets) == 3 and len(pull) == 3 + 1, _kinds(pull)

    into_layout = _run(fault_proxy, ["copy", ref, f"oci:{tmp_path / 'layout'}:v1"])
    assert len(into_layout) <= 4 + 4, _kinds(into_layout)  # 4 blobs (3 files + config)


def test_cross_repository_copy_mounts_every_blob_and_tags_in_one_put(fault_proxy, unique_repo,
                                                                       tmp_path):
    model = _model(tmp_path / "m", files=4)
    src = f"{fault_proxy.host}/{unique_repo}:v1"
    _run(fault_proxy, ["push", str(model), src])
    dst = f"{fault_proxy.host}/{unique_repo}-copy:v2"
    requests = _run(fault_proxy, ["copy", src, dst])
    mounts = [r for r in requests if r.method == "POST" and "mount=" in r.path]
    assert len(mounts) == 5 and all(r.status == 201 for r in mounts)
    assert not [r for r in requests if r.method in ("PATCH",) or
                (r.method == "PUT" and "/blobs/" in r.path)]
    # the mount is the existence check: no HEAD before it (the registry answers 201 either way)
    assert not [r for r in requests if r.method == "HEAD" and "/blobs/" in r.path]
    puts = [r.path.rsplit("/", 1)[1] for r in requests if r.method == "PUT"]
    assert puts == ["v2"]
    # the source manifest resolved and fetched, one mount per blob, the target's manifest HEAD, the PUT
    assert len(requests) <= 2 + 5 + 2, _kinds(requests)


DIGEST_INVALID = b'{"errors":[{"code":"DIGEST_INVALID","message":"provided digest did not match uploaded content"}]}'


def test_manifest_put_answered_digest_invalid_is_sent_once_more(fault_proxy, unique_repo, tmp_path, capsys):
    """What distribution 2.8 answers a manifest PUT that read a blob link while another mount
    rewrote it (forced here by the proxy): the same PUT once more succeeds; a second such
    answer is the error."""
    from support.faultproxy import status

    model = _model(tmp_path / "m", files=2)
    src = f"{fault_proxy.host}/{unique_repo}:v1"
    _run(fault_proxy, ["push", str(model), src])
    fault_proxy.add("PUT", r"/manifests/", status(400, body=DIGEST_INVALID), times=1)
    requests = _run(fault_proxy, ["copy", src, f"{fault_proxy.host}/{unique_repo}-a:v1"])
    puts = [r for r in requests if r.method == "PUT" and "/manifests/" in r.path]
    assert [r.status for r in puts] == [400, 201]

    fault_proxy.add("PUT", r"/manifests/", status(400, body=DIGEST_INVALID), times=2)
    before = len(fault_proxy.requests)
    assert main(["copy", src, f"{fault_proxy.host}/{unique_repo}-b:v1", "-q"]) == 1
    assert "DIGEST_INVALID" in capsys.readouterr().err
    puts = [r for r in fault_proxy.requests[before:] if r.method == "PUT" and "/manifests/" in r.path]
    assert [r.status for r in puts] == [400, 400]
