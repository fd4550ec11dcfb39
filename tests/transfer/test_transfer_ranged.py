"""Pulls into a layout: parts in flight at once, one stream when Range is ignored, and a
partial file left by an interrupted run continued with Range after its prefix is re-hashed
(real registry, through the fault proxy that records what it saw)."""

from __future__ import annotations

import contextlib
import fcntl
import io
import logging
import os
import threading
import time

from support.faultproxy import corrupt, ignore_range, throttle

from ocibridge.oci.mediatypes import OCI_CONFIG, OCI_LAYER_TAR, OCI_MANIFEST
from ocibridge.oci.models import Descriptor, Manifest
from ocibridge.stores.layout import LayoutStore
from ocibridge.stores.partial import PARTIAL_PREFIX, partial_path
from ocibridge.stores.registry import open_repository
from ocibridge.transfer.copy import copy

SIZE = 1_000_003  # not a multiple of the part size: the last part is short
PART = 128 * 1024


def _artifact(registry, repo: str) -> tuple[Descriptor, bytes]:
    layer = os.urandom(SIZE)
    layer_desc = Descriptor.for_bytes(OCI_LAYER_TAR, layer)
    config_desc = Descriptor.for_bytes(OCI_CONFIG, b"{}")
    manifest = Manifest(mediaType=OCI_MANIFEST, config=config_desc, layers=[layer_desc])
    data = manifest.to_json_bytes()
    with open_repository(host=registry.host, repository=repo) as store:
        store.push_blob(layer_desc, io.BytesIO(layer))
        store.push_blob(config_desc, io.BytesIO(b"{}"))
        store.push_manifest(Descriptor.for_bytes(OCI_MANIFEST, data), data, "v1")
    return layer_desc, layer


def _pull(proxy, repo: str, layout_dir, **options):
    src = open_repository(host=proxy.host, repository=repo, **options)
    dst = LayoutStore(layout_dir, create=True)
    with src:
        copy(src, "v1", dst, "v1")
    return src.stats, dst


def _blob_gets(proxy, desc: Descriptor):
    return proxy.requests_matching("GET", f"/blobs/{desc.digest}")


def _download(proxy, repo: str, desc: Descriptor, layer: bytes, layout_dir, **options):
    """Download one blob into a new layout through ``proxy`` (checked against ``layer``);
    the blob's GETs the proxy saw, in the order they came."""
    src = open_repository(host=proxy.host, repository=repo, **options)
    dst = LayoutStore(layout_dir, create=True)
    with src:
        dst.download_blob(desc, src)
    assert dst.blob_path(desc.digest).read_bytes() == layer
    return sorted(_blob_gets(proxy, desc), key=lambda g: g.time)


def test_large_blob_comes_in_parts_written_at_their_offsets(registry, fault_proxy, unique_repo, tmp_path):
    desc, layer = _artifact(registry, unique_repo)
    stats, dst = _pull(fault_proxy, unique_repo, tmp_path / "l", part_size=PART, parts_in_flight=3)
    assert dst.blob_path(desc.digest).read_bytes() == layer
    ranges = sorted(g.range for g in _blob_gets(fault_proxy, desc))
    starts = range(0, SIZE, PART)  # the last part asks for "the rest": bytes=N-
    expected = sorted(f"bytes={s}-{s + PART - 1}" if s + PART < SIZE else f"bytes={s}-" for s in starts)
    assert ranges == expected and all(g.status == 206 for g in _blob_gets(fault_proxy, desc))
    assert not [p for p in (tmp_path / "l" / "blobs" / "sha256").iterdir() if p.name.startswith(".")]


def test_range_ignored_falls_back_to_one_stream(registry, fault_proxy, unique_repo, tmp_path):
    desc, layer = _artifact(registry, unique_repo)
    fault_proxy.add("GET", f"/blobs/{desc.digest}", ignore_range(), times=None)
    _, dst = _pull(fault_proxy, unique_repo, tmp_path / "l", part_size=PART, parts_in_flight=3)
    assert dst.blob_path(desc.digest).read_bytes() == layer
    assert [g.status for g in _blob_gets(fault_proxy, desc)] == [200, 200]  # the probe, one stream


def test_small_blob_is_one_stream(registry, fault_proxy, unique_repo, tmp_path):
    desc, layer = _artifact(registry, unique_repo)
    _pull(fault_proxy, unique_repo, tmp_path / "l")  # default parts of 32 MiB: one stream
    assert [g.range for g in _blob_gets(fault_proxy, desc)] == [None]


