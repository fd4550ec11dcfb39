"""Small synthetic models for tests."""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path

#: a BERT config AutoConfig loads (the smallest sizes it takes)
BERT_CONFIG = {"model_type": "bert", "hidden_size": 32, "num_attention_heads": 2, "num_hidden_layers": 1,
               "intermediate_size": 64, "vocab_size": 6}


@functools.cache
def _pattern(seed: int) -> bytes:
    """The weights' bytes for ``seed``, made once a process (a generator over 200,000 ints, ~10 ms,
    was made again by each of the suite's many calls)."""
    return bytes((i * 31 + seed) % 251 for i in range(200_000))


def make_model(root: Path, seed: int = 0) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    rnd = _pattern(seed)
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


def make_bert_model(root: Path, weights: int = 64) -> Path:
    """A tiny BERT that AutoConfig and AutoTokenizer load (no deep-learning framework needed);
    its weights ``256 * weights`` bytes that differ with the folder's name."""
    root.mkdir(parents=True)
    (root / "config.json").write_text(json.dumps(BERT_CONFIG))
    (root / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\nworld\n")
    (root / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "BertTokenizer",
                                                             "do_lower_case": True}))
    (root / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      "
                                             + hashlib.sha256(root.name.encode()).digest() * 8 * weights)
    (root / "extra").mkdir()
    (root / "extra" / "notes.md").write_text(f"# {root.name}\n")
    return root


def tree(root: Path) -> dict[str, tuple[bytes, int]]:
    """Relative path -> (content, executable bit) for every regular file under root."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink():
            out[p.relative_to(root).as_posix()] = (p.read_bytes(), p.stat().st_mode & 0o111 != 0)
    return out
