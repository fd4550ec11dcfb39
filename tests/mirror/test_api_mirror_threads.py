"""Two mirror calls in two threads of one process, against the real registry through a proxy
that records every request: each call's rate cap and User-Agent are its own. Both used to be
set on the process for the length of a run (and put back after), so a second call was
throttled by the first's cap and its requests carried the first's User-Agent, or none of its
own."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import ocibridge
from ocibridge.api.mirror import MirrorRunOptions
from ocibridge.model.builder import build
from ocibridge.model.package import ModelFile, ModelPackage
from ocibridge.oci.mediatypes import Kind
from ocibridge.stores.layout import LayoutStore
from ocibridge.transfer.copy import copy
from ocibridge.version import __version__

SIZE = 512 * 1024
CAP = 128 * 1024  # bytes per second: the capped call needs 3.75 s at least (its weights less the first burst)
BURST = 32 * 1024


def layout_with_model(path: Path) -> str:
    """An OCI layout holding one model with SIZE bytes of weights no other test uploads."""
    package = ModelPackage(files=[ModelFile.from_bytes("w.safetensors", os.urandom(SIZE), Kind.WEIGHT)],
                           descriptor={"name": path.name, "version": "1.0.0"}, config={"format": "safetensors"})
    copy(build(package), "artifact", LayoutStore(path, create=True), "v1")
    return f"oci:{path}:v1"


def test_two_mirror_calls_in_threads_keep_their_own_cap_and_user_agent(fault_proxy, tmp_path, unique_repo) -> None:
    capped_target = f"{fault_proxy.host}/{unique_repo}/capped:v1"
    free_target = f"{fault_proxy.host}/{unique_repo}/free:v1"
    capped_job = ocibridge.MirrorJob(sync=[ocibridge.SyncEntry(source=layout_with_model(tmp_path / "a"),
                                                               target=capped_target)])
    free_job = ocibridge.MirrorJob(sync=[ocibridge.SyncEntry(source=layout_with_model(tmp_path / "b"),
                                                             target=free_target)])
    took: dict[str, float] = {}
    finished: list[str] = []  # the order the calls ended in
    reports: dict[str, ocibridge.MirrorReport] = {}

    def capped() -> None:
        start = time.monotonic()
        reports["capped"] = ocibridge.mirror_run(
            capped_job, options=MirrorRunOptions(limit_rate=CAP, user_agent="capped-job/1"))
        took["capped"] = time.monotonic() - start
        finished.append("capped")

    def free() -> None:
        time.sleep(0.3)  # the capped call is sending by then
        start = time.monotonic()
        reports["free"] = ocibridge.mirror_shard(free_job, "0/1")
        took["free"] = time.monotonic() - start
        finished.append("free")

    threads = [threading.Thread(target=capped), threading.Thread(target=free)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert reports["capped"].ok and reports["free"].ok, (reports["capped"].format_text(), reports["free"].format_text())

    # the capped call obeys its cap; the other, running meanwhile, is not held to it
    assert took["capped"] >= (SIZE - BURST) / CAP, took
    assert finished == ["free", "capped"], took  # held to the cap too, it would end after the one it began behind

    # every request of each call carries its own User-Agent, the other's never
    agents: dict[str, set[str]] = {"capped": set(), "free": set()}
    for rec in fault_proxy.requests:
        for which, seen in agents.items():
            if f"/{unique_repo}/{which}/" in rec.path:
                seen.add(rec.headers.get("user-agent", ""))
    assert agents["capped"] == {"capped-job/1"}, agents
    assert agents["free"] == {f"ocibridge/{__version__} mirror-shard/0-of-1"}, agents
