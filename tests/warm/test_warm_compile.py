"""The warm start end to end on the CPU (Inductor's C++ backend): a small transformer compiled
with ``torch.compile`` in a process with empty local caches, its cache saved to the registry
with ``torch.compiler.save_cache_artifacts()`` and ``ocibridge.warm_save``; then a fresh process, empty
caches again, ``ocibridge.warm_load`` before its first compiled call: Inductor's graph cache answers
(a hit, no miss) and the output is the cold one's, byte for byte. One compile per mode, of one
layer (the bench's two compile for longer, and the cache's behaviour is the same); the timing is
bench/warm_start.py's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import ocibridge
from tests.modelgen import make_model
from tests.signing_keys import key_pair

pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parents[2]


def _child(mode: str, ref: str, work: Path, *flags: str) -> tuple[dict, bytes]:
    """One process of bench/warm_child.py with its own empty Inductor and Triton caches."""
    scratch = work.parent / "tmp"  # both processes': Inductor's precompiled header (below) is built once
    scratch.mkdir(exist_ok=True)
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(work / "inductor"), TRITON_CACHE_DIR=str(work / "triton"),
               TORCHINDUCTOR_COMPILE_THREADS="1",  # no pool of compile workers to start: the suite has 2 cores
               TORCHINDUCTOR_VEC_ISA_OK="1",  # no test programs built for the base vector ISA in each empty cache
               # Inductor keeps its precompiled C++ header (150 MB) outside its cache, in
               # $TMPDIR/torchinductor_$USER: in the test's own folder, not left in /tmp run after run
               TMPDIR=str(scratch))
    proc = subprocess.run([sys.executable, "-m", "bench.warm_child", mode, ref, "--out", str(work / "out"),
                           "--layers", "1", *flags],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), (work / "out").read_bytes()


@pytest.mark.timeout(900)  # compiles twice: minutes on a loaded 2-core machine, not the usual 240 s
def test_a_fresh_process_compiles_warm_from_the_registry(tmp_path, registry, unique_repo):
    ref = f"{registry.host}/{unique_repo}:v1"
    ocibridge.push(str(make_model(tmp_path / "m")), ref)
    private, public = key_pair(tmp_path / "k")
    cold, cold_out = _child("save", ref, tmp_path / "cold", "--sign-key", str(private))
    assert (cold["hits"], cold["misses"]) == (0, 1), cold
    assert cold["saved"]["key"]["form"] == "torch" and cold["saved"]["signed"] == ["classic", "bundle"]

    warm, warm_out = _child("run", ref, tmp_path / "warm", "--warm", "--verify-key", str(public))
    assert warm["loaded"]["digest"] == cold["saved"]["digest"] and warm["loaded"]["checked"]
    assert (warm["hits"], warm["misses"]) == (1, 0), warm  # the graph came from the cache, not from Inductor
    assert warm_out == cold_out and len(cold_out) == 2 * 32 * 256 * 4
