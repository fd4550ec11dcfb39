"""vLLM's model-loader plugin (issue 89), the part that needs no vLLM: a registry model's weights
as the ``(name, torch.Tensor)`` pairs vLLM's ``model.load_weights`` takes, from the real registry.
Every tensor equals safetensors.torch's own load of the pulled file; a tampered chunk raises
before any tensor it touches reaches the model; a refusing policy raises before a blob is read;
the loader's settings (``--model-loader-extra-config``) are read with one error line. The
plugin's module is the only one that imports vLLM and nothing imports it (bench/vllm_check.py
runs it under a real vLLM)."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from support.faultproxy import corrupt_at

import ocibridge
from ocibridge.engines.weights import WeightSource, load_into, weights
from ocibridge.errors import OcibridgeError, SignatureError
from tests.code.test_import_layers import MODULES, graph
from tests.lazy.test_load_tensors import CHUNK, SMALL_PARTS, layer_of, offset_of
from tests.lazy.test_load_tensors_torch import assert_same, in_file_order, models, raw

__all__ = ["models"]  # (the module-scoped fixture: one table and one plain push of every dtype)

ROOT = Path(__file__).resolve().parents[2]


class RecordingModel(torch.nn.Module):
    """A model with vLLM's ``load_weights(weights)``: it copies each tensor into its parameter of
    that name (or keeps it, for a name it has no parameter for) and returns the names it loaded."""

    def __init__(self, shapes: dict[str, tuple[tuple[int, ...], torch.dtype]]):
        super().__init__()
        self.weights = torch.nn.ParameterDict(
            {name.replace(".", "_"): torch.nn.Parameter(torch.empty(shape, dtype=dtype), requires_grad=False)
             for name, (shape, dtype) in shapes.items()})
        self.received: dict[str, torch.Tensor] = {}

    def load_weights(self, weights: Any) -> set[str]:
        loaded = set()
        for name, tensor in weights:
            self.received[name] = tensor
            key = name.replace(".", "_")
            if key in self.weights:
                self.weights[key].data.copy_(tensor)
                loaded.add(f"weights.{key}")
        return loaded


def test_every_weight_equals_safetensors_own_load_once(models):
    for which in ("table", "plain"):
        ref, pulled, _ = models[which]
        want = in_file_order(pulled)
        got = list(weights(ref, transfer=SMALL_PARTS))  # (in the order they are verified)
        assert sorted(name for name, _ in got) == sorted(want), which  # each once
        assert_same(dict(got), want)


def test_load_into_feeds_every_verified_tensor_to_the_models_load_weights(models):
    ref, pulled, _ = models["table"]
    want = in_file_order(pulled)
    model = RecordingModel({name: (tuple(t.shape), t.dtype) for name, t in want.items()})
    loaded = load_into(model, WeightSource.from_settings({"reference": ref}), transfer=SMALL_PARTS)
    assert loaded == {name for name, _ in model.named_parameters()}
    assert_same(model.received, want)
    for name, tensor in want.items():  # (and copied into the model's parameters)
        assert raw(model.weights[name.replace(".", "_")].data) == raw(tensor), name


def test_a_parameter_the_weights_leave_unset_raises_naming_it(models):
    ref, pulled, _ = models["table"]
    shapes = {name: (tuple(t.shape), t.dtype) for name, t in in_file_order(pulled).items()}
    model = RecordingModel({**shapes, "lm_head.weight": ((4, 4), torch.float32)})
    with pytest.raises(OcibridgeError, match=r"leave 1 parameter\(s\) unset: weights.lm_head_weight$"):
        load_into(model, ref, transfer=SMALL_PARTS)
    loaded = load_into(model, ref, strict=False, transfer=SMALL_PARTS)  # (vLLM: a quantized model)
    assert loaded is not None and "weights.lm_head_weight" not in loaded and len(loaded) == len(shapes)


def test_a_tampered_chunk_raises_and_the_model_never_gets_its_tensor(models, fault_proxy):
    _, pulled, repo = models["table"]
    layer = layer_of(f"{fault_proxy.host}/{repo}:v1", "model.safetensors")
    fault_proxy.clear()
    fault_proxy.add("GET", f"/blobs/{layer.digest}", corrupt_at(offset_of(pulled, "embed.weight") + 3 * CHUNK + 5),
                    times=None)
    shapes = {name: (tuple(t.shape), t.dtype) for name, t in in_file_order(pulled).items()}
    model = RecordingModel(shapes)
    with pytest.raises(ocibridge.TensorMismatch, match="embed.weight") as caught:
        load_into(model, f"{fault_proxy.host}/{repo}:v1", transfer=SMALL_PARTS)
    assert caught.value.tensors == ("embed.weight",)
    assert "embed.weight" not in model.received


def test_a_refusing_policy_raises_before_any_blob_is_read(models, fault_proxy, tmp_path):
    _, _, repo = models["table"]
    rejecting = tmp_path / "reject.json"
    rejecting.write_text(json.dumps({"default": [{"type": "reject"}]}))
    source = WeightSource.from_settings({"reference": f"{fault_proxy.host}/{repo}:v1", "policy": str(rejecting)})
    fault_proxy.clear()
    model = RecordingModel({})
    with pytest.raises(SignatureError, match="refused"):
        load_into(model, source)
    assert model.received == {}
    assert fault_proxy.requests_matching(None, "/blobs/") == []


@pytest.mark.parametrize(("settings", "said"), [
    (None, r'^ocibridge loader: no "reference"'),
    ({"reference": ""}, r'^ocibridge loader: no "reference"'),
    ({"reference": "r/m:v1", "polcy": "p.json"},
     r"^ocibridge loader: unknown setting\(s\) 'polcy'; known: reference, "),
    ({"reference": "r/m:v1", "verify_keys": 3}, r'^ocibridge loader: "verify_keys" is a key file'),
    ({"reference": "r/m:v1", "device": 0}, r"^ocibridge loader: 'device' is a string, not 0$"),
    ({"reference": "r/m:v1", "max_bytes": "1G"}, r"^ocibridge loader: \"max_bytes\" is a positive number"),
    ({"reference": "r/m:v1", "through_cache": "yes"},
     r"^ocibridge loader: \"through_cache\" is true or false, not 'yes'$"),
])
def test_bad_loader_settings_are_one_error_line(settings, said):
    with pytest.raises(OcibridgeError, match=said) as caught:
        WeightSource.from_settings(settings)
    assert "\n" not in str(caught.value)


def test_loader_settings_carry_the_reference_device_and_bound():
    source = WeightSource.from_settings({"reference": "r/m:v1", "device": "cuda:0", "max_bytes": 1 << 20})
    assert (source.reference, source.device, source.max_bytes, source.verify) == ("r/m:v1", "cuda:0", 1 << 20, None)
    assert (source.shared(1), source.shared(2)) == (False, True)  # (ranks of one node: through its cache)
    for said in (False, True):
        assert WeightSource.from_settings({"reference": "r/m:v1", "through_cache": said}).shared(4) is said


def test_only_the_plugin_module_imports_vllm_and_nothing_imports_it():
    """``pip install ocibridge`` stays enough for everything else: vLLM is imported by the
    plugin's module alone, inside its functions, and no module of the package imports that one
    (vLLM reaches it through the entry point that pyproject.toml names, in its own group)."""
    def vllm_imports(nodes: Any) -> list[ast.stmt]:
        return [n for n in nodes if isinstance(n, (ast.Import, ast.ImportFrom)) and imports_vllm(n)]

    importers = sorted(m for m, p in MODULES.items() if vllm_imports(ast.walk(ast.parse(p.read_text()))))
    assert importers == ["ocibridge.engines.vllm_loader"]
    assert vllm_imports(ast.parse(MODULES["ocibridge.engines.vllm_loader"].read_text()).body) == []  # (lazily)
    assert [m for m, edges in graph().items() if "ocibridge.engines.vllm_loader" in edges] == []
    import tomllib  # (3.11 on: the suite's Python)

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["vllm.general_plugins"] == {"ocibridge": "ocibridge.engines.vllm_loader:register"}
    assert [r for r in project["optional-dependencies"]["vllm"] if r.startswith("vllm")]
    assert not [r for r in project["dependencies"] if r.startswith(("vllm", "torch"))]


def imports_vllm(node: ast.Import | ast.ImportFrom) -> bool:
    names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
    return any(n.split(".")[0] == "vllm" for n in names)


# -- the vLLM releases the plugin was tested with ---------------------------------------------------
def test_the_vllm_extra_is_the_range_the_plugin_accepts():
    """pyproject.toml's ``vllm`` extra and the plugin's own check say one range: every release
    pip would install with ``ocibridge[vllm]`` registers, and no other does."""
    import tomllib
    from packaging.requirements import Requirement

    from ocibridge.engines.vllm_loader import TESTED_VLLM, untested

    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["vllm"]
    wanted = Requirement(next(r for r in extra if r.startswith("vllm")))
    assert str(wanted.specifier) == str(Requirement(f"vllm{TESTED_VLLM}").specifier)
    for version in ("0.11.0", "0.32.9", "0.33.0", "0.33.1", "0.33.2+cu129", "0.34.0", "0.330.1", "1.0.0"):
        assert (untested(version) is None) == wanted.specifier.contains(version), version
    assert untested("0.33.1") is None and untested("0.34.0") is not None


def stand_in_vllm(monkeypatch: pytest.MonkeyPatch, version: str) -> list[tuple[str, type]]:
    """A module named ``vllm`` whose ``__version__`` is ``version``, with the names the plugin
    takes from it (its worker's compile step does nothing here); returns the load formats
    registered through it. (The version rule only: the real vLLM runs the plugin in
    bench/vllm_check.py.)"""
    import types

    from ocibridge.engines import vllm_loader

    registered: list[tuple[str, type]] = []
    modules = {name: types.ModuleType(name) for name in (
        "vllm", "vllm.model_executor", "vllm.model_executor.model_loader",
        "vllm.model_executor.model_loader.base_loader", "vllm.model_executor.model_loader.default_loader",
        "vllm.v1", "vllm.v1.worker", "vllm.v1.worker.gpu_worker")}
    modules["vllm"].__version__ = version  # type: ignore[attr-defined]
    modules["vllm.model_executor.model_loader"].register_model_loader = (  # type: ignore[attr-defined]
        lambda name: lambda cls: registered.append((name, cls)) or cls)
    modules["vllm.model_executor.model_loader.base_loader"].BaseModelLoader = type(  # type: ignore[attr-defined]
        "BaseModelLoader", (), {"__init__": lambda self, load_config: None})
    modules["vllm.model_executor.model_loader.default_loader"].DefaultModelLoader = type(  # type: ignore[attr-defined]
        "DefaultModelLoader", (), {})
    modules["vllm.v1.worker.gpu_worker"].Worker = type(  # type: ignore[attr-defined]
        "Worker", (), {"compile_or_warm_up_model": lambda self: None})
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(vllm_loader, "_registered", False)
    monkeypatch.setattr(vllm_loader, "_after_compile_calls", [])
    return registered


@pytest.mark.parametrize("version", ["0.34.0", "0.11.2", "1.0.0rc1"])
def test_an_untested_vllm_gets_one_line_and_no_load_format(monkeypatch, capsys, version):
    from ocibridge.engines.vllm_loader import register

    registered = stand_in_vllm(monkeypatch, version)
    register()
    register()  # (vLLM calls every plugin in each process, maybe twice: said once)
    err = capsys.readouterr().err
    assert err == (f"ocibridge: vLLM {version} is not a release this plugin was tested with (vllm>=0.33,<0.34): "
                   "--load-format ocibridge is not registered; install a vLLM in that range "
                   "(pip install 'ocibridge[vllm]') or load the model another way (docs/api.md, \"vLLM\")\n")
    assert registered == []


def test_a_tested_vllm_gets_the_load_format_once(monkeypatch, capsys):
    from ocibridge.engines.vllm_loader import LOAD_FORMAT, register

    registered = stand_in_vllm(monkeypatch, "0.33.0")
    register()
    register()
    assert [name for name, _ in registered] == [LOAD_FORMAT] and capsys.readouterr().err == ""
    loader = registered[0][1](types_namespace(model_loader_extra_config={"reference": "r/m:v1"}))
    assert loader.source.reference == "r/m:v1"


def types_namespace(**fields: Any) -> Any:
    import types

    return types.SimpleNamespace(**fields)
