"""Synthetic models: random (incompressible, unique) weights and small text files.

Content is pseudo-random from a seeded generator, so every weight is distinct (no blob is
shared by accident) and generation runs at memory speed, not at ``/dev/urandom`` speed.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

MiB = 1024 * 1024
_BLOCK = 4 * MiB


@dataclass
class Model:
    """A model directory and the files the peers are given (paths relative to ``root``)."""

    name: str
    root: Path
    files: list[str]

    @property
    def size(self) -> int:
        return sum((self.root / f).stat().st_size for f in self.files)

    @property
    def weights(self) -> list[str]:
        return [f for f in self.files if f.endswith((".safetensors", ".bin"))]


def write_random(path: Path, size: int, seed: int) -> None:
    """``size`` bytes of seeded pseudo-random data, written in 4 MiB blocks."""
    rng = random.Random(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        left = size
        while left:
            n = min(_BLOCK, left)
            f.write(rng.randbytes(n))
            left -= n


def _small_files(root: Path) -> list[str]:
    config = {"architectures": ["BenchForCausalLM"], "hidden_size": 4096, "num_hidden_layers": 32}
    files = {
        "config.json": json.dumps(config, indent=2),
        "generation_config.json": json.dumps({"max_new_tokens": 256}),
        "tokenizer.json": json.dumps({"model": {"vocab": {f"t{i}": i for i in range(20000)}}}),
        "README.md": "# bench model\n\nSynthetic weights for benchmarks.\n",
        "LICENSE": "Apache-2.0\n",
    }
    for name, text in files.items():
        (root / name).write_text(text)
    return sorted(files)


def single_weight(root: Path, size: int, seed: int = 1) -> Model:
    """One raw weight of ``size`` bytes and nothing else."""
    root.mkdir(parents=True, exist_ok=True)
    write_random(root / "model.safetensors", size, seed)
    return Model(f"1x{size // MiB}MiB", root, ["model.safetensors"])


def multi_weight(root: Path, count: int, size: int, seed: int = 100) -> Model:
    """``count`` weights of ``size`` bytes plus config, tokenizer and doc files."""
    root.mkdir(parents=True, exist_ok=True)
    names = []
    for i in range(count):
        name = f"model-{i + 1:05d}-of-{count:05d}.safetensors"
        write_random(root / name, size, seed + i)
        names.append(name)
    return Model(f"{count}x{size // MiB}MiB", root, sorted(names + _small_files(root)))


def many_files(root: Path, count: int, seed: int = 7) -> Model:
    """``count`` small files (200 B – 4 KiB) in 100 sub-directories: code, configs and docs."""
    rng = random.Random(seed)
    names = []
    kinds = (".py", ".json", ".md")
    for i in range(count):
        rel = f"part{i % 100:03d}/file{i:06d}{kinds[i % 3]}"
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(rng.randbytes(rng.randrange(100, 2048)).hex().encode())
        names.append(rel)
    return Model(f"{count}files", root, sorted(names))
