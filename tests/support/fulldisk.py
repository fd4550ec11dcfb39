"""A full disk for a command: a 64 KiB tmpfs mounted in a mount namespace of the test's own
(``unshare``, util-linux: no root needed), with a model too large for it to write."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def model_and_places(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A ~300 KB model directory, the (empty) directory the tmpfs will cover, and a cache directory."""
    model = tmp_path / "m"
    model.mkdir()
    (model / "model.safetensors").write_bytes(os.urandom(300_000))
    (model / "config.json").write_text("{}")
    full, cache = tmp_path / "full", tmp_path / "cache"
    full.mkdir()
    return model, full, cache


def run_on_full_disk(full: Path, script: str) -> subprocess.CompletedProcess[str]:
    """``script`` (sh; ``"$0"`` is this Python) run once ``full`` is the 64 KiB tmpfs, in the environment as it is."""
    line = f'mount -t tmpfs -o size=64k tmpfs "{full}" && {script}'
    return subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", line, sys.executable],
                          env=dict(os.environ), capture_output=True, text=True, timeout=120, check=False)
