"""A whole-model load's requests in flight, when the caller names none: four, or one per CPU the
process may use where it has fewer (each request's thread receives and checks its chunks)."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from safetensors.numpy import save_file
from support.fixtures import new_repo

import ocibridge
from ocibridge.core import capacity

CHUNK = 64 * 1024
TABLE = ocibridge.PushOptions(chunk_threshold=1, chunk_size=CHUNK)
#: requests of 2 chunks each, their number in flight left to the default
SMALL_PARTS = ocibridge.TransferOptions(part_size=2 * CHUNK)


@pytest.fixture(scope="module")
def model(registry, tmp_path_factory):
    """~4 MiB of tensors in ranges of 128 KiB: many more requests than may be in flight."""
    rng = np.random.default_rng(7)
    tensors = {f"t{i:02d}": rng.standard_normal(32768, dtype=np.float32) for i in range(32)}
    src = tmp_path_factory.mktemp("requests") / "m"
    src.mkdir()
    save_file(tensors, str(src / "model.safetensors"))
    return ocibridge.push(str(src), f"{registry.host}/{new_repo()}:v1", options=TABLE).reference, tensors


@pytest.mark.parametrize("cpus", [1, 2])
def test_a_process_with_few_cpus_keeps_no_more_requests_than_cpus_in_flight(model, monkeypatch, cpus):
    ref, want = model
    monkeypatch.setattr(capacity, "_affinity", lambda: set(range(cpus)))
    seen: set[str] = set()
    with ocibridge.iter_tensors(ref, transfer=SMALL_PARTS) as stream:
        for name, array in stream:
            seen.update(t.name for t in threading.enumerate() if t.name.startswith("load_"))
            assert array.tobytes() == want[name].tobytes()
    assert 1 <= len(seen) <= max(2, cpus)  # two at least: one receives while the other's chunks are checked


def test_the_default_is_four_where_the_process_has_the_cpus(monkeypatch):
    from ocibridge.api.load_ops import default_requests

    monkeypatch.setattr(capacity, "_affinity", lambda: set(range(16)))
    assert default_requests() == 4
    monkeypatch.setattr(capacity, "_affinity", lambda: {0, 1})
    assert default_requests() == 2
    monkeypatch.setattr(capacity, "_affinity", lambda: {0})
    assert default_requests() == 2
