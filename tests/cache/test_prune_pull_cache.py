"""``cache prune`` and the pull cache: what failed or interrupted pulls left under
``$OCIBRIDGE_CACHE/pulls`` (verified blobs, partial downloads, table-checked layers) is
reclaimed by age and by size, counted in the size the prune reports, and what a running pull
holds stays (real registry, real pulls stopped by Ctrl-C or by a corrupted layer)."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import threading
import time
from pathlib import Path

from support.faultproxy import corrupt, throttle

import ocibridge
from ocibridge.cli import main
from ocibridge.oci.mediatypes import OCI_LAYER_TAR
from ocibridge.oci.models import Descriptor, Manifest, parse_manifest_bytes
from ocibridge.stores.partial import partial_path
from ocibridge.stores.registry import open_repository
from ocibridge.transfer.pullcache import PULL_LOCK
from tests.transfer.test_transfer_interrupt import (
    _model_with_big_file,
    _pull_cache,
    _pull_interrupted,
    _push_tabled,
    _start,
    _table_key,
    _wait_for_bytes,
)

HOUR = 3600.0


def _leftovers() -> dict[Path, int]:
    """Every file a pull left in the pull cache (blobs, partial downloads, table-checked layers),
    with its size."""
    cache = _pull_cache()
    return {p: p.stat().st_size for folder in ("blobs", "tabled") for p in (cache / folder).rglob("*")
            if p.is_file()}


def _interrupted(fault_proxy, unique_repo: str, tmp_path: Path, name: str) -> tuple[str, Path, Path]:
    """A pull of a model with a 4 MiB file stopped by Ctrl-C mid-file: its reference, the
    model's folder and the partial download it left."""
    model = _model_with_big_file(tmp_path / name)
    ref = f"{fault_proxy.host}/{unique_repo}:{name}"
    assert main(["push", str(model), ref, "-q"]) == 0
    big = Descriptor.for_bytes(OCI_LAYER_TAR, (model / "weights.bin").read_bytes())
    _pull_interrupted(fault_proxy, ref, big, tmp_path / f"{name}-out")
    kept = partial_path(_pull_cache() / "blobs" / "sha256", big.digest)
    assert kept.stat().st_size > 0
    return ref, model, kept


def _failed_pull(registry, fault_proxy, unique_repo: str, tmp_path: Path) -> dict[Path, int]:
    """A pull whose last layer comes corrupted every time: it fails, leaving the layers before
    it verified in the pull cache (what it left, with their sizes)."""
    model = _model_with_big_file(tmp_path / "m")
    ref = f"{fault_proxy.host}/{unique_repo}:v1"
    assert main(["push", str(model), ref, "-q"]) == 0
    store = open_repository(host=registry.host, repository=unique_repo)
    manifest = parse_manifest_bytes(store.fetch_bytes(store.resolve("v1")))
    assert isinstance(manifest, Manifest)
    fault_proxy.add("GET", f"/blobs/{manifest.layers[-1].digest}", corrupt(), times=None)
    assert main(["pull", ref, "-o", str(tmp_path / "out"), "-q", "--concurrency", "1"]) != 0
    fault_proxy.clear()
    left = _leftovers()
    assert left and all(not p.name.startswith(".") for p in left), left  # complete files, verified
    return left


def test_prune_removes_the_partial_download_an_interrupted_pull_left(fault_proxy, unique_repo, tmp_path):
    ref, model, kept = _interrupted(fault_proxy, unique_repo, tmp_path, "a")
    left = _leftovers()
    partial_bytes = left[kept] + left.get(kept.with_name(kept.name + ".prefix"), 0)
    done = ocibridge.prune_cache(older_than=0)
    assert not kept.exists() and _leftovers() == {}
    assert done.pulls == len([p for p in left if not p.name.endswith(".prefix")])
    assert done.pulls_freed == sum(left.values()) >= partial_bytes > 0
    assert done.freed >= done.pulls_freed and done.pulls_held == 0
    assert done.as_dict()["pulls"] == {"removed": done.pulls, "freed": done.pulls_freed, "held": 0}
    out = tmp_path / "again"  # the pull runs again from the start
    assert main(["pull", ref, "-o", str(out), "-q"]) == 0
    assert (out / "weights.bin").read_bytes() == (model / "weights.bin").read_bytes()


