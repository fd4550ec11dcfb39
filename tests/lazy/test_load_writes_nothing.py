"""load_tensors and iter_tensors read a registry model into memory with nothing written to disk
(docs/lazy.md, "A whole model into memory"): a fresh process whose cache root and settings file
lie in an empty folder leaves it empty, the index of where blobs live included (what its
manifest reads learn stays in the process). A push still writes that index down:
tests/lazy/test_mount_memory.py (a later push, a process of its own, mounts what it names)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file
from support.fixtures import new_repo

import ocibridge

#: a chunk table for the one file (its referrer or annotation is read too, on a thread of its own)
TABLE = ocibridge.PushOptions(chunk_threshold=1, chunk_size=64 * 1024)

PROBE = """
import sys, ocibridge
whole = ocibridge.load_tensors(sys.argv[1])
with ocibridge.iter_tensors(sys.argv[1]) as stream:
    streamed = dict(stream)
print(len(whole), len(streamed), sorted(whole) == sorted(streamed))
"""


@pytest.fixture(scope="module")
def model_refs(registry, tmp_path_factory) -> dict[str, str]:
    src = tmp_path_factory.mktemp("nowrite") / "model"
    src.mkdir()
    (src / "config.json").write_text('{"model_type": "test"}')
    rng = np.random.default_rng(7)
    save_file({"a": rng.standard_normal((200, 100), dtype=np.float32), "b": np.arange(500, dtype=np.int64)},
              str(src / "model.safetensors"))
    tagged = f"{registry.host}/{new_repo()}:v1"
    return {"tag": tagged, "digest": ocibridge.push(str(src), tagged, options=TABLE).reference}


@pytest.mark.parametrize("ref_kind", ["tag", "digest"])
def test_a_load_in_a_fresh_process_writes_nothing_under_its_cache_root(model_refs, tmp_path, ref_kind):
    root = tmp_path / "empty"
    root.mkdir()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
           "OCIBRIDGE_CACHE": str(root / "cache"), "OCIBRIDGE_REGISTRIES_CONF": str(root / "registries.toml"),
           "HOME": str(root / "home"), "XDG_CACHE_HOME": str(root / "xdg-cache")}
    env.pop("OCIBRIDGE_CACHE_DIR", None)
    done = subprocess.run([sys.executable, "-c", PROBE, model_refs[ref_kind]], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["2", "2", "True"]  # it did load, both ways
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*")) == []  # (the process has exited)
