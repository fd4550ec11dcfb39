"""A commit serve --upstream fetched binds the BLAKE3 chunk table ``push`` binds for the same files
(push's rule: a raw file from ``PUSH_THRESHOLD``, 1 MiB chunks), made as the bytes streamed through
the tee and attached as push attaches it, so everything downstream of a proxied model keeps its
fast paths: a directory pull checks the layer by the table, not by a whole-blob SHA-256; open_model
and load_tensors verify chunk by chunk. Against the real processes of tests/upstream_proxy.py."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import numpy as np
import pytest
from huggingface_hub import HfApi
from safetensors.numpy import load_file, save_file
from support.faultproxy import FaultProxy, corrupt_at
from upstream_proxy import (
    UP_TOKEN,
    Proxied,
    as_push_hf_makes,
    lfs_only,  # noqa: F401 - autouse: over LFS
    manifest_of,
    push_hf_manifest,
)

import ocibridge
from ocibridge.chunks import hashes
from ocibridge.chunks.chunktable import (
    ANNOTATION_DIGEST,
    ARTIFACT_TYPE,
    DEFAULT_CHUNK_SIZE,
    PUSH_THRESHOLD,
    build_table,
    chunk_stream,
    parse_table,
)
from ocibridge.cli import main
from ocibridge.stores import partial
from ocibridge.stores.registry import open_repository

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

PLAIN = ocibridge.TransferOptions(plain_http=True)
#: requests of 4 chunks, 4 in flight: a tensor read in many ranges
SMALL_PARTS = ocibridge.TransferOptions(plain_http=True, part_size=4 * DEFAULT_CHUNK_SIZE, parts_in_flight=4)


def large_model(root: Path) -> Path:
    """config.json and one safetensors file just over push's table threshold (its smallest)."""
    root.mkdir(parents=True)
    (root / "config.json").write_text('{"model_type": "test"}')
    big = np.frombuffer(os.urandom(PUSH_THRESHOLD + 4321), np.uint8)
    save_file({"big": big, "small": np.arange(100, dtype=np.float32)}, str(root / "model.safetensors"))
    return root


def test_a_fetched_commit_binds_pushs_chunk_table_and_pull_and_lazy_reads_check_by_it(
        proxied: Proxied, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    model = large_model(tmp_path / "model")
    weights = (model / "model.safetensors").read_bytes()
    up = HfApi(endpoint=proxied.upstream, token=UP_TOKEN)
    up.create_repo("acme/large")
    commit = up.upload_folder(repo_id="acme/large", folder_path=model).oid
    assert proxied.api().model_info("acme/large").sha == commit  # fetched
    proxied.named_main("proxy/acme/large", commit)

    # the manifest binds the table push makes of the file: each chunk's BLAKE3 of its bytes
    manifest = manifest_of(proxied.registry.url, "proxy/acme/large", f"ocibridge-upstream-{commit}")
    (layer,) = [x for x in manifest["layers"] if x["annotations"]["org.opencontainers.image.title"]
                == "model.safetensors"]
    expected = chunk_stream(io.BytesIO(weights), DEFAULT_CHUNK_SIZE, hashes.BLAKE3)
    assert (layer["digest"], layer["size"]) == (expected.digest, len(weights))
    pushes = build_table([expected], DEFAULT_CHUNK_SIZE, hashes.BLAKE3)
    assert manifest["annotations"][ANNOTATION_DIGEST] == pushes.descriptor().digest
    with open_repository(host=proxied.registry.host, repository="proxy/acme/large", plain_http=True) as store:
        table = parse_table(store.fetch_bytes(pushes.descriptor()))
        subject = store.resolve(f"ocibridge-upstream-{commit}")
        assert len(store.referrers(subject, ARTIFACT_TYPE)) == 1  # attached as push attaches it: kept
    assert table.algorithm == hashes.BLAKE3 and list(table.layers) == [expected.digest]
    assert table.layers[expected.digest].chunks == expected.chunks
    # the artifact push hf: makes of the same commit, its table binding included
    pushed = push_hf_manifest(proxied.upstream, proxied.registry, "acme/large", commit, tmp_path)
    assert pushed["annotations"][ANNOTATION_DIGEST] == pushes.descriptor().digest
    as_push_hf_makes(manifest, pushed)

    # a directory pull, under the proxy's signature, checks the layer by the table
    ref = f"{proxied.registry.host}/proxy/acme/large:latest"
    made: list[str] = []
    whole = partial.new_hasher
    monkeypatch.setattr(partial, "new_hasher", lambda digest: (made.append(digest), whole(digest))[1])
    public = str(proxied.root / "keys" / "cosign.pub")
    out = tmp_path / "out"
    assert main(["pull", ref, str(out), "-q", "--plain-http", "--verify-key", public]) == 0
    assert (out / "model.safetensors").read_bytes() == weights
    assert expected.digest not in made, made  # no whole-blob SHA-256 of the layer: the table checked it
    monkeypatch.undo()

    # open_model reads a range by the chunks that cover it, checked by the bound table
    warnings: list[str] = []
    with ocibridge.open_model(ref, transfer=PLAIN, warn=warnings.append, cache=False) as opened:
        assert opened.chain.how.endswith("bound by the manifest") and not warnings
        assert opened.read("model.safetensors", len(weights) - 10) == weights[-10:]
        assert opened.bytes_fetched < 2 * DEFAULT_CHUNK_SIZE  # its last chunk, not the file

    # load_tensors checks every chunk as it lands: a flipped byte names its chunk and tensor
    loaded = ocibridge.load_tensors(ref, transfer=SMALL_PARTS)
    pulled = load_file(str(out / "model.safetensors"))
    assert sorted(loaded) == sorted(pulled) and all(np.array_equal(loaded[k], pulled[k]) for k in pulled)
    header = 8 + int.from_bytes(weights[:8], "little")
    offsets = json.loads(weights[8:header])["big"]["data_offsets"]
    at = header + offsets[0] + 10 * DEFAULT_CHUNK_SIZE + 77  # inside "big", in its file's chunk 10
    chunk = at // DEFAULT_CHUNK_SIZE
    with FaultProxy(proxied.registry) as tampering:
        tampering.add("GET", f"/blobs/{expected.digest}", corrupt_at(at), times=None)
        with pytest.raises(ocibridge.TensorMismatch) as caught:
            ocibridge.load_tensors(f"{tampering.host}/proxy/acme/large:latest", transfer=SMALL_PARTS)
    assert caught.value.tensors == ("big",)
    assert f"chunk {chunk} (bytes {chunk * DEFAULT_CHUNK_SIZE}-" in str(caught.value)
    assert "does not match its digest in the chunk table" in str(caught.value)

