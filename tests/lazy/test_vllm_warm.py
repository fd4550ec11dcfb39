"""The vLLM plugin's warm start (ocibridge/engines/vllm_warm.py, docs/warm.md "Engines"), with
the stand-in ``vllm`` module of tests/lazy/test_vllm_plugin.py and the real registry: with
``"warm": "load"`` the loader restores the model's compile cache for this process's key into
``$VLLM_CACHE_ROOT/torch_compile_cache`` byte for byte before the first weight reaches the
model (vLLM compiles after the weights are in); a cache for another vLLM, or one unsigned
where a key is asked, restores nothing, and the weights still load. With ``"warm": "save"``
the plugin attaches the cache directory once the stand-in worker's compile step has returned
(vLLM's point where every graph is compiled), signed, unless one of that key is attached."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import save_file

import ocibridge
from ocibridge.cli import main
from ocibridge.errors import OcibridgeError
from tests.lazy.test_vllm_plugin import stand_in_vllm
from tests.signing_keys import key_pair
from tests.warm.test_warm import _cache_dir, _files

VLLM = "0.33.1"


@pytest.fixture
def signed_model(tmp_path, registry, unique_repo) -> tuple[str, Path, Path]:
    """A model of one tensor, signed: (reference, private key, public key)."""
    private, public = key_pair(tmp_path / "k")
    src = tmp_path / "src"
    src.mkdir()
    (src / "config.json").write_text('{"model_type": "test"}')
    save_file({"w": torch.arange(12.0).reshape(3, 4)}, str(src / "model.safetensors"), metadata={"format": "pt"})
    ref = ocibridge.push(str(src), f"{registry.host}/{unique_repo}:v1").reference
    ocibridge.sign(ref, ocibridge.SignOptions(key=private))
    return ref, private, public


class SnapshotModel(torch.nn.Module):
    """vLLM's ``load_weights(weights)``, noting what the compile cache directory held when the
    first weight arrived."""

    def __init__(self, cache: Path):
        super().__init__()
        self.cache = cache
        self.cache_at_first_weight: dict[str, tuple[bytes, bool]] | None = None
        self.received: dict[str, torch.Tensor] = {}

    def load_weights(self, weights: Any) -> set[str]:
        for name, tensor in weights:
            if self.cache_at_first_weight is None:
                self.cache_at_first_weight = _files(self.cache) if self.cache.exists() else {}
            self.received[name] = tensor
        return set(self.received)


def load_with_plugin(monkeypatch, tmp_path, settings: dict[str, Any]) -> tuple[SnapshotModel, Path]:
    """The plugin's loader (registered through the stand-in vLLM) loading the model with
    ``settings``, vLLM's cache root a fresh directory: the model, and the cache directory."""
    from ocibridge.engines.vllm_loader import register

    monkeypatch.setenv("VLLM_CACHE_ROOT", str(tmp_path / "vllm-root"))
    registered = stand_in_vllm(monkeypatch, VLLM)
    register()
    loader = registered[0][1](types.SimpleNamespace(model_loader_extra_config=settings))
    cache = tmp_path / "vllm-root" / "torch_compile_cache"
    model = SnapshotModel(cache)
    loader.load_weights(model, types.SimpleNamespace(quantization="stand-in"))  # (no parameter check)
    return model, cache


def test_warm_load_restores_the_cache_before_the_first_weight(signed_model, tmp_path, monkeypatch, capsys):
    ref, private, public = signed_model
    saved = ocibridge.warm_save(ref, _cache_dir(tmp_path / "cache"), engine="vllm", engine_version=VLLM,
                                sign=ocibridge.SignOptions(key=private))
    model, cache = load_with_plugin(monkeypatch, tmp_path, {"reference": ref, "verify_keys": str(public),
                                                            "warm": "load"})
    assert model.cache_at_first_weight == _files(tmp_path / "cache")  # byte for byte, modes too, before
    assert _files(cache) == _files(tmp_path / "cache")
    assert torch.equal(model.received["w"], torch.arange(12.0).reshape(3, 4))
    err = capsys.readouterr().err
    assert err == (f"ocibridge: warm start: compile cache {saved.digest[:19]} restored into {cache} "
                   f"(3 files, {sum(len(data) for data, _ in _files(cache).values())} bytes, "
                   "signature verified)\n")


