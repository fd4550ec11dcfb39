"""One process of bench/warm_gpu.py: a Llama-style model built from a transformers config (random
weights, a fixed seed), ``torch.compile``'d (default mode), its first compiled forward timed.

    python -m bench.warm_gpu_child make DIR --device cuda --size 1b [--weights]   # config (+ weights) for push
    python -m bench.warm_gpu_child run REF --device cuda --size 1b --out FILE [--warm --verify-key PUB]
                                   [--save --sign-key KEY]

The caller gives each ``run`` fresh, empty ``TORCHINDUCTOR_CACHE_DIR`` and ``TRITON_CACHE_DIR``
(the latter inside the former, so one directory is the whole cache). ``FILE`` gets the first
call's logits as float32 bytes; stdout one JSON line with wall-clock stamps (``time.time()``),
so the caller can count from the process's launch, and Inductor's FX graph cache hits and misses."""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

STARTED = time.time()

SIZES: dict[str, dict[str, int]] = {
    # ~1.1 B parameters: TinyLlama's shape
    "1b": {"hidden_size": 2048, "num_hidden_layers": 22, "intermediate_size": 5632, "num_attention_heads": 32,
           "num_key_value_heads": 4, "vocab_size": 32000},
    # the same flow in seconds on a CPU
    "tiny": {"hidden_size": 64, "num_hidden_layers": 2, "intermediate_size": 128, "num_attention_heads": 4,
             "num_key_value_heads": 2, "vocab_size": 256},
}
PROMPT_TOKENS = 64


def config(size: str) -> Any:
    from transformers import LlamaConfig

    return LlamaConfig(**SIZES[size], max_position_embeddings=2048, tie_word_embeddings=False)


def build(size: str, device: str) -> Any:
    """The model with the same weights in every process (seeded init on ``device``)."""
    import torch
    from transformers import LlamaForCausalLM

    torch.manual_seed(0)
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    with torch.device(device):
        model = LlamaForCausalLM(config(size))
    return model.to(dtype).eval()


def prompt(size: str, device: str) -> Any:
    import torch

    generator = torch.Generator().manual_seed(1)
    return torch.randint(0, SIZES[size]["vocab_size"], (1, PROMPT_TOKENS), generator=generator).to(device)


def make(args: argparse.Namespace) -> dict[str, Any]:
    if args.weights:
        model = build(args.size, args.device)
        model.save_pretrained(args.target)
        params = sum(p.numel() for p in model.parameters())
    else:
        config(args.size).save_pretrained(args.target)
        params = 0
    return {"params": params}


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch
    from torch._dynamo.utils import counters

    import ocibridge
    from ocibridge.api.options import SignOptions
    from ocibridge.api.policy import verification

    cache = os.environ["TORCHINDUCTOR_CACHE_DIR"]
    report: dict[str, Any] = {"started": STARTED, "imported": time.time()}
    if args.warm:
        loaded = ocibridge.warm_load(args.target, cache, engine="inductor", verify=verification(keys=[args.verify_key]))
        report["loaded"] = loaded.as_dict()
    report["restored"] = time.time()
    model = build(args.size, args.device)
    tokens = prompt(args.size, args.device)
    params = sum(p.numel() for p in model.parameters())
    if args.device.startswith("cuda"):
        torch.cuda.synchronize()
    report["built"] = time.time()
    compiled = torch.compile(model)
    with torch.no_grad():
        logits = compiled(input_ids=tokens, use_cache=False).logits
    first = int(logits[0, -1].argmax())
    if args.device.startswith("cuda"):
        torch.cuda.synchronize()
    report["first_token"] = time.time()
    with open(args.out, "wb") as f:
        f.write(logits.float().cpu().numpy().tobytes())
    report.update(params=params, token=first, hits=counters["inductor"]["fxgraph_cache_hit"],
                  misses=counters["inductor"]["fxgraph_cache_miss"])
    if args.save:
        report["saved"] = ocibridge.warm_save(args.target, cache, engine="inductor",
                                              sign=SignOptions(key=args.sign_key)).as_dict()
    return report


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=("make", "run"))
    parser.add_argument("target", help="make: the directory to write; run: the model's reference")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--size", choices=tuple(SIZES), default="1b")
    parser.add_argument("--weights", action="store_true", help="make: save the weights too, not the config only")
    parser.add_argument("--out")
    parser.add_argument("--warm", action="store_true")
    parser.add_argument("--verify-key")
    parser.add_argument("--save", action="store_true", help="run: then attach the cache directory, signed")
    parser.add_argument("--sign-key")
    args = parser.parse_args()
    print(json.dumps(make(args) if args.mode == "make" else run(args)))


if __name__ == "__main__":
    main()
