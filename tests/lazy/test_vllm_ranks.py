"""Tensor parallelism on one node: every rank of vLLM loads every weight, so each one streaming
the checkpoint from the registry asks it for N times the model. Two ranks, simulated by two
processes started together, each calling what the plugin calls per rank
(``load_into(model, WeightSource.from_settings(...), strict=False, ranks=...)``), fetch each blob
byte from the registry once between them, counted at a proxy in front of the real registry; each
rank still gets every tensor, equal to safetensors.torch's load of the pulled file."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import httpx
import pytest

from tests.lazy.test_load_tensors_torch import in_file_order, models, raw

__all__ = ["models"]  # (the module-scoped fixture: one model pushed with a chunk table and one without)

#: one rank: waits for the word to start, loads through the plugin's call, prints what it got
RANK = """
import hashlib, json, sys, time
from pathlib import Path

import torch

from ocibridge.engines.weights import WeightSource, load_into

reference, ranks, ready, go = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])


class Model(torch.nn.Module):
    def load_weights(self, weights):
        self.got = {name: hashlib.sha256(tensor.reshape(-1).view(torch.uint8).numpy().tobytes()).hexdigest()
                    for name, tensor in weights}
        return set()


ready.touch()
deadline = time.monotonic() + 120
while not go.exists() and time.monotonic() < deadline:
    time.sleep(0.01)
model = Model()
load_into(model, WeightSource.from_settings({"reference": reference}), strict=False, ranks=ranks)
print(json.dumps(model.got))
"""


def run_ranks(reference: str, ranks: int, work: Path) -> list[dict[str, str]]:
    """``ranks`` processes loading ``reference`` at once (each told there are ``ranks``)."""
    go = work / "go"
    procs = []
    for i in range(ranks):
        procs.append((work / f"ready-{i}", subprocess.Popen(
            [sys.executable, "-c", RANK, reference, str(ranks), str(work / f"ready-{i}"), str(go)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy())))
    deadline = time.monotonic() + 120
    while not all(ready.exists() for ready, _ in procs) and time.monotonic() < deadline:
        time.sleep(0.01)
    go.touch()  # (both imported torch and ocibridge: they start together)
    got = []
    for _, proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        got.append(json.loads(out))
    return got


def blob_bytes_fetched(proxy, repo: str) -> dict[str, int]:
    """Digest -> body bytes the registry sent for it (every GET of a blob of ``repo``)."""
    sent: dict[str, int] = defaultdict(int)
    for request in proxy.requests_matching("GET", f"^/v2/{repo}/blobs/sha256:"):
        sent[request.path.split("/blobs/", 1)[1].split("?", 1)[0]] += request.response_bytes
    return dict(sent)


def blob_size(host: str, repo: str, digest: str) -> int:
    """The blob's size as the registry itself says it (asked directly, not through the proxy)."""
    answer = httpx.head(f"http://{host}/v2/{repo}/blobs/{digest}")
    assert answer.status_code == 200, digest
    return int(answer.headers["content-length"])


@pytest.mark.parametrize("which", ["table", "plain"])
def test_two_ranks_of_one_node_fetch_each_blob_byte_once(models, registry, fault_proxy, tmp_path, which):
    _, pulled, repo = models[which]
    fault_proxy.clear()
    got = run_ranks(f"{fault_proxy.host}/{repo}:v1", 2, tmp_path)
    want = {name: hashlib.sha256(raw(t)).hexdigest() for name, t in in_file_order(pulled).items()}
    assert got == [want, want]  # every tensor, to each rank
    fetched = blob_bytes_fetched(fault_proxy, repo)
    sizes = {digest: blob_size(registry.host, repo, digest) for digest in fetched}
    assert pulled.stat().st_size in sizes.values()  # the weights' blob among them
    assert fetched == sizes  # each blob (the weights, the chunk table), byte for byte once
