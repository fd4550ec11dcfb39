"""One process of the warm-start measurement (bench/warm_start.py) and of its test
(tests/warm/test_warm_compile.py): a small transformer compiled with ``torch.compile`` (Inductor's
C++ backend on the CPU), its first compiled call timed.

    python -m bench.warm_child save REF --out FILE --sign-key KEY   # compile, then warm save --torch
    python -m bench.warm_child run REF --out FILE [--warm --verify-key PUB]

``--layers N`` sets the transformer's depth (2; the test takes 1: what it checks holds at any depth,
and each layer adds compile time).

The caller gives each process fresh, empty ``TORCHINDUCTOR_CACHE_DIR`` and ``TRITON_CACHE_DIR``.
``FILE`` gets the output's bytes; stdout one JSON line: the seconds from before ``warm load``
(or the compile, cold) to the first call's end, and Inductor's FX graph cache hits and misses."""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

import torch
from torch import nn


class Block(nn.Module):
    """Pre-norm attention and MLP, as a decoder layer has them."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, 4 * dim)
        self.down = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).unbind(2)
        att = nn.functional.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                         is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
        return x + self.down(nn.functional.gelu(self.up(self.norm2(x))))


class Tiny(nn.Module):
    def __init__(self, vocab: int = 256, dim: int = 64, heads: int = 4, layers: int = 2) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def first_call(layers: int = 2) -> torch.Tensor:
    torch.manual_seed(0)
    model = Tiny(layers=layers).eval()
    tokens = torch.randint(0, 256, (2, 32))
    compiled = torch.compile(model)
    with torch.no_grad():
        return compiled(tokens)


def _inductor_dir(form: str) -> str | None:
    return os.environ["TORCHINDUCTOR_CACHE_DIR"] if form == "dir" else None


def _engine(form: str) -> str:
    return "inductor" if form == "dir" else "torch"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=("save", "run"))
    parser.add_argument("ref")
    parser.add_argument("--out", required=True)
    parser.add_argument("--warm", action="store_true")
    parser.add_argument("--sign-key")
    parser.add_argument("--verify-key")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--form", choices=("torch", "dir"), default="torch",
                        help="torch: save_cache_artifacts()'s bytes; dir: Inductor's whole cache directory")
    args = parser.parse_args()

    from torch._dynamo.utils import counters

    import ocibridge
    from ocibridge.api.options import SignOptions
    from ocibridge.api.policy import verification

    started = time.perf_counter()
    loaded: Any = None
    if args.warm:
        loaded = ocibridge.warm_load(args.ref, _inductor_dir(args.form), torch=args.form == "torch",
                                     engine=_engine(args.form), verify=verification(keys=[args.verify_key]))
    out = first_call(args.layers)
    seconds = time.perf_counter() - started
    with open(args.out, "wb") as f:
        f.write(out.numpy().tobytes())
    report: dict[str, Any] = {"seconds": seconds, "hits": counters["inductor"]["fxgraph_cache_hit"],
                              "misses": counters["inductor"]["fxgraph_cache_miss"]}
    if loaded is not None:
        report["loaded"] = loaded.as_dict()
    if args.mode == "save":
        report["saved"] = ocibridge.warm_save(args.ref, _inductor_dir(args.form), torch=args.form == "torch",
                                              engine=_engine(args.form), sign=SignOptions(key=args.sign_key)).as_dict()
    print(json.dumps(report))


if __name__ == "__main__":
    main()