def test_a_partial_file_of_an_earlier_run_is_continued_with_range(registry, fault_proxy, unique_repo,
                                                                 tmp_path):
    desc, layer = _artifact(registry, unique_repo)
    blobs = tmp_path / "l" / "blobs" / "sha256"
    LayoutStore(tmp_path / "l", create=True)
    half = SIZE // 2
    partial_path(blobs, desc.digest).write_bytes(layer[:half])  # what a killed run left
    stats, dst = _pull(fault_proxy, unique_repo, tmp_path / "l")
    assert dst.blob_path(desc.digest).read_bytes() == layer
    assert [g.range for g in _blob_gets(fault_proxy, desc)] == [f"bytes={half}-"]
    assert stats.bytes_downloaded < SIZE - half + 1000  # the layer's rest and the tiny config
    assert not [p for p in blobs.iterdir() if p.name.startswith(PARTIAL_PREFIX)]


def test_a_wrong_prefix_on_disk_is_not_trusted(registry, fault_proxy, unique_repo, tmp_path):
    desc, layer = _artifact(registry, unique_repo)
    blobs = tmp_path / "l" / "blobs" / "sha256"
    LayoutStore(tmp_path / "l", create=True)
    bad = bytearray(layer[:1000])
    bad[10] ^= 0xFF
    partial_path(blobs, desc.digest).write_bytes(bytes(bad))
    _, dst = _pull(fault_proxy, unique_repo, tmp_path / "l")
    assert dst.blob_path(desc.digest).read_bytes() == layer
    assert [g.range for g in _blob_gets(fault_proxy, desc)] == ["bytes=1000-", None]


def test_a_corrupt_download_leaves_nothing_behind(registry, fault_proxy, unique_repo, tmp_path):
    desc, _ = _artifact(registry, unique_repo)
    fault_proxy.add("GET", f"/blobs/{desc.digest}", corrupt(offset=5), times=None)
    try:
        _pull(fault_proxy, unique_repo, tmp_path / "l")
    except Exception as e:  # noqa: BLE001 - the type is asserted below
        assert "digest" in str(e)
    else:
        raise AssertionError("a corrupt blob was accepted")
    blobs = tmp_path / "l" / "blobs" / "sha256"
    assert not blobs.exists() or not [p for p in blobs.iterdir() if p.name.endswith(desc.digest[7:])]


