"""The ``datasets`` library, unchanged, through ``ocibridge serve`` over the real registry (issue
104): ``push_to_hub`` then ``load_dataset`` (parquet; ``split=``, a second push adding a split and a
config, ``streaming=True``, a revision), csv and json datasets uploaded with ``upload_folder``
(``data_files=``, configs from the card's front matter), as a user runs it: ``HF_ENDPOINT`` at
serve, a token, the caches in temporary directories (the library reads ``HF_ENDPOINT`` when
imported: each program runs in a process of its own). The parquet files ``push_to_hub`` wrote are
the registry's dataset layers, byte for byte."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_serve_datasets import registry_manifest, serve_process

from ocibridge.oci.mediatypes import Family
from ocibridge.oci.models import Descriptor
from tests.support.fixtures import new_repo

#: push_to_hub twice (a split, then a config), load each way; prints what it saw, and the SHA-256
#: of every file push_to_hub committed (read from its commit operations, as it sent them)
PUSH_AND_LOAD = r"""
import json, sys
import huggingface_hub
from huggingface_hub import HfApi, hf_api
from datasets import Dataset, load_dataset

repo = sys.argv[1]
sent = {}
real_commit = hf_api.HfApi.create_commit

def recording(self, repo_id, operations, *args, **kwargs):
    for op in operations:
        if isinstance(op, huggingface_hub.CommitOperationAdd):
            sent[op.path_in_repo] = op.upload_info.sha256.hex()
    return real_commit(self, repo_id, operations, *args, **kwargs)

hf_api.HfApi.create_commit = recording
rows = {"text": ["hello", "oci", "world"], "label": [1, 0, 1]}
Dataset.from_dict(rows).push_to_hub(repo)
first = HfApi().dataset_info(repo).sha
out = {"first": first}
out["loaded"] = load_dataset(repo)["train"].to_dict()
out["split"] = list(load_dataset(repo, split="train")["label"])
Dataset.from_dict({"text": ["held", "out"], "label": [0, 0]}).push_to_hub(repo, split="test")
Dataset.from_dict({"other": [7, 8, 9, 10]}).push_to_hub(repo, config_name="numbers")
both = load_dataset(repo)
out["splits"] = {name: both[name].num_rows for name in both}
out["config"] = list(load_dataset(repo, "numbers", split="train")["other"])
out["streamed"] = [row["text"] for row in load_dataset(repo, split="test", streaming=True)]
old = load_dataset(repo, revision=first)
out["at_first"] = sorted(old)
out["sent"] = sent
print(json.dumps(out))
"""

#: csv and json datasets uploaded as folders, loaded by their files' names, by data_files=, and
#: by the configs their card names
FOLDERS = r"""
import json, sys
from huggingface_hub import HfApi
from datasets import load_dataset

root, csv_repo, json_repo, config_repo = sys.argv[1:5]
api = HfApi()
for repo, folder in ((csv_repo, "csv"), (json_repo, "json"), (config_repo, "configs")):
    api.create_repo(repo, repo_type="dataset")
    api.upload_folder(repo_id=repo, repo_type="dataset", folder_path=f"{root}/{folder}")
