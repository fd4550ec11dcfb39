"""Publishing through ``ocibridge serve`` run as a process, as tests in several folders do: the
serve (with writer tokens), a small model to upload, what a tag points at, and a serve that
signs and attests every commit. Kept here, not in a test module of tests/serve: a test file
elsewhere run alone cannot import a sibling folder's test modules by their bare names."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import huggingface_hub
import pytest
from huggingface_hub import HfApi
from serving import ROOT, point_hub_at, serve_as_process

MIB = 1024 * 1024
#: a reader, a writer of every repository (as ci-bot) and a writer of acme/ alone
TOKENS = "reader-token\nwriter-token write * ci-bot\nacme-token write acme/\n"


@contextlib.contextmanager
def serve_process(tmp_path: Path, *args: str) -> Iterator[str]:
    """``ocibridge serve ARGS --token-file`` as a process; yields its URL."""
    (tmp_path / "tokens.txt").write_text(TOKENS)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with serve_as_process([*args, "--no-access-log", "--token-file", str(tmp_path / "tokens.txt")], env,
                          tmp_path / "serve.log") as url:
        yield url


def model_dir(root: Path) -> Path:
    """A small BERT-like model: a config, 3 MiB of safetensors weights and a tokenizer."""
    root.mkdir(parents=True)
    (root / "config.json").write_text(json.dumps({"model_type": "bert", "hidden_size": 32}))
    header = json.dumps({"w": {"dtype": "F32", "shape": [3 * MIB // 4], "data_offsets": [0, 3 * MIB]}}).encode()
    header += b" " * (-len(header) % 8)
    (root / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + os.urandom(3 * MIB))
    (root / "tokenizer.json").write_text(json.dumps({"version": "1.0", "model": {"type": "WordLevel"}}))
    return root


def tag_digest(ref: str) -> str | None:
    """The digest ``ref``'s tag points at in the registry; None when it is not there."""
    from ocibridge.errors import NotFound

    with opened_store(ref) as (store, tag):
        try:
            return str(store.resolve(tag).digest)
        except NotFound:
            return None


def blob_in(ref: str, sha256: str, size: int) -> bool:
    """Whether the repository of ``ref`` holds the blob."""
    from ocibridge.oci.models import Descriptor

    with opened_store(ref) as (store, _):
        return bool(store.exists(Descriptor(mediaType="application/octet-stream", digest=f"sha256:{sha256}",
                                            size=size)))


@contextlib.contextmanager
def opened_store(ref: str) -> Iterator[tuple[Any, str]]:
    """The registry store of ``ref``'s repository, with its tag (``latest`` when none)."""
    from ocibridge.oci.reference import parse_registry_reference
    from ocibridge.stores.registry.store import open_repository

    located = parse_registry_reference(ref)
    with open_repository(located) as store:
        yield store, located.tag or "latest"


@contextlib.contextmanager
def evidence_serve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prefix: str, repo: str,
                   password: str = "") -> Iterator[tuple[HfApi, Any]]:
    """A serve over ``prefix`` that signs and attests every commit with a new cosign key (its
    file encrypted with ``password``), huggingface_hub pointed at it over LFS as the writer, and
    ``repo`` created there: (the API, the key pair)."""
    import ocibridge

    key = ocibridge.keygen(tmp_path / "cosign", password=password)  # cosign's encrypted key file
    monkeypatch.setenv("COSIGN_PASSWORD", password)  # read by serve at start, as push reads it
    with serve_process(tmp_path, prefix, "--sign-key", str(key.private_key), "--sbom", "--provenance") as url:
        point_hub_at(monkeypatch, url, tmp_path / "hub")
        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)
        api = HfApi(endpoint=url, token="writer-token")
        api.create_repo(repo)
        yield api, key
