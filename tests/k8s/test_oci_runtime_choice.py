"""The OCI runtime podman runs containers with in the tests (issue 42): crun, else runc. crun
refuses a cgroup v1 hybrid hierarchy (`cgroups in hybrid mode not supported`), so there runc
is tried first, and a runtime is chosen only after it really ran a container."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import ociruntime


def fake_cgroup(root: Path, layout: str) -> Path:
    """A /sys/fs/cgroup as each layout mounts it (directories and the files that tell them apart)."""
    root.mkdir()
    if layout == "unified":
        (root / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
        (root / "system.slice").mkdir()
    else:
        for controller in ("blkio", "cpu", "cpuacct", "devices", "memory", "pids", "systemd"):
            (root / controller).mkdir()
        if layout == "hybrid":
            (root / "unified").mkdir()
            (root / "unified" / "cgroup.controllers").write_text("")
    return root


@pytest.mark.parametrize(("layout", "order"), [
    ("unified", ["crun", "runc"]), ("legacy", ["crun", "runc"]), ("hybrid", ["runc", "crun"])])
def test_the_layout_orders_the_candidates(tmp_path, layout, order):
    root = fake_cgroup(tmp_path / "cgroup", layout)
    assert ociruntime.cgroup_layout(root) == layout
    assert ociruntime.candidates(layout, installed=lambda name: True) == order
    assert ociruntime.candidates(layout, installed=lambda name: name == "runc") == ["runc"]


def test_a_runtime_is_chosen_only_once_it_ran(tmp_path):
    """On a hybrid host where the layout was misread (or a unified one where crun is broken),
    crun's failure moves the choice on to runc; with neither, the error says what each said."""
    hybrid_crun = {"crun": "crun: cgroups in hybrid mode not supported, drop all controllers from cgroupv2"}
    asked: list[str] = []

    def probe(runtime: str) -> str | None:
        asked.append(runtime)
        return hybrid_crun.get(runtime)

    assert ociruntime.choose(["crun", "runc"], probe) == "runc" and asked == ["crun", "runc"]
    with pytest.raises(RuntimeError, match=r"crun: crun: cgroups in hybrid mode.*runc: exec failed.*install runc"):
        ociruntime.choose(["crun", "runc"], lambda r: hybrid_crun.get(r, "exec failed"))
    with pytest.raises(RuntimeError, match="none of crun, runc is installed"):
        ociruntime.choose([], probe)


def test_this_hosts_choice_runs_a_container(podman):
    """The choice on this host: a runtime that ran /bin/true; on a hybrid hierarchy, not crun."""
    assert podman.runtime in ociruntime.PREFERENCE
    if ociruntime.cgroup_layout() == "hybrid":
        assert ociruntime.candidates("hybrid")[0] != "crun"
    rootfs = ociruntime.probe_rootfs(podman.workdir)
    podman.podman("--runtime", podman.runtime, "run", "--rm", "--network=none", "--ulimit", "nofile=1024:1024",
                  "--ulimit", "nproc=1024:1024", "--rootfs", str(rootfs), "/bin/true")
