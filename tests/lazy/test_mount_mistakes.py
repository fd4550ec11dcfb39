"""``mount`` told as ``pull`` tells it (issue 90 item 8): a tag the repository lacks names the tag,
the nearest ones and the repository's tags (it said "manifest not found"); a mount point under
directories that do not exist is refused in one line, as mount(8) and FUSE tools refuse it, and
nothing is made (it was made, parents and all, as ``mkdir -p``)."""

from __future__ import annotations

import shutil

from mounting import mount_env, run

from ocibridge.lazymount.mounttable import is_mounted
from tests.docrun import EXAMPLE_MODEL


def test_mount_of_a_missing_tag_says_what_pull_says(tmp_path, registry, unique_repo):
    repo = f"{registry.host}/{unique_repo}/tiny"
    env = mount_env(tmp_path / "env")
    run(["push", str(shutil.copytree(EXAMPLE_MODEL, tmp_path / "tiny")), f"{repo}:latest", "-q"], env)
    pulled = run(["pull", f"{repo}:lates", str(tmp_path / "out")], env, check=False)
    where = tmp_path / "mnt"
    mounted = run(["mount", f"{repo}:lates", str(where)], env, check=False)
    assert not is_mounted(where) and not where.exists()
    [line] = pulled.stderr.splitlines()
    assert "no such tag lates" in line and "nearest: latest" in line, line
    assert (mounted.returncode, mounted.stderr) == (1, pulled.stderr)


def test_a_mount_point_under_missing_directories_is_refused_and_nothing_made(tmp_path, registry, unique_repo):
    ref, env = f"{registry.host}/{unique_repo}/tiny:v1", mount_env(tmp_path / "env")
    run(["push", str(shutil.copytree(EXAMPLE_MODEL, tmp_path / "tiny")), ref, "-q"], env)  # a model that mounts
    where = tmp_path / "a" / "b" / "c"
    done = run(["mount", ref, str(where)], env, check=False)
    if is_mounted(where):  # (what it must not do: undone, then failed below)
        run(["umount", str(where)], env)
    assert done.returncode == 1, done
    assert done.stderr == (f"ocibridge: error: mount point {where} does not exist (nor does {where.parent}: "
                           "only DIR itself is made)\n")
    assert not (tmp_path / "a").exists()
