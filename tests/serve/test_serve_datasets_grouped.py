"""A dataset commit of many small files through ``ocibridge serve`` stores the layers ``ocibridge
push`` makes of those files: the shards grouped into one tar layer of the dataset kind (push's
rule: more than 64 files of one kind), the card a raw doc. serve records where each grouped file
lies, so a listing is the manifest alone and a file is read back as a range of its layer, byte for
byte, without the layer fetched whole. The registry's requests are counted by a proxy in front of it.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from huggingface_hub import HfApi, HfFileSystem, hf_hub_download, snapshot_download
from serving import ROOT
from support.faultproxy import FaultProxy, RecordedRequest
from test_serve_datasets import CARD, registry_manifest, serve_process
from test_serve_datasets_library import run_program

from ocibridge.oci.mediatypes import Family, Kind, Variant, layer_media_type
from tests.support.fixtures import new_repo

FILES = 200
NAME = "acme/grouped"
TAR = layer_media_type(Kind.DATASET, Variant.TAR)
LOAD = r"""
import json, sys
from datasets import load_dataset

rows = load_dataset(sys.argv[1], split="train")
print(json.dumps({"rows": rows.num_rows, "total": sum(rows["n"])}))
"""


def shards(root: Path) -> Path:
    """A card and :data:`FILES` small parquet shards of three rows each."""
    (root / "data").mkdir(parents=True)
    (root / "README.md").write_bytes(CARD)
    for i in range(FILES):
        pq.write_table(pa.table({"n": [3 * i, 3 * i + 1, 3 * i + 2]}), root / "data" / f"train-{i:05d}.parquet")
    return root


@pytest.fixture(scope="module")
def counted(registry: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, FaultProxy, Path]]:
    """serve over a proxy that counts the registry's requests: (its URL, its prefix, the proxy, a folder)."""
    root = tmp_path_factory.mktemp("grouped")
    with FaultProxy(registry) as proxy:
        prefix = f"{proxy.host}/{new_repo('grouped')}"
        with serve_process(root, prefix) as url:
            yield url, prefix, proxy, root
        assert "Traceback" not in (root / "serve.log").read_text()


def theirs(proxy: FaultProxy) -> list[RecordedRequest]:
    return [r for r in proxy.requests if f"/datasets/{NAME}/" in r.path]