out = {}
csv = load_dataset(csv_repo)
out["csv"] = {name: csv[name].to_dict() for name in csv}
out["data_files"] = list(load_dataset(csv_repo, data_files="data/test.csv", split="train")["word"])
out["json"] = load_dataset(json_repo, split="train").to_dict()
out["first"] = list(load_dataset(config_repo, "first", split="train")["word"])
out["second"] = {name: list(d["n"]) for name, d in load_dataset(config_repo, "second").items()}
print(json.dumps(out))
"""


def run_program(program: str, url: str, root: Path, *args: str) -> dict[str, Any]:
    """``program`` in a process of its own, as a user runs it against serve; what it printed."""
    env = {**os.environ, "HF_ENDPOINT": url, "HF_TOKEN": "writer-token", "HF_HUB_CACHE": str(root / "hub"),
           "HF_DATASETS_CACHE": str(root / "datasets"), "HF_HUB_DISABLE_TELEMETRY": "1",
           "HF_HUB_DISABLE_PROGRESS_BARS": "1", "HF_DATASETS_DISABLE_PROGRESS_BARS": "1"}
    env.pop("HF_HUB_OFFLINE", None)
    env.pop("HF_DATASETS_OFFLINE", None)
    run = subprocess.run([sys.executable, "-c", program, *args], env=env, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-4000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def served(registry: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    root = tmp_path_factory.mktemp("datasets-library")
    prefix = f"{registry.host}/{new_repo('dslib')}"
    with serve_process(root, prefix) as url:
        yield url, prefix
    assert "Traceback" not in (root / "serve.log").read_text()


def test_push_to_hub_and_load_dataset(served, tmp_path):
    url, prefix = served
    seen = run_program(PUSH_AND_LOAD, url, tmp_path, "acme/rows")
    assert seen["loaded"] == {"text": ["hello", "oci", "world"], "label": [1, 0, 1]}
    assert seen["split"] == [1, 0, 1]
    assert seen["splits"] == {"train": 3, "test": 2}
    assert seen["config"] == [7, 8, 9, 10]
    assert seen["streamed"] == ["held", "out"]
    assert seen["at_first"] == ["train"]  # the revision of the first push: no test split yet
    # the registry holds what push_to_hub wrote: each parquet file a dataset layer of its bytes
    manifest, _ = registry_manifest(prefix, "datasets/acme/rows")
    assert manifest["annotations"]["io.ocibridge.hf.repo-type"] == "dataset"
    layers = {layer["annotations"][Family.CNAI.filepath_key]: layer for layer in manifest["layers"]}
    parquet = {path: sha for path, sha in seen["sent"].items() if path.endswith(".parquet")}
    assert len(parquet) == 3  # train, test, numbers/train
    for path, sha in parquet.items():
        assert layers[path]["digest"] == f"sha256:{sha}", path
        assert layers[path]["mediaType"] == "application/vnd.cnai.model.dataset.v1.raw", path
    assert layers["README.md"]["mediaType"] == "application/vnd.cnai.model.doc.v1.raw"


def test_csv_json_data_files_and_configs_of_the_card(served, tmp_path):
    url, prefix = served
    (tmp_path / "csv" / "data").mkdir(parents=True)
    (tmp_path / "csv" / "data" / "train.csv").write_text("word,n\nalpha,1\nbeta,2\n")
    (tmp_path / "csv" / "data" / "test.csv").write_text("word,n\ngamma,3\n")
    (tmp_path / "json").mkdir()
    (tmp_path / "json" / "rows.jsonl").write_text('{"q": "why", "a": 42}\n{"q": "how", "a": 7}\n')
    (tmp_path / "configs" / "one").mkdir(parents=True)
    (tmp_path / "configs" / "two").mkdir()
    (tmp_path / "configs" / "one" / "x.csv").write_text("word\ndelta\n")
    (tmp_path / "configs" / "two" / "train.csv").write_text("n\n1\n2\n")
    (tmp_path / "configs" / "two" / "dev.csv").write_text("n\n3\n")
    (tmp_path / "configs" / "README.md").write_text(
        "---\nlicense: apache-2.0\ntask_categories:\n- text-classification\nconfigs:\n"
        "- config_name: first\n  data_files: one/*.csv\n"
        "- config_name: second\n  data_files:\n  - split: train\n    path: two/train.csv\n"
        "  - split: validation\n    path: two/dev.csv\n---\n# configs\n")
    seen = run_program(FOLDERS, url, tmp_path, str(tmp_path), "acme/words", "acme/qa", "acme/configs")
    assert seen["csv"] == {"train": {"word": ["alpha", "beta"], "n": [1, 2]}, "test": {"word": ["gamma"], "n": [3]}}
    assert seen["data_files"] == ["gamma"]
    assert seen["json"] == {"q": ["why", "how"], "a": [42, 7]}
    assert seen["first"] == ["delta"]
    assert seen["second"] == {"train": [1, 2], "validation": [3]}
    # the card's license in the artifact's config, as a model card's is
    manifest, store = registry_manifest(prefix, "datasets/acme/configs")
    config = json.loads(store.fetch_bytes(Descriptor.model_validate(manifest["config"])))
    assert config["descriptor"]["licenses"] == ["apache-2.0"]
    assert manifest["annotations"]["io.ocibridge.card.task_categories"] == "text-classification"
    assert [c["config_name"] for c in json.loads(manifest["annotations"]["io.ocibridge.card.configs"])] == \
        ["first", "second"]