def test_a_cache_for_another_vllm_restores_nothing_and_the_weights_load(signed_model, tmp_path, monkeypatch,
                                                                          capsys):
    ref, private, public = signed_model
    ocibridge.warm_save(ref, _cache_dir(tmp_path / "cache"), engine="vllm", engine_version="0.33.0",
                        sign=ocibridge.SignOptions(key=private))
    model, cache = load_with_plugin(monkeypatch, tmp_path, {"reference": ref, "verify_keys": str(public),
                                                            "warm": "load"})
    assert not cache.exists() and model.cache_at_first_weight == {}
    assert torch.equal(model.received["w"], torch.arange(12.0).reshape(3, 4))
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("ocibridge: warm start: ")
    assert f"engine-version differs (here {VLLM}, the cache has 0.33.0)" in err and err.endswith(
        "; vLLM compiles cold\n")


def test_an_unsigned_cache_is_refused_where_a_key_is_asked(signed_model, tmp_path, monkeypatch, capsys):
    ref, _, public = signed_model
    ocibridge.warm_save(ref, _cache_dir(tmp_path / "cache"), engine="vllm", engine_version=VLLM)
    model, cache = load_with_plugin(monkeypatch, tmp_path, {"reference": ref, "verify_keys": str(public),
                                                            "warm": "load", "warm_allow_unsigned": True})
    assert not cache.exists() and model.cache_at_first_weight == {}
    assert torch.equal(model.received["w"], torch.arange(12.0).reshape(3, 4))
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "refused" in err and err.endswith("; vLLM compiles cold\n")


def test_without_warm_nothing_is_asked_of_the_caches(signed_model, tmp_path, monkeypatch, capsys):
    ref, private, public = signed_model
    ocibridge.warm_save(ref, _cache_dir(tmp_path / "cache"), engine="vllm", engine_version=VLLM,
                        sign=ocibridge.SignOptions(key=private))
    model, cache = load_with_plugin(monkeypatch, tmp_path, {"reference": ref, "verify_keys": str(public)})
    assert not cache.exists() and "w" in model.received and capsys.readouterr().err == ""


def start_engine(monkeypatch, root: Path, settings: dict[str, Any], compiles: Path | None) -> SnapshotModel:
    """One start of the stand-in engine on a node whose vLLM cache root is ``root``: the plugin's
    loader loads the weights, then the worker's compile step writes ``compiles``' files that the
    cache directory lacks (as vLLM compiles what it finds no cache for), and returns."""
    from ocibridge.engines.vllm_loader import register

    monkeypatch.setenv("VLLM_CACHE_ROOT", str(root))
    registered = stand_in_vllm(monkeypatch, VLLM)
    register()
    cache = root / "torch_compile_cache"
    worker = sys.modules["vllm.v1.worker.gpu_worker"].Worker

    def compile_step(self: Any) -> None:
        for rel, (data, executable) in (_files(compiles) if compiles is not None else {}).items():
            if not (cache / rel).exists():
                (cache / rel).parent.mkdir(parents=True, exist_ok=True)
                (cache / rel).write_bytes(data)
                (cache / rel).chmod(0o755 if executable else 0o644)

    monkeypatch.setattr(worker, "compile_or_warm_up_model", compile_step)
    loader = registered[0][1](types.SimpleNamespace(model_loader_extra_config=settings))
    model = SnapshotModel(cache)
    loader.load_weights(model, types.SimpleNamespace(quantization="stand-in"))
    worker().compile_or_warm_up_model()
    return model


