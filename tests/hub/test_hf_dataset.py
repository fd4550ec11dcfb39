"""Datasets of the Hugging Face cache as OCI artifacts: ``hf:datasets/ORG/NAME`` (the Hub's own URL
form) pushed as a dataset artifact (its files layers of the dataset kind, its card a doc, the
repository type annotation, the card's front matter in the config and annotations), reproducible,
and pulled back into ``datasets--ORG--NAME`` where the real ``datasets`` library loads it offline."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from huggingface_hub import file_download
from support.hubcache import offline_hub_cache

from ocibridge.cli import main
from ocibridge.errors import UsageError
from ocibridge.kinds.hf.locator import parse_hub_reference
from ocibridge.kinds.hf.repotype import REPO_TYPE_KEY
from ocibridge.model.builder import AUTO_GROUP_THRESHOLD
from ocibridge.oci.models import Descriptor
from ocibridge.stores.layout import LayoutStore

COMMIT = "fedcba9876543210fedcba9876543210fedcba98"
CARD = """---
license: cc-by-4.0
language: [en]
task_categories: [text-classification]
pretty_name: Tiny Reviews
tags: [reviews]
configs:
- config_name: default
  data_files:
  - split: train
    path: data/train-*.csv
  - split: test
    path: data/test-*.csv
- config_name: first
  data_files: data/train-00000-*.csv