def test_prune_removes_a_table_checked_leftover(registry, fault_proxy, unique_repo, tmp_path, capsys):
    model = _model_with_big_file(tmp_path / "m")
    ref = f"{fault_proxy.host}/{unique_repo}:v1"
    _push_tabled(model, ref)
    big = Descriptor.for_bytes(OCI_LAYER_TAR, (model / "weights.bin").read_bytes())
    key = _table_key(registry, unique_repo, "v1", big.digest)
    _pull_interrupted(fault_proxy, ref, big, tmp_path / "out")
    key_dir = _pull_cache() / "tabled" / key
    tabled = sum(size for p, size in _leftovers().items() if p.is_relative_to(key_dir))
    assert tabled > 0
    capsys.readouterr()
    assert main(["cache", "prune", "--older-than", "0s", "--json"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert not key_dir.exists() and _leftovers() == {}
    assert done["pulls"]["removed"] >= 1 and done["pulls"]["freed"] >= tabled and done["pulls"]["held"] == 0
    assert main(["cache", "prune", "--older-than", "0s"]) == 0
    assert "0 leftovers of failed pulls" in capsys.readouterr().out


def test_a_leftover_newer_than_older_than_stays_and_counts_in_the_size(registry, fault_proxy, unique_repo,
                                                                       tmp_path, capsys):
    left = _failed_pull(registry, fault_proxy, unique_repo, tmp_path)
    kept = ocibridge.prune_cache(older_than=HOUR)
    assert _leftovers() == left and kept.pulls == 0 and kept.pulls_freed == 0
    assert kept.size >= sum(left.values())  # the pull cache is part of the cache's size
    two_hours_ago = time.time() - 2 * HOUR
    for path in left:
        os.utime(path, (two_hours_ago, two_hours_ago))
    assert main(["cache", "prune", "--older-than", "1h"]) == 0
    out = capsys.readouterr().out
    assert _leftovers() == {}
    assert f"{len(left)} leftovers of failed pulls" in out, out


def test_max_size_takes_pull_leftovers_before_snapshots(registry, fault_proxy, unique_repo, tmp_path):
    left = _failed_pull(registry, fault_proxy, unique_repo, tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    (other / "weights.bin").write_bytes(os.urandom(1024 * 1024))
    assert main(["push", str(other), f"{registry.host}/{unique_repo}:other", "-q"]) == 0
    snapshot = ocibridge.path(f"{registry.host}/{unique_repo}:other")  # used now, the leftovers before
    with_pulls = ocibridge.prune_cache(older_than=HOUR).size
    assert with_pulls >= sum(left.values())
    done = ocibridge.prune_cache(max_size=with_pulls - 1)  # one byte too many: the oldest leftover goes
    assert done.pulls == 1 and done.snapshots == () and (snapshot / "weights.bin").is_file()
    done = ocibridge.prune_cache(max_size=with_pulls - sum(left.values()))  # room for the snapshot alone
    assert _leftovers() == {} and done.snapshots == () and (snapshot / "weights.bin").is_file()
    assert done.size <= with_pulls - sum(left.values())


def test_what_a_running_pull_holds_stays(fault_proxy, unique_repo, tmp_path):
    _, _, stopped = _interrupted(fault_proxy, unique_repo, tmp_path, "a")  # left by a pull that is gone
    stopped_complete = {p for p in _leftovers() if p != stopped and not p.name.startswith(".")}
    assert stopped_complete  # its small files, verified before the Ctrl-C
    model = tmp_path / "b"
    model.mkdir()
    (model / "weights.bin").write_bytes(os.urandom(4 * 1024 * 1024))
    (model / "notes.md").write_text("# b\n")
    ref = f"{fault_proxy.host}/{unique_repo}:b"
    assert main(["push", str(model), ref, "-q"]) == 0
    big = Descriptor.for_bytes(OCI_LAYER_TAR, (model / "weights.bin").read_bytes())
    pruned = threading.Event()  # the rest of the blob at once, once the prune ran beside the pull
    fault_proxy.add("GET", f"/blobs/{big.digest}", throttle(1024 * 1024, release=pruned), times=1)
    running = _start(["pull", ref, "-o", str(tmp_path / "b-out"), "--concurrency", "1"])
    try:
        _wait_for_bytes(fault_proxy, big, 256 * 1024, running)  # of 4 MiB at 1 MiB/s: seconds to spare
        writing = partial_path(_pull_cache() / "blobs" / "sha256", big.digest)
        assert writing.exists()
        done = ocibridge.prune_cache(older_than=0)
        assert writing.exists()  # under the running pull's lock
        assert running.poll() is None  # (the pull ran beside the prune)
        assert all(p.exists() for p in stopped_complete)  # complete files stay while a pull runs
        assert not stopped.exists() and done.pulls == 1  # the stopped pull's partial download went
        assert done.pulls_held >= 1 + len(stopped_complete)
        pruned.set()
        _, err = running.communicate(timeout=30)
        assert running.returncode == 0, err
    finally:
        if running.poll() is None:
            running.send_signal(signal.SIGKILL)
            running.wait()
    assert (tmp_path / "b-out" / "weights.bin").read_bytes() == (model / "weights.bin").read_bytes()
    done = ocibridge.prune_cache(older_than=0)  # no pull runs now: the rest goes
    assert _leftovers() == {} and done.pulls == len(stopped_complete)


def test_a_partial_locked_by_its_writer_stays_and_the_pull_lock_keeps_complete_files(fault_proxy, unique_repo,
                                                                                      tmp_path):
    _, _, partial = _interrupted(fault_proxy, unique_repo, tmp_path, "a")
    complete = {p for p in _leftovers() if p != partial and not p.name.startswith(".")}
    with open(partial, "rb+") as held:  # as the download writing it holds it
        fcntl.flock(held, fcntl.LOCK_EX)
        with open(_pull_cache() / PULL_LOCK, "rb") as pull:  # as a pull running holds it
            fcntl.flock(pull, fcntl.LOCK_SH)
            done = ocibridge.prune_cache(older_than=0)
        assert partial.exists() and all(p.exists() for p in complete) and done.pulls == 0
        assert done.pulls_held == 1 + len(complete)
        done = ocibridge.prune_cache(older_than=0)  # no pull runs: the complete files go, not the locked partial
        assert partial.exists() and not any(p.exists() for p in complete)
        assert done.pulls == len(complete) and done.pulls_held == 1
    done = ocibridge.prune_cache(older_than=0)
    assert not partial.exists() and done.pulls == 1 and _leftovers() == {}
