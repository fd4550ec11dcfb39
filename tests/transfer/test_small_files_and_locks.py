"""Small files read without bound, locks that follow links (issue 41, classes 5 and 6).

Every small file is read by ``core/smallfile.read_small`` (a file found in a shared place: regular
only, opened without blocking, capped); every lock or state file is opened by
``core/lockfile.open_in_dir`` (inside its directory, never through a link); the settings file is
changed under a lock. CLI cases run in a child whose peak RSS and time are measured; each
compares a snapshot of every directory involved before and after."""

from __future__ import annotations

import multiprocessing
import os
import tracemalloc
from pathlib import Path

import pytest

from ocibridge.cli import main
from ocibridge.core.lockfile import PlantedLink, flocked_file, open_in_dir
from ocibridge.core.smallfile import read_small
from ocibridge.errors import OcibridgeError, TooLarge
from tests.hostile_run import run_cli, snapshot, sparse
from tests.hub.test_hf_cache import COMMIT, write_with_huggingface_hub
from tests.modelgen import make_bert_model, make_model

GiB = 1 << 30


def _plant(path: Path, kind: str, outside: Path) -> None:
    """What a hostile co-user leaves at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() or path.is_symlink():
        path.unlink()
    if kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "huge":
        sparse(path, GiB, b"0123456789abcdef0123456789abcdef01234567\n")
    elif kind == "directory":
        path.mkdir()
    elif kind == "link-out":
        outside.write_text(COMMIT + "\n")
        path.symlink_to(outside)
    else:
        raise AssertionError(kind)


# -- read_small itself ------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "huge", "directory"])
def test_read_small_refuses_what_a_shared_place_must_not_hold(tmp_path, kind):
    path = tmp_path / "ref"
    _plant(path, kind, tmp_path / "outside")
    tracemalloc.start()
    try:
        with pytest.raises(OcibridgeError) as caught:
            read_small(path, 4096, "ref")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, peak  # nothing of /dev/zero or the 1 GiB file was read
    assert "\n" not in str(caught.value) and str(path) in str(caught.value)
    if kind == "huge":
        assert isinstance(caught.value, TooLarge)


@pytest.mark.parametrize("size", [0, 1, 4095, 4096, 4097, 1 << 20])
def test_read_small_reads_a_regular_file_up_to_its_cap(tmp_path, size):
    path = tmp_path / "f"
    path.write_bytes(b"x" * size)
    if size <= 4096:
        assert read_small(path, 4096, "f") == b"x" * size
    else:
        with pytest.raises(TooLarge, match="larger than 4096 bytes"):
            read_small(path, 4096, "f")


def test_read_small_follows_links_only_when_asked(tmp_path):
    (tmp_path / "real").write_text("ok")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert read_small(tmp_path / "link", 10, "f") == b"ok"
    with pytest.raises(OcibridgeError, match="symbolic link"):
        read_small(tmp_path / "link", 10, "f", follow=False)


def test_a_named_fifo_is_read_but_capped(tmp_path):
    """A file the user names may be a FIFO on purpose (``--key <(…)``): read, never past the cap."""
    fifo = tmp_path / "named"
    os.mkfifo(fifo)
    pid = os.fork()
    if pid == 0:  # the writer: more than the cap
        try:
            with open(fifo, "wb") as f:
                f.write(b"y" * 10000)
        finally:
            os._exit(0)
    try:
        with pytest.raises(TooLarge):
            read_small(fifo, 100, "key", named=True)
    finally:
        os.waitpid(pid, 0)


# -- the Hub cache's refs/main: push hf: and copy hf: --------------------------------------------
@pytest.fixture
def hub(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "hf-home" / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(root))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    write_with_huggingface_hub(root, "acme/tiny", make_bert_model(tmp_path / "src"), COMMIT)
    return root


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "huge", "directory"])
@pytest.mark.parametrize("command", ["push", "copy"])
def test_a_hostile_hub_ref_is_one_line_bounded_and_quick(tmp_path, hub, kind, command):
    ref = hub / "models--acme--tiny" / "refs" / "main"
    _plant(ref, kind, tmp_path / "outside")
    before = snapshot(tmp_path)
    ran = run_cli(command, "hf:acme/tiny", f"oci:{tmp_path}/out:v1", *(["-q"] if command == "push" else []),
                  env={"HF_HUB_CACHE": str(hub)}, timeout=30)
    line = ran.one_error_line()
    assert "refs/main" in line and ("not a regular file" in line or "larger than" in line), line
    assert ran.peak_mb < 300 and ran.cpu_seconds < 20, (ran.peak_mb, ran.cpu_seconds)
    assert snapshot(tmp_path) == before


# -- the settings file ------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "huge", "directory"])
def test_a_hostile_settings_file_is_one_line(tmp_path, kind):
    settings = tmp_path / "conf" / "registries.toml"
    _plant(settings, kind, tmp_path / "outside")
    before = snapshot(tmp_path)
    ran = run_cli("tags", "127.0.0.1:9/none/such", env={"OCIBRIDGE_REGISTRIES_CONF": str(settings)}, timeout=30)
    line = ran.one_error_line()
    assert "registry settings" in line and str(settings) in line, line
    assert ran.peak_mb < 300 and ran.cpu_seconds < 20
    assert snapshot(tmp_path) == before


def _remember_many(conf: str, worker: int, count: int) -> None:
    os.environ["OCIBRIDGE_REGISTRIES_CONF"] = conf
    from ocibridge.stores.registry import hostsettings as hosts

    for i in range(count):
        hosts.remember(f"w{worker}-{i}.example", plain_http=True)


def test_concurrent_settings_writers_lose_no_update(tmp_path):
    conf = tmp_path / "conf" / "registries.toml"
    workers, count = 4, 25
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_remember_many, args=(str(conf), w, count)) for w in range(workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    import tomllib

    hosts = tomllib.loads(conf.read_text())["registry"]
    assert len(hosts) == workers * count, f"{workers * count - len(hosts)} updates lost"


# -- locks planted as links --------------------------------------------------------------------
LINKS = ["to-a-new-file", "to-an-existing-file", "dangling-chain", "to-a-directory"]


def _plant_link(at: Path, how: str, outside: Path) -> Path:
    """A symlink at ``at`` leading outside; returns the path it would make or change."""
    at.parent.mkdir(parents=True, exist_ok=True)
    target = outside / "victim"
    if how == "to-an-existing-file":
        target.write_text("the user's file")
    elif how == "dangling-chain":
        (outside / "hop").symlink_to(target)
        at.symlink_to(outside / "hop")
        return target
    elif how == "to-a-directory":
        target.mkdir()
    at.symlink_to(target)
    return target


@pytest.mark.parametrize("how", LINKS)
def test_open_in_dir_never_goes_through_a_link(tmp_path, how):
    outside = tmp_path / "outside"
    outside.mkdir()
    lock = tmp_path / "dir" / "x.lock"
    _plant_link(lock, how, outside)
    before = snapshot(outside)
    with pytest.raises(PlantedLink, match="symbolic link"):
        open_in_dir(lock)
    with pytest.raises(PlantedLink), flocked_file(lock):
        pass
    assert snapshot(outside) == before
    # the directory itself planted as a link
    linked_dir = tmp_path / "linked"
    linked_dir.symlink_to(outside)
    with pytest.raises(PlantedLink, match="directory"):
        open_in_dir(linked_dir / "y.lock")
    assert snapshot(outside) == before


@pytest.mark.parametrize("how", LINKS)
def test_a_layout_lock_planted_as_a_link_creates_nothing_outside(tmp_path, capsys, how):
    model = make_model(tmp_path / "m")
    layout = tmp_path / "layout"
    assert main(["push", str(model), f"oci:{layout}:v1", "-q"]) == 0
    (layout / ".ocibridge.lock").unlink(missing_ok=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    target = _plant_link(layout / ".ocibridge.lock", how, outside)
    before, before_layout = snapshot(outside), snapshot(layout)
    capsys.readouterr()
    code = main(["tag", f"oci:{layout}:v1", "v2"])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and err.startswith("ocibridge: error: "), err
    assert ".ocibridge.lock" in err and "symbolic link" in err
    assert snapshot(outside) == before and snapshot(layout) == before_layout
    assert how != "to-a-new-file" or not target.exists()


@pytest.mark.parametrize("how", LINKS)
def test_a_cache_lock_planted_as_a_link_creates_nothing_outside(tmp_path, how):
    cache = tmp_path / "cache" / "models"  # the model cache, under the cache root $OCIBRIDGE_CACHE
    outside = tmp_path / "outside"
    outside.mkdir()
    target = _plant_link(cache / "locks" / "cache.lock", how, outside)
    before, snapshot_locks = snapshot(outside), snapshot(cache / "locks")  # the cache may set its layout up
    ran = run_cli("cache", "prune", "--max-size", "1G", env={"OCIBRIDGE_CACHE": str(cache.parent)})
    line = ran.one_error_line()
    assert "cache.lock" in line and "symbolic link" in line, line
    assert snapshot(outside) == before and snapshot(cache / "locks") == snapshot_locks
    assert how != "to-a-new-file" or not target.exists()