@pytest.mark.timeout(900)
def test_a_commit_of_many_small_files_is_grouped_as_push_groups_them(counted, registry, tmp_path):
    url, prefix, proxy, _ = counted
    folder = shards(tmp_path / "d")
    hub = HfApi(endpoint=url, token="writer-token")
    hub.create_repo(NAME, repo_type="dataset")
    hub.upload_folder(repo_id=NAME, repo_type="dataset", folder_path=folder)

    manifest, _ = registry_manifest(prefix, f"datasets/{NAME}")
    tars = [layer for layer in manifest["layers"] if layer["mediaType"] == TAR]
    assert len(manifest["layers"]) == 3 and len(tars) == 1, [layer["mediaType"] for layer in manifest["layers"]]

    # a listing is the manifest (and the card, for dataset_info's card data): the tar layer is not
    # fetched, and no request is made a file
    proxy.clear()
    tree = [f.path for f in hub.list_repo_tree(NAME, repo_type="dataset", recursive=True)
            if f.path.endswith(".parquet")]
    info = hub.dataset_info(NAME, files_metadata=True)
    listed = theirs(proxy)
    assert len(tree) == FILES and len(info.siblings or []) == FILES + 2
    assert not [r for r in listed if tars[0]["digest"] in r.path] and len(listed) <= 10, \
        [(r.method, r.path[-80:], r.headers.get("range"), r.response_bytes) for r in listed]
    shas = {s.rfilename: s.lfs.sha256 for s in info.siblings or [] if s.lfs is not None}
    wanted = folder / "data" / "train-00007.parquet"
    assert shas["data/train-00007.parquet"] == hashlib.sha256(wanted.read_bytes()).hexdigest()

    # one file read back: its bytes exactly, by a range of the tar layer, not the layer whole
    proxy.clear()
    got = hf_hub_download(NAME, "data/train-00007.parquet", repo_type="dataset", endpoint=url,
                          token="writer-token", cache_dir=tmp_path / "one")
    assert Path(got).read_bytes() == wanted.read_bytes()
    blobs = [r for r in theirs(proxy) if "/blobs/" in r.path and r.method == "GET"]
    assert blobs and all(r.path.endswith(tars[0]["digest"]) and "range" in r.headers for r in blobs)
    assert sum(r.response_bytes for r in blobs) == wanted.stat().st_size < tars[0]["size"] // 50
    fs = HfFileSystem(endpoint=url, token="writer-token")
    assert fs.cat_file(f"datasets/{NAME}/data/train-00123.parquet") == \
        (folder / "data" / "train-00123.parquet").read_bytes()

    loaded = run_program(LOAD, url, tmp_path, NAME)
    assert loaded == {"rows": 3 * FILES, "total": sum(range(3 * FILES))}

    # ocibridge push of the same files (from the Hugging Face cache): the same data and card layers
    snapshot_download(NAME, repo_type="dataset", endpoint=url, token="writer-token", cache_dir=tmp_path / "hub")
    repo = f"{registry.host}/{new_repo('grouped-push')}"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_CACHE": str(tmp_path / "hub")}
    run = subprocess.run([sys.executable, "-m", "ocibridge", "push", f"hf:datasets/{NAME}", f"{repo}/ds:v1", "-q"],
                         env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    push_manifest, _ = registry_manifest(repo, "ds", "v1")
    served_layers = {layer["digest"]: layer["annotations"] for layer in manifest["layers"]}
    for layer in push_manifest["layers"]:  # every layer push made, byte for byte and as it described it
        assert served_layers.get(layer["digest"]) == layer["annotations"], layer["annotations"]
    # what serve adds: the Hub's .gitattributes (a file of the repository that push leaves out)
    extra = [a[Family.CNAI.filepath_key] for d, a in served_layers.items()
             if d not in {layer["digest"] for layer in push_manifest["layers"]}]
    assert extra == [".gitattributes"]


@pytest.mark.timeout(900)
def test_a_second_commit_keeps_the_grouped_files(counted, tmp_path):
    url, prefix, proxy, _ = counted
    name = "acme/grouped-again"
    folder = shards(tmp_path / "d")
    hub = HfApi(endpoint=url, token="writer-token")
    hub.create_repo(name, repo_type="dataset")
    hub.upload_folder(repo_id=name, repo_type="dataset", folder_path=folder)
    (tmp_path / "more.parquet").write_bytes((folder / "data" / "train-00001.parquet").read_bytes() + b"x")
    proxy.clear()
    hub.upload_file(path_or_fileobj=tmp_path / "more.parquet", path_in_repo="data/extra/more.parquet",
                    repo_id=name, repo_type="dataset")
    # the group written again: the files it keeps read from the old group, fetched whole once
    # (not by two ranges a file, one to hash and one to send: some 400 here); the rest are small blobs
    fetched = [r for r in proxy.requests if f"/datasets/{name}/blobs/" in r.path and r.method == "GET"]
    assert len(fetched) <= 10 and not [r for r in fetched if "range" in r.headers], \
        [(r.path[-20:], r.headers.get("range")) for r in fetched]
    hub.delete_file("data/train-00000.parquet", repo_id=name, repo_type="dataset")

    manifest, _ = registry_manifest(prefix, f"datasets/{name}")
    assert [layer["mediaType"] for layer in manifest["layers"]].count(TAR) == 1
    grouped = json.loads(manifest["annotations"]["io.ocibridge.commit.grouped"])
    assert len(grouped) == FILES  # the shards, one gone and one come (and .gitattributes is none of them)
    for path, source in [("data/train-00150.parquet", folder / "data" / "train-00150.parquet"),
                         ("data/extra/more.parquet", tmp_path / "more.parquet")]:
        got = hf_hub_download(name, path, repo_type="dataset", endpoint=url, token="writer-token",
                              cache_dir=tmp_path / "cache")
        assert Path(got).read_bytes() == source.read_bytes()
    files = set(hub.list_repo_files(name, repo_type="dataset"))
    assert "data/train-00000.parquet" not in files and "data/train-00199.parquet" in files


def test_no_group_holds_a_large_file(counted, tmp_path):
    """A file serve relays to the registry as it arrives (8 MiB and more) is never put in a group:
    the commit keeps one layer a file, rather than send it again inside a tar."""
    url, prefix, _, _ = counted
    name = "acme/grouped-large"
    folder = tmp_path / "d"
    (folder / "data").mkdir(parents=True)
    for i in range(70):
        (folder / "data" / f"part-{i:02d}.jsonl").write_text(f'{{"n": {i}}}\n')
    large = folder / "data" / "large.jsonl"
    large.write_bytes(b'{"n": 0}\n' * (1 << 20))  # 9 MiB
    hub = HfApi(endpoint=url, token="writer-token")
    hub.create_repo(name, repo_type="dataset")
    hub.upload_folder(repo_id=name, repo_type="dataset", folder_path=folder)
    manifest, _ = registry_manifest(prefix, f"datasets/{name}")
    assert len(manifest["layers"]) == 72 and TAR not in {layer["mediaType"] for layer in manifest["layers"]}
    assert "io.ocibridge.commit.grouped" not in manifest["annotations"]
    got = hf_hub_download(name, "data/large.jsonl", repo_type="dataset", endpoint=url, token="writer-token",
                          cache_dir=tmp_path / "cache")
    assert Path(got).read_bytes() == large.read_bytes()
