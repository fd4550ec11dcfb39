"""bench.floor_at_once: the floor of a publish over Xet measured as the work done at once (hf_xet to a
sink, curl's PUT into the registry, serve's least work), on the suite's registry with a small model."""

from __future__ import annotations

import hashlib
from pathlib import Path

import httpx
import pytest

from bench import floor_at_once
from bench.publish import make_model


def test_the_three_run_at_once_and_the_registry_ends_up_holding_the_weights(registry, tmp_path: Path) -> None:
    weights = make_model(tmp_path / "m", 8) / "model.safetensors"
    at_once = floor_at_once.xet(registry, weights, "bench/xet-floor-test", tmp_path)
    ends = (at_once.client_done, at_once.registry_done, at_once.least_done)
    assert all(0 < end <= at_once.after_first_xorb for end in ends)
    assert max(ends) == at_once.after_first_xorb
    digest = hashlib.sha256(weights.read_bytes()).hexdigest()
    held = httpx.head(f"{registry.url}/v2/bench/xet-floor-test/blobs/sha256:{digest}")
    assert held.status_code == 200 and int(held.headers["content-length"]) == weights.stat().st_size
    assert not (tmp_path / "xet-floor-least.out").exists()  # serve's least work's one write, removed


def test_a_client_that_sends_no_xorb_ends_the_floor_with_its_words(registry, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """hf_xet ending before its first xorb ends the floor at once, with the client's last line."""
    monkeypatch.setattr(floor_at_once, "CLIENT", "import sys; sys.exit('hf_xet: no such file')")
    weights = tmp_path / "w.safetensors"
    weights.write_bytes(b"x" * 64)
    with pytest.raises(RuntimeError, match=r"hf_xet sent no xorb \(exit 1\): hf_xet: no such file"):
        floor_at_once.xet(registry, weights, "bench/xet-floor-none", tmp_path)


def test_the_lfs_floor_runs_the_put_and_the_least_work_together(registry, tmp_path: Path) -> None:
    weights = make_model(tmp_path / "m", 8) / "model.safetensors"
    took = floor_at_once.lfs(registry, weights, "bench/lfs-floor-test", tmp_path)
    assert took > 0
    digest = hashlib.sha256(weights.read_bytes()).hexdigest()
    assert httpx.head(f"{registry.url}/v2/bench/lfs-floor-test/blobs/sha256:{digest}").status_code == 200
    assert not (tmp_path / "lfs-floor-least.out").exists()
