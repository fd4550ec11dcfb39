"""Small synthetic models for tests."""

from __future__ import annotations

import os
from pathlib import Path


def make_model(root: Path, seed: int = 0) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    rnd = bytes((i * 31 + seed) % 251 for i in range(200_000))
    (root / "model.safetensors").write_bytes(rnd)
    (root / "weights").mkdir(exist_ok=True)
    (root / "weights" / "part-2.bin").write_bytes(rnd[::-1])
    (root / "config.json").write_text('{"hidden": 4}\n')
    (root / "tokenizer.json").write_text('{"vocab": ["a", "b"]}\n')
    (root / "README.md").write_text("# test model\n")
    (root / "scripts").mkdir(exist_ok=True)
    run = root / "scripts" / "run.sh"
    run.write_text("#!/bin/sh\necho run\n")
    os.chmod(run, 0o755)
    (root / "data.csv").write_text("a,b\n1,2\n")
    return root


def tree(root: Path) -> dict[str, tuple[bytes, int]]:
    """Relative path -> (content, executable bit) for every regular file under root."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink():
            out[p.relative_to(root).as_posix()] = (p.read_bytes(), p.stat().st_mode & 0o111 != 0)
    return out