def test_save_after_the_first_compile_then_a_fresh_node_starts_warm(signed_model, tmp_path, monkeypatch, capsys):
    ref, private, public = signed_model
    compiled = _cache_dir(tmp_path / "compiled")
    saving = {"reference": ref, "verify_keys": str(public), "warm": "save", "warm_key": str(private)}
    start_engine(monkeypatch, tmp_path / "node-a", saving, compiled)
    err = capsys.readouterr().err
    listed = ocibridge.warm_caches(ref).caches
    assert len(listed) == 1 and listed[0].key.engine == "vllm" and listed[0].key.engine_version == VLLM
    assert err == (f"ocibridge: warm start: compile cache {listed[0].digest[:19]} saved from "
                   f"{tmp_path / 'node-a' / 'torch_compile_cache'} for the next start (3 files, "
                   f"{listed[0].size} bytes, signed: classic, bundle)\n")
    assert main(["warm", "ls", ref, "--plain-http", "--json"]) == 0
    assert [c["digest"] for c in json.loads(capsys.readouterr().out)["caches"]] == [listed[0].digest]

    model = start_engine(monkeypatch, tmp_path / "node-b", {"reference": ref, "verify_keys": str(public),
                                                            "warm": "load"}, None)
    assert model.cache_at_first_weight == _files(compiled)  # byte for byte, before the first weight
    assert "signature verified" in capsys.readouterr().err


def test_save_leaves_a_cache_of_the_same_key_alone(signed_model, tmp_path, monkeypatch, capsys):
    ref, private, public = signed_model
    first = ocibridge.warm_save(ref, _cache_dir(tmp_path / "compiled"), engine="vllm", engine_version=VLLM,
                                sign=ocibridge.SignOptions(key=private))
    other = tmp_path / "other"
    (other / "rank_0_0").mkdir(parents=True)
    (other / "rank_0_0" / "more.py").write_text("# compiled again\n")
    model = start_engine(monkeypatch, tmp_path / "node", {"reference": ref, "verify_keys": str(public),
                                                           "warm": "load+save", "warm_key": str(private)}, other)
    assert model.cache_at_first_weight == _files(tmp_path / "compiled")  # (restored first)
    assert [c.digest for c in ocibridge.warm_caches(ref).caches] == [first.digest]  # nothing more saved
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == (f"ocibridge: warm start: the model has a compile cache for this key already "
                       f"({first.digest[:19]}); nothing saved")


def test_an_engine_that_compiled_nothing_saves_nothing(signed_model, tmp_path, monkeypatch, capsys):
    ref, private, _ = signed_model
    start_engine(monkeypatch, tmp_path / "node", {"reference": ref, "warm": "save", "warm_key": str(private)}, None)
    assert ocibridge.warm_caches(ref).caches == ()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds nothing to save" in err


@pytest.mark.parametrize(("settings", "said"), [
    ({"warm": "eager"}, r"^ocibridge loader: \"warm\" is 'load', 'save', 'load\+save', not 'eager'$"),
    ({"warm": "save"}, r"^ocibridge loader: \"warm\": 'save' signs the cache it saves: name the private key in "
                       r"\"warm_key\""),
    ({"warm": "load", "warm_key": 3}, r"^ocibridge loader: \"warm_key\" is a private key file's path, not 3$"),
    ({"warm_options": "level=3"}, r"^ocibridge loader: \"warm_options\" is a JSON object, not 'level=3'$"),
    ({"warm_allow_unsigned": "yes"}, r"^ocibridge loader: \"warm_allow_unsigned\" is true or false, not 'yes'$"),
])
def test_bad_warm_settings_are_one_error_line(settings, said):
    from ocibridge.engines.vllm_warm import WarmSettings
    from ocibridge.engines.weights import WeightSource

    WeightSource.from_settings({"reference": "r/m:v1", **settings})  # (known settings)
    with pytest.raises(OcibridgeError, match=said):
        WarmSettings.from_settings({"reference": "r/m:v1", **settings})


def test_the_cache_directory_is_vllms():
    from ocibridge.engines.vllm_warm import vllm_cache_dir

    assert vllm_cache_dir({"VLLM_CACHE_ROOT": "/c/v"}) == Path("/c/v/torch_compile_cache")
    assert vllm_cache_dir({"XDG_CACHE_HOME": "/x"}) == Path("/x/vllm/torch_compile_cache")
    assert vllm_cache_dir({}) == Path.home() / ".cache" / "vllm" / "torch_compile_cache"
