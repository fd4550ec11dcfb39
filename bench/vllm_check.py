"""vLLM's model-loader plugin under a real vLLM (issue 89), on a fresh local registry.

    /work/vllmvenv/bin/python -m bench.vllm_check          # a venv holding vllm and ocibridge (-e)
    python3 -m bench.vllm_check --device cuda:0            # a GPU host without vLLM: steps 3 and 4


Run from the checkout (``bench`` importable), with the python of a virtualenv where vLLM and
ocibridge are installed (``pip install vllm`` and ``pip install -e .``): not the project's own.
``docker-registry`` comes from PATH. What it proves, each step printed with its result:

1. the plugin is discovered as vLLM discovers it: the ``vllm.general_plugins`` entry point, called
   by ``vllm.plugins.load_general_plugins()``; then ``--load-format ocibridge`` resolves through
   vLLM's own lookup (``get_model_loader``), from its own command-line parser and ``EngineArgs``;
2. the config vLLM reads comes from the registry: ``ocibridge.path(REF, exclude="*.safetensors")``
   (no weight file in it), read by vLLM's ``ModelConfig``;
3. the loader, called through vLLM's interface (``loader.load_weights(model, model_config)``),
   feeds every tensor, verified, to the model's ``load_weights``: a tiny Llama's checkpoint, each
   tensor equal to safetensors.torch's load of the pushed file; the model is a torch module with
   vLLM's ``load_weights(weights)`` (vLLM's own Llama needs a GPU platform to be built: tried,
   and what it said is printed);
4. a byte of the blob changed in the registry's storage: ``TensorMismatch``, and the model never
   gets the tensor of that chunk; a containers policy that rejects: refused before the load.

``--device cuda:0``: the loader's ``device`` setting (tensors made on the GPU, the model's
parameters there). Where vLLM is not installed, steps 1 and 2 are said to be skipped and steps 3
and 4 run through ``ocibridge.engines.weights.load_into``, the function the plugin's
``load_weights`` calls.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from bench.gpu_load import registry

#: a Llama small enough for a CPU: ~0.3M parameters in bf16, 2 layers
CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512,
    "max_position_embeddings": 256, "rms_norm_eps": 1e-5, "torch_dtype": "bfloat16", "tie_word_embeddings": False,
    "bos_token_id": 1, "eos_token_id": 2,
}


def say(step: str, result: Any) -> None:
    print(f"{step}: {result}", flush=True)


def tiny_llama(where: Path) -> dict[str, Any]:
    """The checkpoint as transformers writes it (seeded), its tensors as safetensors loads them."""
    import torch
    import transformers
    from safetensors.torch import load_file

    torch.manual_seed(89)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**CONFIG)).to(torch.bfloat16)
    model.save_pretrained(where, safe_serialization=True)
    (where / "config.json").write_text(json.dumps({**json.loads((where / "config.json").read_text()), **CONFIG}))
    return load_file(str(where / "model.safetensors"))


def recorder(expected: dict[str, Any], device: str | None) -> Any:
    """A torch module with vLLM's ``load_weights(weights)``: a parameter per checkpoint tensor,
    each copied in as it arrives, every name and tensor recorded, the names loaded returned."""
    import torch

    class Recorder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.params = torch.nn.ParameterDict({n.replace(".", "__"): torch.nn.Parameter(
                torch.empty_like(t, device=device), requires_grad=False) for n, t in expected.items()})
            self.received: dict[str, Any] = {}

        def load_weights(self, weights: Any) -> set[str]:
            loaded = set()
            for name, tensor in weights:
                self.received[name] = tensor
                self.params[name.replace(".", "__")].data.copy_(tensor)
                loaded.add("params." + name.replace(".", "__"))
            return loaded

    return Recorder()


def vllm_loader(ref: str, settings: dict[str, Any]) -> tuple[Callable[[Any, dict[str, Any]], None], Any]:
    """Steps 1 and 2: the plugin found and resolved as vLLM does it, vLLM's ModelConfig of the
    directory ``ocibridge.path`` made; a function loading a model through the plugin's loader."""
    import ocibridge

    found = [ep.value for ep in entry_points(group="vllm.general_plugins") if ep.name == "ocibridge"]
    say("1. entry point vllm.general_plugins:ocibridge", found)
    from vllm.config import ModelConfig
    from vllm.config.load import LoadConfig
    from vllm.model_executor.model_loader import get_model_loader
    from vllm.plugins import load_general_plugins

    try:
        get_model_loader(LoadConfig(load_format="ocibridge", model_loader_extra_config=settings))
        raise SystemExit("vllm_check: 'ocibridge' resolved before the plugins were loaded")
    except ValueError as e:
        say("1. before load_general_plugins()", f"ValueError: {e}")
    load_general_plugins()
    from vllm.engine.arg_utils import EngineArgs
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    config_dir = ocibridge.path(ref, exclude="*.safetensors")
    say("2. ocibridge.path(REF, exclude='*.safetensors')",
        f"{config_dir}: {sorted(p.name for p in config_dir.iterdir())}")
    argv = ["--model", str(config_dir), "--load-format", "ocibridge", "--model-loader-extra-config",
            json.dumps(settings), "--skip-tokenizer-init", "--dtype", "bfloat16"]
    try:  # vllm serve's own parser (it infers the device type while building its defaults)
        args = EngineArgs.add_cli_args(FlexibleArgumentParser()).parse_args(argv)
        engine_args = EngineArgs.from_cli_args(args)
        say("1. vllm's command-line parser", f"load_format {engine_args.load_format!r}, "
            f"model_loader_extra_config {engine_args.model_loader_extra_config}")
    except Exception as e:
        say("1. vllm's command-line parser", f"not run here: {type(e).__name__}: {str(e)[:120]}")
        # the two flags alone, as vLLM's parser declares them (their types and defaults from LoadConfig)
        from vllm.config.load import LoadConfig as Load
        from vllm.engine.arg_utils import get_kwargs

        flags = argparse.ArgumentParser()
        for name in ("load_format", "model_loader_extra_config"):
            declared = get_kwargs(Load)[name]
            flags.add_argument("--" + name.replace("_", "-"), type=declared["type"], default=declared["default"])
        known, _ = flags.parse_known_args(argv)
        say("1. --load-format and --model-loader-extra-config as vllm's parser declares them",
            f"load_format {known.load_format!r}, model_loader_extra_config {known.model_loader_extra_config}")
        engine_args = EngineArgs(model=str(config_dir), load_format=known.load_format,
                                 model_loader_extra_config=known.model_loader_extra_config,
                                 skip_tokenizer_init=True, dtype="bfloat16")
    loader = get_model_loader(engine_args.create_load_config())
    say("1. EngineArgs.create_load_config() + get_model_loader (load_format 'ocibridge')",
        f"{type(loader).__module__}.{type(loader).__qualname__}")
    assert type(loader).__qualname__.endswith("OcibridgeModelLoader"), type(loader)
    model_config = ModelConfig(model=str(config_dir), skip_tokenizer_init=True, dtype="bfloat16")
    say("2. ModelConfig(that directory)", f"architectures {model_config.architectures}, dtype "
                                          f"{model_config.dtype}, quantization {model_config.quantization}")
    try:
        loader.load_model(vllm_config=engine_args.create_engine_config(), model_config=model_config)
        say("3. vllm's own LlamaForCausalLM through loader.load_model", "built and loaded")
    except Exception as e:  # (no GPU here: vLLM's platform cannot build it)
        first = (str(e).splitlines() or [""])[0][:200]
        say("3. vllm's own LlamaForCausalLM through loader.load_model", f"not run here: {type(e).__name__}: {first}")

    def load(model: Any, extra: dict[str, Any]) -> None:
        get_model_loader(LoadConfig(load_format="ocibridge", model_loader_extra_config=extra)).load_weights(
            model, model_config)

    return load, loader


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", help="the loader's device setting (cuda:0: tensors made on the GPU)")
    device = parser.parse_args().device
    work = Path(tempfile.mkdtemp(prefix="vllm-check-"))
    os.environ["OCIBRIDGE_CACHE"] = str(work / "cache")
    import torch

    import ocibridge
    from ocibridge.engines.weights import WeightSource, load_into
    from ocibridge.errors import SignatureError

    try:
        import vllm

        have_vllm = f"vllm {vllm.__version__}"
    except ImportError:
        have_vllm = ""
    say("versions", f"{have_vllm or 'no vllm'}, torch {torch.__version__}, ocibridge {ocibridge.__version__}, "
                    f"CUDA: {torch.cuda.get_device_name() if torch.cuda.is_available() else 'none'}")
    with registry(work / "registry") as host:
        src = work / "tiny-llama"
        expected = tiny_llama(src)
        pushed = ocibridge.push(str(src), f"{host}/vllm/tiny-llama:v1",
                                options=ocibridge.PushOptions(chunk_threshold=1, chunk_size=64 * 1024))
        ref = pushed.reference
        say("pushed", f"{ref} ({len(expected)} tensors, {(src / 'model.safetensors').stat().st_size} bytes, "
                      f"chunk table: {'chunks' in pushed.extra})")
        settings: dict[str, Any] = {"reference": ref, **({"device": device} if device else {})}
        if have_vllm:
            load, _ = vllm_loader(ref, settings)
            how = "loader.load_weights(model, model_config)"
        else:
            say("1, 2", "not run: vllm is not installed here")

            def load(model: Any, extra: dict[str, Any]) -> None:
                load_into(model, WeightSource.from_settings(extra))
            how = "load_into(model, WeightSource.from_settings(settings)) (what the plugin's load_weights calls)"

        # 3. every tensor, verified, into the model's load_weights
        model = recorder(expected, device)
        started = time.perf_counter()
        load(model, settings)
        if device and device.startswith("cuda"):
            torch.cuda.synchronize()
        elapsed = time.perf_counter() - started
        assert sorted(model.received) == sorted(expected)
        where = {str(t.device) for t in model.received.values()}
        same = [n for n, t in expected.items() if torch.equal(model.received[n].cpu(), t)
                and torch.equal(model.params[n.replace(".", "__")].data.cpu(), t)]
        say(f"3. {how}", f"{len(model.received)} tensors received (on {sorted(where)}), {len(same)} equal to "
                         f"safetensors.torch.load_file's (in the model's parameters too), {elapsed:.2f} s")
        assert len(same) == len(expected)
        if device:
            assert where == {str(torch.device(device))}, where

        # 3. a parameter the checkpoint leaves unset: refused (vLLM's own rule through its loader)
        model = recorder({**expected, "lm_head.bias": torch.zeros(8)}, device)
        try:
            load(model, settings)
            raise SystemExit("vllm_check: a parameter left unset was not noticed")
        except (ValueError, ocibridge.OcibridgeError) as e:
            say("3. a parameter the checkpoint leaves unset", f"{type(e).__name__}: {str(e)[:160]}")

        # 4. a changed byte in the registry's storage; a policy that rejects
        with ocibridge.open_model(ref) as opened:
            layer = opened.file("model.safetensors").layer
        blob = work / "registry" / "storage" / "docker/registry/v2/blobs/sha256" / layer.digest[7:9] / \
            layer.digest[7:] / "data"
        data = bytearray(blob.read_bytes())
        data[len(data) - 1000] ^= 0xFF
        blob.write_bytes(bytes(data))
        model = recorder(expected, device)
        try:
            load(model, settings)
            raise SystemExit("vllm_check: a changed byte was loaded")
        except ocibridge.TensorMismatch as e:
            assert not set(e.tensors) & set(model.received), (e.tensors, sorted(model.received))
            say("4. a byte changed in the registry's blob", f"TensorMismatch ({e.tensors} never handed over; "
                f"{len(model.received)} of {len(expected)} verified tensors were): {str(e)[:160]}")
        reject = work / "reject.json"
        reject.write_text(json.dumps({"default": [{"type": "reject"}]}))
        model = recorder(expected, device)
        try:
            load(model, {**settings, "policy": str(reject)})
            raise SystemExit("vllm_check: a rejecting policy let the model load")
        except SignatureError as e:
            assert model.received == {}
            say("4. policy: reject", f"{type(e).__name__}, nothing handed over: {str(e)[:160]}")
    print("vllm_check: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
