"""A whole-model load's requests in flight, when the caller names none: four, or one per CPU the
process may use where it has fewer (each request's thread receives and checks its chunks); and
the ranges they ask: load_tensors' long ones, a stream's and a named part size's short ones, and
the halves of a slow long range that idle requests take at the end."""

from __future__ import annotations

import re
import threading

import numpy as np
import pytest
from safetensors.numpy import save_file
from support.faultproxy import FaultProxy, RecordedRequest, stall
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
        verified = fetch(source, layer, start, end, *args, **kwargs)
        shared = kwargs.get("shared")
        if start:  # (up to where it was read: an idle request may have taken the rest)
            asked.append((start, end if shared is None else shared.end))
        return verified

    monkeypatch.setattr(tensorload, "fetch_checked", counted)
    return asked


@pytest.mark.parametrize(("longest", "ranges"), [(8 << 20, 8), (256 << 10, 16)])
def test_load_tensors_asks_long_ranges_while_each_request_in_flight_gets_four(model, monkeypatch, longest, ranges):
    """A load that returns every tensor at once asks ranges longer than the part size (fewer
    connections for the client and the registry to set up), but no longer than LONG_SPAN, and
    short enough that each of the two requests in flight gets four of the file's ranges (and at
    the end, an idle request may take the unstarted half of a range still in flight)."""
    from ocibridge.api import load_ops

    ref, want = model
    monkeypatch.setattr(capacity, "_affinity", lambda: {0, 1})
    monkeypatch.setattr(load_ops, "SPAN", 2 * CHUNK)
    monkeypatch.setattr(load_ops, "LONG_SPAN", longest, raising=False)
    asked = ranges_asked(monkeypatch)
    got = ocibridge.load_tensors(ref)
    assert {name: a.tobytes() for name, a in got.items()} == {name: a.tobytes() for name, a in want.items()}
    assert ranges <= len(asked) <= ranges + 4
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


def raw(tensor) -> bytes:
    """A numpy array's or a torch tensor's bytes."""
    return tensor.numpy().tobytes() if hasattr(tensor, "numpy") else tensor.tobytes()


def first_byte(rec: RecordedRequest) -> int:
    match = re.match(r"bytes=(\d+)-", rec.range or "")
    assert match, rec.range
    return int(match.group(1))


class CutSeen:
    """Sets ``release`` once a range of ``digest`` is asked that starts past the stalled one's
    start by ``within`` bytes at most: the load cut the stalled range down to there."""

    def __init__(self, digest: str, within: int, release: threading.Event):
        self.digest, self.within, self.release = digest, within, release

    def on_request(self, proxy: FaultProxy, rec: RecordedRequest) -> None:
        stalled = [r for r in proxy.requests if r.action == "stall"]
        if stalled and rec.method == "GET" and self.digest in rec.path and rec.range \
                and 0 < first_byte(rec) - first_byte(stalled[0]) <= self.within:
            self.release.set()

    def on_response(self, rec: RecordedRequest, status: int, headers: list) -> list:
        return headers


@pytest.mark.parametrize(("framework", "device"), [("numpy", None), ("torch", "cpu")])
def test_a_slow_connection_is_left_about_one_part_of_its_long_range(model, registry, fault_proxy, monkeypatch,
                                                                    framework, device):
    """load_tensors asks long ranges; once nothing else is left to ask, an idle request takes the
    unstarted half of the range in flight with the most left, down to one part (SPAN) past what
    its reader has started: a connection far slower than the others holds up the load for about
    a part, not for the rest of its long range. Every byte is still checked against the table
    (on a device: in the staging ring, before it is copied there)."""
    from ocibridge.api import load_ops

    ref, want = model
    ref = ref.replace(registry.host, fault_proxy.host)
    with ocibridge.open_model(ref, warn=None, cache=False) as opened:
        digest = opened.file("model.safetensors").layer.digest
    monkeypatch.setattr(capacity, "_affinity", lambda: {0, 1})
    monkeypatch.setattr(load_ops, "SPAN", CHUNK)
    release = threading.Event()
    fault_proxy.clear()
    # the first range after the header's: one chunk at once, then nothing until the load cut it
    # down to its first chunks and a part (or 3 s), then the rest slowly (a chunk each 0.5 s)
    fault_proxy.add("GET", f"/blobs/{digest}", stall(CHUNK, release, rate=2 * CHUNK, timeout=3), skip=1)
    fault_proxy.quirks.append(CutSeen(digest, 3 * CHUNK, release))
    if framework == "torch":
        pytest.importorskip("torch")
    got = ocibridge.load_tensors(ref, framework=framework, device=device)
    assert {name: raw(a) for name, a in got.items()} == {name: a.tobytes() for name, a in want.items()}
    slow = next(r for r in fault_proxy.requests if r.action == "stall")
    asked = re.match(r"bytes=(\d+)-(\d+)", slow.range or "")
    assert asked and int(asked.group(2)) + 1 - int(asked.group(1)) == 8 * CHUNK  # a long range
    # the two chunks its reader had started and one part, then at most a piece the proxy sent
    # before the connection was closed; all of it (8 chunks) without the split
    assert slow.response_bytes <= 4 * CHUNK
    assert len(fault_proxy.requests_matching("GET", f"/blobs/{digest}")) <= 1 + 8 + 4