---
# Tiny reviews
"""
DATASET_MEDIA = "application/vnd.cnai.model.dataset.v1."


@pytest.fixture(autouse=True)
def hub(tmp_path, monkeypatch) -> Path:
    return offline_hub_cache(tmp_path, monkeypatch)  # nothing here may reach the Hub


def make_dataset(root: Path, shards: int = 2) -> Path:
    """A dataset as the Hub keeps one: a card with configs, csv shards under data/."""
    (root / "data").mkdir(parents=True)
    (root / "README.md").write_text(CARD)
    for split in ("train", "test"):
        for i in range(shards):
            rows = "".join(f"{split} row {i}-{n},{(i + n) % 2}\n" for n in range(3))
            (root / "data" / f"{split}-{i:05d}-of-{shards:05d}.csv").write_text("text,label\n" + rows)
    return root


def write_dataset_cache(hub: Path, repo_id: str, src: Path, commit: str = COMMIT) -> Path:
    """Lay ``src`` out as huggingface_hub does after a dataset download, with its own helpers."""
    folder = hub / file_download.repo_folder_name(repo_id=repo_id, repo_type="dataset")
    for path in sorted(p for p in src.rglob("*") if p.is_file()):
        rel = path.relative_to(src).as_posix()
        blob = folder / "blobs" / hashlib.sha256(path.read_bytes()).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(path.read_bytes())
        pointer = Path(file_download._get_pointer_path(str(folder), commit, rel))
        pointer.parent.mkdir(parents=True, exist_ok=True)
        file_download._create_symlink(str(blob), str(pointer), new_blob=False)
    file_download._cache_commit_hash_for_specific_revision(str(folder), "main", commit)
    return folder


def files_of(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def manifest_of(layout: Path, tag: str) -> dict:
    with LayoutStore(layout) as store:
        return json.loads(store.fetch_bytes(store.resolve(tag)))


def config_of(layout: Path, manifest: dict) -> dict:
    with LayoutStore(layout) as store:
        said = manifest["config"]
        return json.loads(store.fetch_bytes(Descriptor(mediaType=said["mediaType"], digest=said["digest"],
                                                       size=said["size"])))


@pytest.mark.parametrize("text, repo_type, repo_id, revision, shown", [
    ("hf:datasets/acme/reviews", "dataset", "acme/reviews", None, "hf:datasets/acme/reviews"),
    ("hf:datasets/acme/reviews@v1.0", "dataset", "acme/reviews", "v1.0", "hf:datasets/acme/reviews@v1.0"),
    ("hf:datasets/squad", "dataset", "squad", None, "hf:datasets/squad"),
    ("hf://datasets/acme/reviews", "dataset", "acme/reviews", None, "hf://datasets/acme/reviews"),
    ("hf:acme/tiny", "model", "acme/tiny", None, "hf:acme/tiny"),
])
def test_the_hub_s_dataset_urls_parse_as_datasets(text, repo_type, repo_id, revision, shown):
    ref = parse_hub_reference(text)
    assert (ref.repo_type, ref.repo_id, ref.revision, str(ref)) == (repo_type, repo_id, revision, shown)
    assert ref.remote == text.startswith("hf://")


@pytest.mark.parametrize("text, words", [
    ("hf:spaces/acme/app", "spaces/ repositories are not models or datasets ocibridge reads"),
    ("hf:datasets", "names no dataset (hf:datasets/ORG/NAME[@REVISION])"),  # nor a model: the name is reserved
    ("hf:datasets/a/b/c", "not a Hugging Face repo id (hf:ORG/NAME[@REVISION], hf:datasets/ORG/NAME[@REVISION])"),
    ("hf:datasets/../x", "hf:datasets/ORG/NAME[@REVISION]"),
])
def test_what_is_no_dataset_or_model_is_one_error(text, words):
    with pytest.raises(UsageError) as raised:
        parse_hub_reference(text)
    said = str(raised.value)
    assert words in said and "\n" not in said, said


def test_a_cached_dataset_pushes_as_a_dataset_artifact(tmp_path, capsys, hub):
    src = make_dataset(tmp_path / "src")
    write_dataset_cache(hub, "acme/reviews", src)
    layout = tmp_path / "layout"
    assert main(["push", "hf:datasets/acme/reviews", f"oci:{layout}:one", "-q"]) == 0
    manifest = manifest_of(layout, "one")
    annotations = manifest["annotations"]
    assert annotations[REPO_TYPE_KEY] == "dataset"
    assert annotations["org.opencontainers.image.source"] == "https://huggingface.co/datasets/acme/reviews"
    assert annotations["org.opencontainers.image.revision"] == COMMIT
    assert annotations["io.ocibridge.card.task_categories"] == "text-classification"
    assert annotations["io.ocibridge.card.pretty_name"] == "Tiny Reviews"
    assert annotations["io.ocibridge.card.tags"] == "reviews"
    assert json.loads(annotations["io.ocibridge.card.configs"]) == [
        {"config_name": "default", "data_files": [{"path": "data/train-*.csv", "split": "train"},
                                                  {"path": "data/test-*.csv", "split": "test"}]},
        {"config_name": "first", "data_files": "data/train-00000-*.csv"}]
    kinds = {layer["annotations"]["org.cnai.model.filepath"]: layer["mediaType"] for layer in manifest["layers"]}
    assert kinds.pop("README.md") == "application/vnd.cnai.model.doc.v1.raw"
    assert sorted(kinds) == sorted(f"data/{p.name}" for p in (src / "data").iterdir())
    assert set(kinds.values()) == {DATASET_MEDIA + "raw"}
    config = config_of(layout, manifest)
    assert config["descriptor"]["licenses"] == ["cc-by-4.0"] and config["descriptor"]["name"] == "reviews"
    assert config["config"]["capabilities"] == {"languages": ["en"]}
    capsys.readouterr()
    assert main(["inspect", f"oci:{layout}:one", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["annotations"][REPO_TYPE_KEY] == "dataset"


def test_kind_overrides_and_the_cncf_names_apply_to_a_dataset(tmp_path, capsys, hub):
    write_dataset_cache(hub, "acme/reviews", make_dataset(tmp_path / "src"))
    layout = tmp_path / "layout"
    assert main(["push", "hf:datasets/acme/reviews", f"oci:{layout}:k", "-q", "--kind", "test-*.csv=doc",
                 "--media-types", "cncf"]) == 0
    layers = manifest_of(layout, "k")["layers"]
    assert all(layer["mediaType"].startswith("application/vnd.cncf.model.") for layer in layers)
    kinds = {layer["annotations"]["org.cncf.model.filepath"]: layer["mediaType"].split(".")[-3] for layer in layers}
    assert kinds == {"README.md": "doc", "data/test-00000-of-00002.csv": "doc", "data/test-00001-of-00002.csv": "doc",
                     "data/train-00000-of-00002.csv": "dataset", "data/train-00001-of-00002.csv": "dataset"}


def test_a_dataset_push_is_reproducible(tmp_path, capsys, hub, monkeypatch):
    src = make_dataset(tmp_path / "src")
    folder = write_dataset_cache(hub, "acme/reviews", src)
    layout = tmp_path / "layout"
    assert main(["push", "hf:datasets/acme/reviews", f"oci:{layout}:one", "-q"]) == 0
    for blob in (folder / "blobs").iterdir():  # another day, other file times
        os.utime(blob, (1_900_000_000, 1_900_000_000))
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1900000000")
    assert main(["push", f"hf:datasets/acme/reviews@{COMMIT}", f"oci:{layout}:two", "-q"]) == 0
    assert manifest_of(layout, "one") == manifest_of(layout, "two")
    with LayoutStore(layout) as store:
        assert store.resolve("one").digest == store.resolve("two").digest


def test_a_model_and_a_dataset_of_one_name_stay_apart(tmp_path, capsys, hub):
    """acme/reviews the dataset and acme/reviews the model are two folders of the cache and two artifacts."""
    src = make_dataset(tmp_path / "src")
    write_dataset_cache(hub, "acme/reviews", src)
    layout = tmp_path / "layout"
    code = main(["push", "hf:acme/reviews", f"oci:{layout}:m", "-q"])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and "hf:acme/reviews: not in the Hugging Face cache" in err
    assert not (hub / "models--acme--reviews").exists()
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "bert"}')
    assert main(["push", str(model), f"oci:{layout}:model", "-q"]) == 0
    assert main(["pull", f"oci:{layout}:model", "hf:acme/reviews", "-q"]) == 0
    assert main(["push", "hf:acme/reviews", f"oci:{layout}:m", "-q"]) == 0
    assert main(["push", "hf:datasets/acme/reviews", f"oci:{layout}:d", "-q"]) == 0
    as_model, as_dataset = manifest_of(layout, "m"), manifest_of(layout, "d")
    assert REPO_TYPE_KEY not in as_model["annotations"] and as_dataset["annotations"][REPO_TYPE_KEY] == "dataset"
    assert as_model["annotations"]["org.opencontainers.image.source"] == "https://huggingface.co/acme/reviews"
    assert len(as_model["layers"]) == 1 and len(as_dataset["layers"]) == 5


def load_offline(hub: Path, tmp_path: Path, repo_id: str, *configs: tuple[str, ...]) -> list[dict]:
    """``datasets.load_dataset`` of the dataset ``repo_id`` of the Hub cache ``hub``, found by repo id
    with huggingface_hub, in a fresh python, offline, once for each of ``configs`` (the arguments after
    the path; default: none). (Offline, ``load_dataset("ORG/NAME")`` reads only the library's own
    prepared cache, never the Hub cache: datasets 5's load.py refuses first.)"""
    script = ("import json, sys, datasets, huggingface_hub as h; "
              "p = h.snapshot_download(sys.argv[1], repo_type='dataset', local_files_only=True)\n"
              "for args in json.loads(sys.argv[2]):\n"
              "    d = datasets.load_dataset(p, *args); print(json.dumps({s: d[s].to_list() for s in d}))")
    env = {**os.environ, "HF_HUB_CACHE": str(hub), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "HF_DATASETS_CACHE": str(tmp_path / "datasets-cache"), "HF_HOME": str(tmp_path / "hf-home-load")}
    asked = [list(c) for c in configs] or [[]]
    done = subprocess.run([sys.executable, "-c", script, repo_id, json.dumps(asked)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.strip().splitlines()[-len(asked):]]


def test_a_pulled_dataset_loads_offline_with_the_datasets_library(tmp_path, capsys, hub, registry, unique_repo):
    src = make_dataset(tmp_path / "src")
    write_dataset_cache(hub, "acme/reviews", src)
    ref = f"{registry.host}/{unique_repo}:data"
    assert main(["push", "hf:datasets/acme/reviews", ref, "-q"]) == 0
    assert main(["pull", ref, "hf:datasets/acme/copy", "-q"]) == 0
    folder = hub / "datasets--acme--copy"
    assert (folder / "refs" / "main").read_text() == COMMIT
    assert files_of(folder / "snapshots" / COMMIT) == files_of(src)  # byte for byte
    assert not (hub / "models--acme--copy").exists()
    loaded, first = load_offline(hub, tmp_path, "acme/copy", (), ("first",))  # and a config of the card
    assert sorted(loaded) == ["test", "train"]
    assert loaded["train"][0] == {"text": "train row 0-0", "label": 0} and len(loaded["train"]) == 6
    assert loaded["test"][-1] == {"text": "test row 1-2", "label": 1} and len(loaded["test"]) == 6
    assert list(first) == ["train"] and [r["text"] for r in first["train"]] == [f"train row 0-{n}" for n in range(3)]


def test_a_dataset_of_more_shards_than_push_groups_round_trips(tmp_path, capsys, hub, registry, unique_repo):
    """Many small shards: more than push groups by default (one tar layer of the dataset kind, so the
    manifest stays small) and, with --no-auto-group, one layer each; both come back byte for byte."""
    shards = AUTO_GROUP_THRESHOLD // 2 + 8  # train's and test's shards together: more than push leaves ungrouped
    src = make_dataset(tmp_path / "src", shards=shards)
    write_dataset_cache(hub, "acme/many", src)
    grouped, single = f"{registry.host}/{unique_repo}:grouped", f"{registry.host}/{unique_repo}:single"
    assert main(["push", "hf:datasets/acme/many", grouped, "-q"]) == 0
    assert main(["push", "hf:datasets/acme/many", single, "-q", "--no-auto-group"]) == 0
    capsys.readouterr()
    layers = {}
    for ref in (grouped, single):
        assert main(["inspect", ref, "--json"]) == 0
        layers[ref] = [layer["mediaType"] for layer in json.loads(capsys.readouterr().out)["layers"]]
    assert sorted(layers[grouped]) == [DATASET_MEDIA + "tar", "application/vnd.cnai.model.doc.v1.raw"]
    assert len(layers[single]) == 2 * shards + 1 and layers[single].count(DATASET_MEDIA + "raw") == 2 * shards
    for ref, name in ((grouped, "acme/grouped"), (single, "acme/single")):
        assert main(["pull", ref, f"hf:datasets/{name}", "-q"]) == 0
        assert files_of(hub / f"datasets--{name.replace('/', '--')}" / "snapshots" / COMMIT) == files_of(src)
    (loaded,) = load_offline(hub, tmp_path, "acme/grouped")
    assert len(loaded["train"]) == len(loaded["test"]) == 3 * shards


def test_a_dataset_travels_as_a_model_does(tmp_path, capsys, hub, registry, unique_repo):
    """push -> registry -> sign -> copy with its signature -> verify there -> inspect says dataset -> cat a
    shard -> pull into the Hub cache: the commands take a dataset as they take a model."""
    from signing_keys import key_pair

    src = make_dataset(tmp_path / "src")
    write_dataset_cache(hub, "acme/reviews", src)
    private, public = key_pair(tmp_path / "k")
    ref, copied = f"{registry.host}/{unique_repo}:v1", f"{registry.host}/{unique_repo}-copy:v1"
    assert main(["push", "hf:datasets/acme/reviews", ref, "-q"]) == 0
    assert main(["sign", ref, "--key", str(private)]) == 0
    assert main(["copy", "-r", ref, copied, "-q"]) == 0
    capsys.readouterr()
    assert main(["verify", copied, "--key", str(public)]) == 0
    assert main(["inspect", copied]) == 0
    shown = capsys.readouterr().out
    assert "Holds:         a dataset (pull it into the Hugging Face cache as hf:datasets/ORG/NAME)" in shown
    assert "annotation io.ocibridge.card.task_categories: text-classification" in shown
    assert main(["cat", copied, "data/train-00001-of-00002.csv"]) == 0
    assert capsys.readouterr().out == (src / "data" / "train-00001-of-00002.csv").read_text()
    assert main(["pull", copied, "hf:datasets/acme/signed", "-q", "--verify-key", str(public)]) == 0
    assert files_of(hub / "datasets--acme--signed" / "snapshots" / COMMIT) == files_of(src)
    capsys.readouterr()
    assert main(["path", copied, "--hf", "datasets/acme/by-path"]) == 0  # the shared cache's snapshot, linked
    assert files_of(Path(capsys.readouterr().out.strip())) == files_of(src)
    assert files_of(hub / "datasets--acme--by-path" / "snapshots" / COMMIT) == files_of(src)
    assert main(["copy", "hf:datasets/acme/reviews", f"oci:{tmp_path / 'layout'}:c", "-q"]) == 0
    capsys.readouterr()
    assert main(["inspect", f"oci:{tmp_path / 'layout'}:c", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["repoType"] == "dataset"


def test_a_mounted_dataset_loads_with_the_datasets_library(tmp_path, capsys, hub, registry, unique_repo):
    """``ocibridge mount`` of a dataset (its shards grouped in a tar layer): the tree is the
    dataset's, and ``load_dataset`` of the mount reads the card's configs and every row."""
    from mounting import Mount, mount_env

    src = make_dataset(tmp_path / "src", shards=40)  # 80 shards: grouped into one layer by default
    write_dataset_cache(hub, "acme/mounted", src)
    ref = f"{registry.host}/{unique_repo}:m"
    assert main(["push", "hf:datasets/acme/mounted", ref, "-q"]) == 0
    base = tmp_path / "mount"
    with Mount(ref, base / "mnt", mount_env(base), base / "mount.log") as mounted:
        assert files_of(mounted.where) == files_of(src)
        script = ("import json, sys, datasets; d = datasets.load_dataset(sys.argv[1], 'first'); "
                  "print(json.dumps(d['train'].to_list()))")
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_CACHE": str(tmp_path / "datasets-cache")}
        done = subprocess.run([sys.executable, "-c", script, str(mounted.where)], env=env, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        rows = json.loads(done.stdout.strip().splitlines()[-1])
        assert [r["text"] for r in rows] == [f"train row 0-{n}" for n in range(3)]


def test_the_python_api_takes_datasets_as_the_command_line_does(tmp_path, hub):
    import ocibridge

    src = make_dataset(tmp_path / "src")
    write_dataset_cache(hub, "acme/reviews", src)
    layout = f"oci:{tmp_path / 'layout'}:api"
    pushed = ocibridge.push("hf:datasets/acme/reviews", layout)
    info = ocibridge.inspect(layout)
    assert info.digest == pushed.descriptor.digest and info.as_dict()["repoType"] == "dataset"
    ocibridge.pull(layout, "hf:datasets/acme/via-api")
    assert files_of(hub / "datasets--acme--via-api" / "snapshots" / COMMIT) == files_of(src)
