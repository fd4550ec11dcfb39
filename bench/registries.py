"""Real registries for the benchmark, and what their access logs say was uploaded.

The registry process comes from the test support code (one implementation of "start
docker-registry on a free loopback port"). Uploaded bytes are counted from the registry's own
log, independently of what any client claims: every completed upload (``PUT
/v2/<repo>/blobs/uploads/…&digest=…`` answered 201) is looked up in the registry's storage for
its size; cross-repository mounts (``POST …?mount=`` answered 201) move no bytes.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from tests.support.registry import RegistryProcess

_PUT_UPLOAD = re.compile(
    r'"PUT /v2/(?P<repo>[^ ]+?)/blobs/uploads/[^ ]*?digest=(?P<digest>sha256(?::|%3A)[0-9a-f]{64})[^ ]* '
    r'HTTP/[0-9.]+" 201 '
)
_POST_MOUNT = re.compile(r'"POST /v2/[^ ]+/blobs/uploads/\?[^ ]*mount=[^ ]+ HTTP/[0-9.]+" 201 ')
_PATCH = re.compile(r'"PATCH /v2/[^ ]+/blobs/uploads/[^ ]* HTTP/[0-9.]+" 202 ')
_BLOB_GET = re.compile(r'"GET /v2/[^ ]+/blobs/sha256:[0-9a-f]{64} HTTP/[0-9.]+" 20[06] ')


@dataclass
class UploadCount:
    """What the registry ingested between two log positions."""

    blobs: int
    blob_bytes: int
    mounts: int
    patches: int


class AtUrl(Protocol):
    """A registry as a bench reaches it: its base URL (a BenchRegistry, or the suite's)."""

    @property
    def url(self) -> str: ...


class BenchRegistry:
    """A running registry plus a log cursor for counting uploads of one measured run."""

    def __init__(self, workdir: Path):
        self.process = RegistryProcess(workdir, log_level="warn")
        self._mark = 0

    @property
    def host(self) -> str:
        return self.process.host

    @property
    def url(self) -> str:
        return self.process.url

    def blob_size(self, digest: str) -> int:
        hexpart = digest.split(":", 1)[1]
        data = self.process.storage / "docker/registry/v2/blobs/sha256" / hexpart[:2] / hexpart / "data"
        return data.stat().st_size

    def mark(self) -> None:
        """Start counting uploads from now on."""
        self._mark = self._log_size()

    def uploads_since_mark(self) -> UploadCount:
        with self.process.log_file.open("rb") as f:
            f.seek(self._mark)
            text = f.read().decode(errors="replace")
        blobs = blob_bytes = 0
        for m in _PUT_UPLOAD.finditer(text):
            blobs += 1
            blob_bytes += self.blob_size(m.group("digest").replace("%3A", ":"))
        return UploadCount(blobs, blob_bytes, len(_POST_MOUNT.findall(text)), len(_PATCH.findall(text)))

    def blob_gets_since_mark(self) -> int:
        """Blob GETs answered (200, or 206 to a Range) since :meth:`mark`: the requests a reader made."""
        with self.process.log_file.open("rb") as f:
            f.seek(self._mark)
            return len(_BLOB_GET.findall(f.read().decode(errors="replace")))

    def _log_size(self) -> int:
        try:
            return self.process.log_file.stat().st_size
        except FileNotFoundError:
            return 0

    def cpu_seconds(self) -> float:
        """The registry process's user+system CPU seconds so far (0 when it cannot be read)."""
        pid = self.process.pid
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime

    def stop(self) -> None:
        self.process.stop()


@contextlib.contextmanager
def fresh_registry(parent: Path) -> Iterator[BenchRegistry]:
    """A registry with empty storage, removed (storage included) on exit."""
    workdir = Path(tempfile.mkdtemp(prefix="registry-", dir=parent))
    registry = BenchRegistry(workdir)
    try:
        yield registry
    finally:
        registry.stop()
        shutil.rmtree(workdir, ignore_errors=True)
