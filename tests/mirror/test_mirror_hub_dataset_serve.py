"""A mirror job's ``hf://datasets/ORG/NAME`` entry against a real ``ocibridge serve`` (the Hub
here), not a stand-in: a dataset of parquet files published through serve with huggingface_hub's
``upload_folder``, mirrored by a YAML job into another registry repository, is there file for
file (each file a layer of exactly its bytes, of the dataset media types), and ``load_dataset``
through a second serve over the mirror, and offline from a pull of it into a Hugging Face cache,
gives the rows that were published."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from huggingface_hub import HfApi
from serving import point_hub_at, serving

from ocibridge.cli import main
from ocibridge.hubserver.repo.publishing import Publishing
from ocibridge.mirror import load_job, run_job
from ocibridge.oci.mediatypes import Family
from ocibridge.oci.models import parse_manifest_bytes
from ocibridge.oci.reference import parse_registry_reference
from ocibridge.stores.registry import open_repository

TRAIN = {"text": ["hello", "oci", "world"], "label": [1, 0, 1]}
TEST = {"text": ["held", "out"], "label": [0, 0]}
CARD = (b"---\nlicense: mit\ntask_categories: [text-classification]\nconfigs:\n- config_name: default\n"
        b"  data_files:\n  - split: train\n    path: data/train-*.parquet\n"
        b"  - split: test\n    path: data/test-*.parquet\n---\n# rows\n")

LOAD = r"""
import json, sys
from datasets import load_dataset
from huggingface_hub import snapshot_download
offline = sys.argv[2] == "True"
loaded = load_dataset(snapshot_download(sys.argv[1], repo_type="dataset") if offline else sys.argv[1])
print(json.dumps({split: loaded[split].to_dict() for split in loaded}))
"""


def parquet(rows: dict[str, list[Any]]) -> bytes:
    out = io.BytesIO()
    pq.write_table(pa.table(rows), out)
    return out.getvalue()


def dataset_folder(root: Path) -> dict[str, bytes]:
    """A dataset as push_to_hub lays one out: a card naming its splits, one parquet shard each."""
    files = {"README.md": CARD, "data/train-00000-of-00001.parquet": parquet(TRAIN),
             "data/test-00000-of-00001.parquet": parquet(TEST)}
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return files


def load_rows(endpoint: str, repo: str, root: Path, offline: bool = False) -> dict[str, Any]:
    """``load_dataset(repo)`` in a process of its own with ``HF_ENDPOINT`` at ``endpoint``, as a user
    runs it; ``offline``: ``HF_HUB_OFFLINE=1``, loading the Hub cache's snapshot of it."""
    env = {**os.environ, "HF_ENDPOINT": endpoint, "HF_HUB_CACHE": str(root / "hub"),
           "HF_DATASETS_CACHE": str(root / "datasets"), "HF_HUB_DISABLE_TELEMETRY": "1",
           "HF_HUB_DISABLE_PROGRESS_BARS": "1", "HF_DATASETS_DISABLE_PROGRESS_BARS": "1"}
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HF_TOKEN"):
        env.pop(name, None)
    if offline:
        env["HF_HUB_OFFLINE"] = "1"
    run = subprocess.run([sys.executable, "-c", LOAD, repo, str(offline)], env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-4000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_a_dataset_published_through_serve_is_mirrored_byte_for_byte_and_loads(tmp_path, monkeypatch, registry,
                                                                                unique_repo):
    hub_prefix = f"{registry.host}/{unique_repo}/hub"
    mirror_prefix = f"{registry.host}/{unique_repo}/mirror"
    target = f"{mirror_prefix}/datasets/acme/rows"
    files = dataset_folder(tmp_path / "rows")
    with serving([hub_prefix], tokens=("writer-token write * ci-bot",), publish=Publishing()) as hub:
        point_hub_at(monkeypatch, hub.url, tmp_path / "hf-home" / "hub", xet=True)  # hf_xet on, as users run
        api = HfApi(endpoint=hub.url, token="writer-token")
        api.create_repo("acme/rows", repo_type="dataset")
        commit = api.upload_folder(repo_id="acme/rows", repo_type="dataset", folder_path=tmp_path / "rows").oid
        published = {f: api.hf_hub_download("acme/rows", f, repo_type="dataset", revision=commit,
                                             cache_dir=tmp_path / "check")
                     for f in api.list_repo_files("acme/rows", repo_type="dataset", revision=commit)}
        monkeypatch.setenv("MIRROR_HUB_TOKEN", "writer-token")
        job = tmp_path / "job.yaml"
        job.write_text(f"defaults:\n  endpoint: {hub.url}\n  token_env: MIRROR_HUB_TOKEN\n"
                       f"sync:\n  - source: hf://datasets/acme/rows\n    target: {target}\n")
        summary = run_job(load_job(job))
        assert summary.exit_code == 0, summary.format_text()
        assert [a.target for a in summary.with_status("copied")] == [f"{target}:main-{commit[:12]}"]
        assert hub.requests and not any(path.startswith("/api/models/") for _, path in hub.requests), hub.requests
        again = run_job(load_job(job))  # nothing new on the Hub: nothing moves
        assert [a.status for a in again.artifacts] == ["skipped"], again.format_text()
    assert set(published) == {*files, ".gitattributes"}  # what serve holds: the folder, and its first commit's

    store = open_repository(parse_registry_reference(target))
    assert sorted(store.tags()) == ["main", f"main-{commit[:12]}"]
    desc = store.resolve("main")
    manifest = parse_manifest_bytes(store.fetch_bytes(desc), desc.mediaType)
    said = manifest.annotations or {}
    assert said["io.ocibridge.hf.repo-type"] == "dataset"
    assert said["org.opencontainers.image.revision"] == commit
    assert said["io.ocibridge.card.task_categories"] == "text-classification"
    layers = {(layer.annotations or {})[Family.CNAI.filepath_key]: layer for layer in manifest.layers}
    assert set(layers) == set(files)  # the commit's files less .gitattributes, as push hf: builds it
    for name, data in files.items():  # each a layer of exactly the bytes published, and serve gave
        assert store.fetch_bytes(layers[name]) == data == Path(published[name]).read_bytes(), name
    kinds = {name: layer.mediaType for name, layer in layers.items()}
    assert kinds["data/train-00000-of-00001.parquet"] == "application/vnd.cnai.model.dataset.v1.raw"
    assert kinds["data/test-00000-of-00001.parquet"] == "application/vnd.cnai.model.dataset.v1.raw"
    assert kinds["README.md"] == "application/vnd.cnai.model.doc.v1.raw"

    with serving([mirror_prefix], default_tag="main") as second:
        rows = load_rows(second.url, "acme/rows", tmp_path / "load")
    assert rows == {"train": TRAIN, "test": TEST}
    # pulled into a Hugging Face cache of its own, it loads offline with the same rows
    offline = tmp_path / "offline"
    monkeypatch.setenv("HF_HUB_CACHE", str(offline / "hub"))
    assert main(["pull", f"{target}:main", "hf:datasets/acme/rows", "-q"]) == 0
    assert load_rows("http://127.0.0.1:9", "acme/rows", offline, offline=True) == rows
