"""The model card's metadata (issue 63 item 2): README.md's front matter (license, base_model, tags,
pipeline_tag, language) reaches the ModelPack config and annotations on ``push`` and on a commit
published through serve, ``model_info().card_data`` gives it back as the Hub does, and the catalog
shows the license. A README without front matter changes nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import pytest
import yaml
from huggingface_hub import HfApi
from serve_processes import running

from ocibridge.model.cardmeta import card_data, card_fields
from ocibridge.stores.layout import LayoutStore
from tests.modelgen import make_bert_model

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning")

CARD = """---
license: apache-2.0
base_model: acme/base-7b
tags:
- text-generation
- tiny
pipeline_tag: text-generation
language:
- en
- fr
- multilingual
library_name: transformers
---
# tiny

A tiny model.
"""
FRONT = {"license": "apache-2.0", "base_model": "acme/base-7b", "tags": ["text-generation", "tiny"],
         "pipeline_tag": "text-generation", "language": ["en", "fr"]}


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ocibridge", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def artifact(layout: Path, name: str) -> tuple[dict, dict]:
    """(manifest, config) of ``name`` in the layout."""
    store = LayoutStore(layout)
    manifest = json.loads(store.fetch_bytes(store.resolve(name)))
    config = json.loads((layout / "blobs" / "sha256" / manifest["config"]["digest"].split(":")[1]).read_bytes())
    return manifest, config


def test_push_maps_the_front_matter_and_a_card_without_one_changes_nothing(tmp_path):
    LayoutStore(tmp_path / "lay", create=True)
    plain = make_bert_model(tmp_path / "plain")
    carded = make_bert_model(tmp_path / "carded")
    (carded / "README.md").write_text(CARD)
    bare = make_bert_model(tmp_path / "bare")
    (bare / "README.md").write_text("# tiny\n\nNo front matter.\n")
    for src in (plain, carded, bare):
        done = cli("push", str(src), f"oci:{tmp_path}/lay:acme/{src.name}:latest", "-q")
        assert done.returncode == 0, done.stderr
    manifest, config = artifact(tmp_path / "lay", "acme/carded:latest")
    assert config["descriptor"]["licenses"] == ["apache-2.0"]
    assert config["config"]["capabilities"] == {"languages": ["en", "fr"]}  # 'multilingual' is no ISO 639-1 code
    assert manifest["annotations"]["io.ocibridge.card.base_model"] == "acme/base-7b"
    assert manifest["annotations"]["io.ocibridge.card.tags"] == "text-generation,tiny"
    assert manifest["annotations"]["io.ocibridge.card.pipeline_tag"] == "text-generation"
    assert card_data(config, manifest["annotations"]) == FRONT
    done = cli("validate", f"oci:{tmp_path}/lay:acme/carded:latest")
    assert done.returncode == 0, done.stdout + done.stderr
    # no front matter: the config and the annotations are those of a model without a README
    bare_manifest, bare_config = artifact(tmp_path / "lay", "acme/bare:latest")
    plain_manifest, plain_config = artifact(tmp_path / "lay", "acme/plain:latest")
    assert {k: v for k, v in bare_config["descriptor"].items() if k != "name"} == \
           {k: v for k, v in plain_config["descriptor"].items() if k != "name"}
    assert bare_config["config"] == plain_config["config"]
    assert not any(k.startswith("io.ocibridge.card.") for k in bare_manifest.get("annotations") or {})


def test_hostile_front_matter_is_left_out_not_a_failure():
    assert card_fields({"license": {"a": 1}, "tags": ["x" * 300, 5, "ok", "a,b"], "language": "EN",
                        "base_model": None}) == ({}, {"capabilities": {"languages": ["en"]}},
                                                 {"io.ocibridge.card.tags": "ok"})
    assert card_fields({"license": "other", "license_name": "acme-license"})[0] == {"licenses": ["acme-license"]}


def test_publish_through_serve_maps_the_card_and_model_info_returns_card_data(registry, tmp_path):
    prefix = f"{registry.host}/test/{uuid.uuid4().hex[:8]}"
    src = make_bert_model(tmp_path / "tiny")
    (src / "README.md").write_text(CARD)
    with running(tmp_path / "serve", prefix, "--xet-min-size", "off") as served:
        api = HfApi(endpoint=served.url, token="writer-token")
        api.create_repo("acme/carded")
        api.upload_folder(repo_id="acme/carded", folder_path=src, commit_message="with a card")
        info = api.model_info("acme/carded")
        # the card's whole front matter, as the Hub gives it (not only what the artifact maps)
        assert info.card_data is not None and info.card_data.to_dict() == yaml.safe_load(CARD.split("---")[1])
        assert info.pipeline_tag == "text-generation" and info.library_name == "transformers"
        # the card's tags, then the ones the Hub derives: the library, the weights' format, model_type
        assert info.tags == ["text-generation", "tiny", "transformers", "safetensors", "bert"]
        assert info.config == {"model_type": "bert"}  # (its config.json names no architectures)
        login = httpx.post(f"{served.url}/ocibridge/login", data={"token": "reader-token", "next": "/"})
        page = httpx.get(f"{served.url}/", cookies={"ocibridge_session": login.cookies["ocibridge_session"]})
        assert page.status_code == 200 and "license apache-2.0" in page.text, page.text
    done = cli("inspect", f"{prefix}/acme/carded:latest", "--json", "--plain-http")
    assert done.returncode == 0, done.stderr
    assert "apache-2.0" in done.stdout