def test_orphaned_temporary_files_are_removed_live_ones_kept(registry, fault_proxy, unique_repo,
                                                             tmp_path):
    import fcntl
    import time as _time

    desc, layer = _artifact(registry, unique_repo)
    LayoutStore(tmp_path / "l", create=True)
    blobs = tmp_path / "l" / "blobs" / "sha256"
    orphan = blobs / ".ocibridge-tmp-deadrun"
    orphan.write_bytes(b"x" * 1000)  # what a killed run left: nobody holds its lock
    live = blobs / ".ocibridge-tmp-liverun"
    live.write_bytes(b"y")
    old = _time.time() - 3600
    for path in (orphan, live):
        os.utime(path, (old, old))
    with open(live, "rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # another process still writing it
        _, dst = _pull(fault_proxy, unique_repo, tmp_path / "l")
        assert not orphan.exists() and live.exists()
    assert dst.blob_path(desc.digest).read_bytes() == layer


#: The proxy stamps a response's last bytes after its send returns, in its own thread: the
#: next part, started by the client as soon as those bytes arrived, can be stamped first on a
#: loaded machine (4 seen for 3 parts, a few ms apart). Parts here each last ~0.5 s.
STAMP_SLACK = 0.05


def _max_overlap(gets) -> int:
    """The most responses that were being sent at one moment (each body whole: the blob
    was read to its end), an end within :data:`STAMP_SLACK` of a start not counted as both."""
    events = sorted([(g.time, 1) for g in gets] + [(g.last_sent - STAMP_SLACK, -1) for g in gets])
    now = most = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def test_parts_are_added_while_a_capped_link_gives_more(registry, fault_proxy, unique_repo, tmp_path,
                                                        caplog):
    """The default plan starts with one part and adds parts while the rate rises: on a link
    that caps each connection (the proxy paces every response), they end up many at once."""
    caplog.set_level(logging.INFO, logger="ocibridge.parts")  # what --debug shows
    size, part = 6 * 1024 * 1024, 256 * 1024
    layer = os.urandom(size)
    desc = Descriptor.for_bytes(OCI_LAYER_TAR, layer)
    with open_repository(host=registry.host, repository=unique_repo) as store:
        store.push_blob(desc, io.BytesIO(layer))
    fault_proxy.add("GET", f"/blobs/{desc.digest}", throttle(1024 * 1024), times=None)
    gets = _download(fault_proxy, unique_repo, desc, layer, tmp_path / "l", part_size=part)
    assert gets[0].range == "bytes=0-"  # one part at first, asking for the rest of the blob
    # it carried on into the next part before the first judgement (a part takes 0.25 s)
    assert len(gets) < size // part and all(g.last_sent for g in gets)
    assert gets[1].time >= gets[0].time + 0.2
    assert _max_overlap(gets) >= 4
    assert caplog.messages[0].startswith("ranged parts: 1 in flight brought ")
    assert caplog.messages[0].endswith("MiB/s; now 4")


def test_one_part_at_a_time_keeps_one_connection(registry, fault_proxy, unique_repo, tmp_path):
    """While one part is allowed, the parts follow one another on the first request (for
    the rest of the blob), not one request each."""
    desc, layer = _artifact(registry, unique_repo)
    gets = _download(fault_proxy, unique_repo, desc, layer, tmp_path / "l", part_size=PART)
    parts = -(-SIZE // PART)
    # 1 MB on loopback comes before the first judgement (0.4 s); a loaded machine may see
    # one, and its extra parts, but the first request still carries several parts
    assert gets[0].range == "bytes=0-" and gets[0].status == 206
    assert len(gets) < parts - 1


def test_a_fixed_parts_count_starts_them_all_at_once(registry, fault_proxy, unique_repo, tmp_path):
    desc, layer = _artifact(registry, unique_repo)
    # each part takes 0.5 s: room for a loaded machine to start the third part meanwhile
    fault_proxy.add("GET", f"/blobs/{desc.digest}", throttle(256 * 1024), times=None)
    _, dst = _pull(fault_proxy, unique_repo, tmp_path / "l", part_size=PART, parts_in_flight=3)
    assert dst.blob_path(desc.digest).read_bytes() == layer
    gets = sorted(_blob_gets(fault_proxy, desc), key=lambda g: g.time)
    assert gets[2].time < gets[0].last_sent  # three in flight from the start
    assert _max_overlap(gets) == 3


def test_a_download_that_waited_on_a_partial_file_renamed_meanwhile_takes_the_new_one(registry, fault_proxy,
                                                                                     unique_repo, tmp_path):
    """The writer it waited for renamed the partial file it held (its blob, under another name)
    and a third writer made a new one: the download works on the file now at the partial name
    (checked like any kept bytes), never renames into place a file it did not hash."""
    desc, layer = _artifact(registry, unique_repo)
    LayoutStore(tmp_path / "l", create=True)
    blobs = tmp_path / "l" / "blobs" / "sha256"
    blobs.mkdir(parents=True, exist_ok=True)
    partial = partial_path(blobs, desc.digest)
    partial.write_bytes(layer)  # the other writer's, whole
    holder = os.open(partial, os.O_RDWR)
    fcntl.flock(holder, fcntl.LOCK_EX)
    errors: list[BaseException] = []

    def pull() -> None:
        try:
            with open_repository(host=fault_proxy.host, repository=unique_repo) as src:
                LayoutStore(tmp_path / "l").download_blob(desc, src)
        except BaseException as e:  # noqa: BLE001 - checked below
            errors.append(e)

    waiting = threading.Thread(target=pull)
    waiting.start()
    deadline = time.monotonic() + 30
    while not _opened_elsewhere(partial, holder) and time.monotonic() < deadline:
        time.sleep(0.02)
    os.rename(partial, tmp_path / "elsewhere")  # the other writer's blob, under its own name
    partial.write_bytes(bytes(len(layer)))  # a third writer's file, nothing in it yet
    os.close(holder)
    waiting.join(60)
    assert not errors
    assert (blobs / desc.digest.split(":")[1]).read_bytes() == layer


def _opened_elsewhere(path, but: int) -> bool:
    """Whether a descriptor of this process other than ``but`` names ``path`` (Linux)."""
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            if int(fd) != but and os.readlink(f"/proc/self/fd/{fd}") == str(path):
                return True
    return False
