"""A whole-model load's requests in flight, when the caller names none: four, or one per CPU the
process may use where it has fewer (each request's thread receives and checks its chunks); and
the ranges they ask: load_tensors' long ones, a stream's and a named part size's short ones."""

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


def ranges_asked(monkeypatch) -> list[tuple[int, int]]:
    """The ranges a load asks after each file's header, as ``(start, end)``: filled as it runs."""
    from ocibridge.lazyread import tensorload

    asked: list[tuple[int, int]] = []
    fetch = tensorload.fetch_checked

    def counted(source, layer, start, end, *args, **kwargs):
        if start:
            asked.append((start, end))
        return fetch(source, layer, start, end, *args, **kwargs)

    monkeypatch.setattr(tensorload, "fetch_checked", counted)
    return asked


@pytest.mark.parametrize(("longest", "ranges"), [(8 << 20, 8), (256 << 10, 16)])
def test_load_tensors_asks_long_ranges_while_each_request_in_flight_gets_four(model, monkeypatch, longest, ranges):
    """A load that returns every tensor at once asks ranges longer than the part size (fewer
    connections for the client and the registry to set up), but no longer than LONG_SPAN, and
    short enough that each of the two requests in flight gets four of the file's ranges."""
    from ocibridge.api import load_ops

    ref, want = model
    monkeypatch.setattr(capacity, "_affinity", lambda: {0, 1})
    monkeypatch.setattr(load_ops, "SPAN", 2 * CHUNK)
    monkeypatch.setattr(load_ops, "LONG_SPAN", longest, raising=False)
    asked = ranges_asked(monkeypatch)
    got = ocibridge.load_tensors(ref)
    assert {name: a.tobytes() for name, a in got.items()} == {name: a.tobytes() for name, a in want.items()}
    assert len(asked) == ranges
    assert max(end - start for start, end in asked) <= min(longest, 1 << 19)
    spans = sorted(asked)  # (in any order: together, the file after its header, each byte once)
    assert all(one[1] == two[0] for one, two in zip(spans, spans[1:], strict=False))
    assert spans[-1][1] - spans[0][0] > 4_000_000


def test_streams_and_named_part_sizes_keep_their_ranges(model, monkeypatch):
    """iter_tensors hands each tensor over as its range is verified, so it keeps the part size;
    so does load_tensors when the caller names one."""
    from ocibridge.api import load_ops

    ref, want = model
    monkeypatch.setattr(capacity, "_affinity", lambda: {0, 1})
    monkeypatch.setattr(load_ops, "SPAN", 2 * CHUNK)
    asked = ranges_asked(monkeypatch)
    with ocibridge.iter_tensors(ref, max_bytes=None) as stream:
        assert {name: a.tobytes() for name, a in stream} == {name: a.tobytes() for name, a in want.items()}
    assert len(asked) >= 31 and max(b - a for a, b in asked) == 2 * CHUNK
    asked.clear()
    ocibridge.load_tensors(ref, transfer=SMALL_PARTS)
    assert len(asked) >= 31 and max(b - a for a, b in asked) == 2 * CHUNK
