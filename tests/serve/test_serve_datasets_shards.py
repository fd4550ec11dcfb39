"""A dataset of many small shards through ``ocibridge serve`` (issue 104): created with one
``upload_folder``, listed (the recursive tree, dataset_info) and loaded with ``load_dataset``, the
registry's requests counted by a proxy in front of it. A listing is one manifest read, not a request
per file; a load fetches each shard's blob once and nothing else per file.

The suite runs :data:`SHARDS` shards; ``OCIBRIDGE_DATASET_SHARDS=2000`` runs the issue's figure.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from huggingface_hub import HfApi
from support.faultproxy import FaultProxy
from test_serve_datasets import serve_process
from test_serve_datasets_library import run_program

from tests.support.fixtures import new_repo

SHARDS = int(os.environ.get("OCIBRIDGE_DATASET_SHARDS", "300"))

LOAD = r"""
import json, sys
from datasets import load_dataset

rows = load_dataset(sys.argv[1], split="train")
print(json.dumps({"rows": rows.num_rows, "first": rows[0], "total": sum(rows["n"])}))
"""


def shards(root: Path, count: int) -> Path:
    """``count`` jsonl shards of two rows each under data/, in directories of 500."""
    for i in range(count):
        folder = root / "data" / f"part-{i // 500:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        rows = [json.dumps({"n": 2 * i}), json.dumps({"n": 2 * i + 1})]
        (folder / f"shard-{i:05d}.jsonl").write_text("\n".join(rows) + "\n")
    return root


@contextlib.contextmanager
def counted_serve(registry: Any, root: Path) -> Iterator[tuple[str, FaultProxy]]:
    """serve over a proxy in front of the registry: (serve's URL, the proxy that counts)."""
    with FaultProxy(registry) as proxy, serve_process(root, f"{proxy.host}/{new_repo('shards')}") as url:
        yield url, proxy


#: the dataset's registry repository, under the prefix: the requests counted are its own (serve's
#: writer lease renews itself on a timer, whatever is asked)
MANY = "/datasets/acme/many/"


def registry_requests(proxy: FaultProxy) -> dict[str, int]:
    """The registry's requests for the dataset since the proxy was cleared, by what they asked for."""
    counts: dict[str, int] = {}
    for r in (r for r in proxy.requests if MANY in r.path):
        what = "blob" if "/blobs/" in r.path else "manifest" if "/manifests/" in r.path else \
            "tags" if "/tags/list" in r.path else "other"
        counts[f"{r.method} {what}"] = counts.get(f"{r.method} {what}", 0) + 1
    return counts


@pytest.mark.timeout(900)  # a few hundred blobs up and down, on a machine the suite shares
def test_many_shards_one_upload_one_listing(registry, tmp_path):
    folder = shards(tmp_path / "d", SHARDS)
    with counted_serve(registry, tmp_path) as (url, proxy):
        hub = HfApi(endpoint=url, token="writer-token")
        hub.create_repo("acme/many", repo_type="dataset")
        proxy.clear()
        started = time.monotonic()
        hub.upload_folder(repo_id="acme/many", repo_type="dataset", folder_path=folder)
        uploaded, took = registry_requests(proxy), [time.monotonic() - started]
        proxy.clear()
        tree = [f.path for f in hub.list_repo_tree("acme/many", repo_type="dataset", recursive=True)
                if f.path.endswith(".jsonl")]
        info = hub.dataset_info("acme/many")
        listed = registry_requests(proxy)
        took.append(time.monotonic() - started - sum(took))
        proxy.clear()
        loaded = run_program(LOAD, url, tmp_path, "acme/many")
        load = registry_requests(proxy)
        took.append(time.monotonic() - started - sum(took))
    print(f"{SHARDS} shards (seconds: upload, listing, load {[round(t, 1) for t in took]}): "
          f"upload {uploaded}; listing {listed}; load {load}")
    assert len(tree) == SHARDS and len(info.siblings or []) == SHARDS + 1  # and .gitattributes
    assert loaded["rows"] == 2 * SHARDS and loaded["total"] == sum(range(2 * SHARDS))
    # a listing is the manifest, once: no request per file (the tree pages and dataset_info together)
    assert sum(listed.values()) <= 10, listed
    # a load reads each shard's blob once, and per file nothing else: the dataset's tags and refs
    # record are asked again only as serve's few seconds of keeping them run out
    assert load.get("GET blob", 0) <= SHARDS + 5, load
    assert sum(n for what, n in load.items() if what != "GET blob") < SHARDS // 2, load
