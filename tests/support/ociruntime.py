"""Which OCI runtime ``podman run`` uses on this host: crun, else runc.

crun refuses a cgroup v1 *hybrid* hierarchy (v1 controllers, with the v2 tree mounted beside
them at ``/sys/fs/cgroup/unified``): ``crun: cgroups in hybrid mode not supported, drop all
controllers from cgroupv2``. runc runs there. The layout of ``/sys/fs/cgroup`` decides which is
tried first, and one real run of each candidate (a busybox root file system, ``/bin/true``,
no image) decides which is used: whatever the layout says, a runtime that does not run is not
chosen, and the error names what each candidate said.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
PREFERENCE = ("crun", "runc")


def cgroup_layout(root: Path = CGROUP_ROOT) -> str:
    """``unified`` (cgroup v2 alone), ``hybrid`` (v1 controllers, v2 mounted at ``unified/``)
    or ``legacy`` (v1 alone)."""
    if (root / "cgroup.controllers").is_file():
        return "unified"
    if (root / "unified").is_dir():
        return "hybrid"
    return "legacy"


def candidates(layout: str, installed: Callable[[str], bool] | None = None) -> list[str]:
    """The runtimes to try, in order: crun first, except on a hybrid hierarchy, which it refuses."""
    have = installed or (lambda name: shutil.which(name) is not None)
    order = ([r for r in PREFERENCE if r != "crun"] + ["crun"]) if layout == "hybrid" else list(PREFERENCE)
    return [r for r in order if have(r)]


def choose(tried: Sequence[str], probe: Callable[[str], str | None]) -> str:
    """The first of ``tried`` that ``probe`` runs (``probe`` answers None, or why it failed);
    RuntimeError naming every failure when none does."""
    why: list[str] = []
    for runtime in tried:
        failure = probe(runtime)
        if failure is None:
            return runtime
        why.append(f"{runtime}: {failure}")
    found = "; ".join(why) if why else f"none of {', '.join(PREFERENCE)} is installed"
    raise RuntimeError(f"no OCI runtime runs a container here ({found}); "
                       "install runc (`apt-get install -y runc`; ./scripts/test does)")


def probe_rootfs(workdir: Path, busybox: Path = Path("/bin/busybox")) -> Path:
    """A root file system of one static busybox and ``/bin/true``: what the probe runs."""
    rootfs = workdir / "probe-rootfs"
    (rootfs / "bin").mkdir(parents=True, exist_ok=True)
    if not (rootfs / "bin" / "busybox").exists():
        shutil.copy2(busybox, rootfs / "bin" / "busybox")
        (rootfs / "bin" / "true").symlink_to("busybox")
    return rootfs
