"""Blobs in flight at once, as the loopback proxy in front of a real registry sees them.

The proxy holds every blob request for a while before forwarding it, so requests that the
client runs together start together: the largest group of starts within half that hold is the
number in flight. Default 4, ``--concurrency N`` changes it, for downloads and for uploads.
"""

from __future__ import annotations

import uuid

import pytest
from support.faultproxy import delay

from ocibridge.cli import main
from ocibridge.stores.layout import LayoutStore

HOLD = 0.5


def _most_at_once(starts: list[float]) -> int:
    starts = sorted(starts)
    return max(sum(1 for t in starts if s <= t < s + HOLD / 2) for s in starts)


def _model_with_blobs(tmp_path, count: int):
    """A model whose push makes ``count`` raw layers (plus the config)."""
    model = tmp_path / "model"
    model.mkdir()
    for i in range(count):
        (model / f"w{i}.safetensors").write_bytes(bytes([i]) * (10_000 + i))
    return model


@pytest.mark.parametrize("flag, expected", [([], 4), (["--concurrency", "2"], 2)])
def test_blobs_in_flight_default_4_and_flag(registry, fault_proxy, tmp_path, flag, expected, capsys):
    model = _model_with_blobs(tmp_path, 6)
    ref = f"{fault_proxy.host}/conc/{uuid.uuid4().hex[:8]}:v1"
    # uploads: every blob upload starts with a POST (new tag: hash while sending)
    fault_proxy.add("POST", r"/blobs/uploads/", delay(HOLD), times=None)
    assert main(["push", str(model), ref, "-q", *flag]) == 0, capsys.readouterr().err
    posts = [r.time for r in fault_proxy.requests_matching("POST", "/blobs/uploads/")]
    assert len(posts) >= 6 and _most_at_once(posts) == expected
    # downloads: every layer is one GET
    fault_proxy.clear()
    fault_proxy.add("GET", r"/blobs/sha256:", delay(HOLD), times=None)
    out = tmp_path / "out"
    assert main(["pull", ref, str(out), "-q", *flag]) == 0, capsys.readouterr().err
    gets = [r.time for r in fault_proxy.requests_matching("GET", "/blobs/sha256:")]
    assert len(gets) >= 6 and _most_at_once(gets) == expected
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in model.iterdir())
    # and a copy into a layout
    fault_proxy.clear()
    fault_proxy.add("GET", r"/blobs/sha256:", delay(HOLD), times=None)
    assert main(["copy", ref, f"oci:{tmp_path}/layout:v1", "-q", *flag]) == 0
    gets = [r.time for r in fault_proxy.requests_matching("GET", "/blobs/sha256:")]
    assert _most_at_once(gets) == expected
    assert LayoutStore(tmp_path / "layout").resolve("v1")

