"""safetensors' own ``safe_open`` (mmap) on a mounted 256 MiB file of 10 tensors reads the 1 MiB
one while the registry sends at most 5 % of the file (issue 65), counted at a proxy in front of
the real registry; the bytes are the tensor's."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from mounting import Mount, blob_bytes, mount_env
from support.faultproxy import FaultProxy
from support.fixtures import new_repo

import ocibridge
from ocibridge.cli import main
from ocibridge.lazymount.mounttable import is_mounted

MiB = 1024 * 1024
#: nine large tensors and a small one: 9 x 28 MiB + 1 MiB, with the header ~256 MiB
LARGE = 28 * MiB // 4  # float32 elements of each large tensor


@pytest.fixture(scope="module")
def pushed(registry, tmp_path_factory):
    """(repository, the small tensor's bytes, the file's size); random bytes, so no chunk repeats."""
    from safetensors.numpy import save_file

    src = tmp_path_factory.mktemp("st") / "model"
    src.mkdir()
    rng = np.random.default_rng(65)
    tensors = {f"layers.{i}.weight": np.frombuffer(rng.bytes(LARGE * 4), dtype=np.float32).reshape(-1, 1024)
               for i in range(9)}
    tensors["layers.4.small"] = np.frombuffer(rng.bytes(MiB), dtype=np.float32).reshape(512, 512)
    save_file(tensors, str(src / "model.safetensors"))
    size = (src / "model.safetensors").stat().st_size
    assert 250 * MiB < size < 260 * MiB
    repo = new_repo()
    assert main(["push", str(src), f"{registry.host}/{repo}:v1", "-q"]) == 0  # a chunk table: over 64 MiB
    return repo, tensors["layers.4.small"].tobytes(), size


#: safe_open in a process of its own: its Rust code holds the interpreter lock while it touches
#: the mmap, and the counting proxy answering the mount is a thread of this process
READ = """
import sys
from safetensors import safe_open
with safe_open(sys.argv[1], framework="numpy") as f:
    assert len(list(f.keys())) == 10
    got = f.get_tensor("layers.4.small")
assert got.shape == (512, 512)
sys.stdout.buffer.write(got.tobytes())
"""


def test_safe_open_reads_one_tensor_of_a_256_mib_file_moving_under_5_percent(pushed, registry, tmp_path):
    repo, small, size = pushed
    with FaultProxy(registry) as proxy, \
            Mount(f"{proxy.host}/{repo}:v1", tmp_path / "mnt", mount_env(tmp_path), tmp_path / "mount.log") as m:
        done = subprocess.run([sys.executable, "-c", READ, str(m.where / "model.safetensors")], capture_output=True,
                              timeout=120, check=True)
        assert done.stdout == small
        moved = blob_bytes(proxy)
    assert moved <= 0.05 * size, f"{moved} bytes of {size} ({moved / size:.1%})"
    assert moved >= MiB  # the tensor's bytes did come from the registry (no other copy was there)


@pytest.mark.timeout(120)
def test_the_python_api_mount_is_read_by_safe_open_in_the_same_process(pushed, registry, tmp_path, monkeypatch):
    """``ocibridge.mount`` serves from a process of its own: safe_open's mmap in the caller, which
    holds the interpreter lock while it reads, would wait forever on answers from the caller."""
    from safetensors import safe_open

    repo, small, _ = pushed
    for name, value in mount_env(tmp_path).items():
        monkeypatch.setenv(name, value)
    (tmp_path / "mnt").mkdir()
    with ocibridge.mount(f"{registry.host}/{repo}:v1", tmp_path / "mnt") as m:
        assert m.pid != os.getpid() and is_mounted(m.directory)
        with safe_open(str(m.directory / "model.safetensors"), framework="numpy") as f:
            assert f.get_tensor("layers.4.small").tobytes() == small
    assert not is_mounted(tmp_path / "mnt")
    with pytest.raises(OSError):  # the process is gone: os.kill finds none
        os.kill(m.pid, 0)
