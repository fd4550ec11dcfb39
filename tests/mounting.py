"""What the mount tests share: ``ocibridge mount`` run as a process of its own (detached, as a
user runs it), each with its own model cache and policy file, and the trees compared."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.faultproxy import FaultProxy, hold

from ocibridge.lazymount.mounttable import is_mounted

OCIBRIDGE = [sys.executable, "-m", "ocibridge"]


def mount_env(base: Path) -> dict[str, str]:
    """A cache of its own under ``base`` and a policy that accepts anything (never the machine's)."""
    base.mkdir(parents=True, exist_ok=True)
    policy = base / "policy.json"
    policy.write_text('{"default": [{"type": "insecureAcceptAnything"}]}')
    return {**os.environ, "OCIBRIDGE_CACHE": str(base / "cache"), "OCIBRIDGE_POLICY": str(policy)}


def run(args: list[str], env: dict[str, str], *, log: Path | None = None,
        check: bool = True) -> subprocess.CompletedProcess[str]:
    """``ocibridge ARGS``; with ``log``, stderr goes there (a detached mount keeps writing to it)."""
    if log is None:
        done = subprocess.run([*OCIBRIDGE, *args], env=env, capture_output=True, text=True, timeout=300)
    else:
        with open(log, "a") as err:
            done = subprocess.run([*OCIBRIDGE, *args], env=env, stdout=subprocess.PIPE, stderr=err, text=True,
                                  timeout=300)
    if check:
        assert done.returncode == 0, (args, done.returncode, done.stderr or (log.read_text() if log else ""))
    return done


class Mount:
    """``ocibridge mount REF DIR`` (detached), ended by ``ocibridge umount DIR``."""

    def __init__(self, ref: str, where: Path, env: dict[str, str], log: Path, *flags: str):
        self.ref, self.where, self.env, self.log = ref, where, env, log
        run(["mount", ref, str(where), *flags], env, log=log)
        assert is_mounted(where)

    def close(self) -> None:
        if is_mounted(self.where):
            run(["umount", str(self.where)], self.env)
        assert not is_mounted(self.where)

    def __enter__(self) -> Mount:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def listing(root: Path) -> dict[str, tuple[object, ...]]:
    """Every path under ``root``: its type, and a file's size and executable bit, a link's target."""
    found: dict[str, tuple[object, ...]] = {}
    for top, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(top) / name
            st = path.lstat()
            rel = path.relative_to(root).as_posix()
            if stat.S_ISLNK(st.st_mode):
                found[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                found[rel] = ("dir",)
            else:
                found[rel] = ("file", st.st_size, bool(st.st_mode & 0o111))
    return found


def digests(root: Path) -> dict[str, str]:
    """The SHA-256 of every regular file under ``root``, read through the file system."""
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            h = hashlib.sha256()
            with open(path, "rb") as f:
                while piece := f.read(1 << 20):
                    h.update(piece)
            out[path.relative_to(root).as_posix()] = h.hexdigest()
    return out


def blob_bytes(proxy: object, digest: str = "") -> int:
    """Blob bytes the registry sent through ``proxy`` (of one blob, or of all)."""
    return sum(r.response_bytes for r in proxy.requests_matching("GET", f"/blobs/{digest}"))  # type: ignore[attr-defined]


#: the layers ``ocibridge inspect`` showed, by reference without its host (a model the tests of a
#: module share, reached through one fault proxy or another): path -> digest
_SHOWN: dict[str, dict[str, str]] = {}


def digest_of(ref: str, path: str, env: dict[str, str]) -> str:
    """The digest of the layer that holds ``path`` in ``ref`` (as ``ocibridge inspect`` shows it,
    once per reference: a repository's tag names the same layers from any host in front of it)."""
    key = ref.split("/", 1)[1]
    if key not in _SHOWN:
        shown = json.loads(run(["inspect", ref, "--json"], env).stdout)
        _SHOWN[key] = {layer["path"]: layer["digest"] for layer in shown["layers"]}
    return _SHOWN[key][path]


DEFAULT_TIMEOUT_TEST = "test_the_default_read_timeout_is_30_seconds"


@pytest.fixture(scope="module", autouse=True)
def default_timeout_read(request, tmp_path_factory) -> Iterator[dict[str, Any] | None]:
    """The read of :func:`test_the_default_read_timeout_is_30_seconds`, which waits 30 s for a
    registry that never answers, starts with the module in a thread of its own (its own proxy,
    mount and cache): the module's other tests run while it waits, and the test asserts what it
    saw. What it saw: the error and seconds of the read, config.json read after, the log."""
    if not any(item.name == DEFAULT_TIMEOUT_TEST for item in request.session.items):
        yield None
        return
    repo, _ = request.getfixturevalue("model")
    base = tmp_path_factory.mktemp("default-timeout")
    env, log, never, seen = mount_env(base), base / "mount.log", threading.Event(), {}
    with FaultProxy(request.getfixturevalue("registry")) as proxy:
        ref = f"{proxy.host}/{repo}:v1"
        proxy.add("GET", f"/blobs/{digest_of(ref, 'weights.bin', env)}", hold(never), times=None)

        def read() -> None:
            try:
                with Mount(ref, base / "mnt", env, log) as m:
                    started = time.monotonic()
                    try:
                        (m.where / "weights.bin").read_bytes()
                    except OSError as e:
                        seen["error"] = e
                    seen["took"] = time.monotonic() - started
                    seen["config.json"] = (m.where / "config.json").read_bytes()
                    proxy.clear()
                    never.set()
            except BaseException as e:  # noqa: BLE001 - the test shows it
                seen["failure"] = e
            finally:
                never.set()
                seen["log"] = log.read_text() if log.exists() else ""

        thread = threading.Thread(target=read, daemon=True)
        thread.start()
        seen["thread"] = thread
        try:
            yield seen
        finally:
            never.set()
            thread.join(timeout=120)
