"""vLLM's model loader for registry models: ``--load-format ocibridge``. The weights stream from
the registry into the engine's ``model.load_weights``, each tensor verified against the chunk
table before it is handed over, nothing written to disk (:mod:`.weights`); the model's own
settings name the registry reference, the keys and the policy (``--model-loader-extra-config``).

vLLM calls :func:`register` in every process it starts, through the ``vllm.general_plugins``
entry point (pyproject.toml): inside an image that has vLLM, ``pip install ocibridge`` is enough;
``pip install 'ocibridge[vllm]'`` installs a vLLM of the tested releases too. The loader uses
vLLM's internals (``BaseModelLoader``, ``DefaultModelLoader.track_weights_loading``), whose
signatures change between releases, so a release outside :data:`TESTED_VLLM` (pyproject.toml's
``vllm`` extra says the same) is told so in one line and gets no ``ocibridge`` load format.
With several processes loading the model (tensor or pipeline parallel ranks), the weights go
through the node's model cache, fetched once (:func:`.weights.weights`' ``ranks``). This module
is the only one that imports vLLM, and nothing in the package imports it."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from typing import Any

#: the ``--load-format`` this plugin registers
LOAD_FORMAT = "ocibridge"
#: the vLLM releases the plugin was run against (bench/vllm_check.py), as pip writes them: the
#: ``vllm`` extra of pyproject.toml is this range (tests/lazy/test_vllm_plugin.py holds both)
TESTED_VLLM = ">=0.33,<0.34"
#: the same range as (major, minor) bounds: from the first, up to and without the second
_TESTED_FROM, _TESTED_BELOW = (0, 33), (0, 34)

_registered = False
#: the worker classes whose compile step is wrapped in this process, and what runs after it
_hooked: set[type] = set()
_after_compile_calls: list[Callable[[], object]] = []


def untested(version: str) -> str | None:
    """Why vLLM ``version`` (its ``__version__``) gets no load format, in one line; None for a
    tested release."""
    found = re.match(r"(\d+)\.(\d+)", version)  # (0.33.1, 0.33.0rc1, 0.33.2+cu129: 0.33)
    release = (int(found[1]), int(found[2])) if found else None
    if release is not None and _TESTED_FROM <= release < _TESTED_BELOW:
        return None
    return (f"vLLM {version} is not a release this plugin was tested with (vllm{TESTED_VLLM}): "
            f"--load-format {LOAD_FORMAT} is not registered; install a vLLM in that range "
            f"(pip install 'ocibridge[vllm]') or load the model another way (docs/api.md, \"vLLM\")")


def register() -> None:
    """Register the ``ocibridge`` load format with vLLM (its general plugins are called once per
    process, and may be called again: registering twice is a no-op), if vLLM's release is one
    the plugin was tested with; otherwise say why not in one line on stderr, once."""
    global _registered
    if _registered:
        return
    refusal = untested(_vllm_version())
    if refusal is not None:
        print(f"ocibridge: {refusal}", file=sys.stderr)
        _registered = True  # (said once a process)
        return
    from vllm.model_executor.model_loader import register_model_loader

    register_model_loader(LOAD_FORMAT)(_loader_class())
    _registered = True


def _vllm_version() -> str:
    import vllm

    return str(vars(vllm).get("__version__", "(no version)"))


def _processes_loading() -> int:
    """How many processes of this vLLM load the model, each reading every weight (its tensor
    and pipeline parallel ranks: vLLM's world group); 1 where it has none."""
    try:
        from vllm.distributed.parallel_state import get_world_group

        return int(get_world_group().world_size)
    except (ImportError, AssertionError, AttributeError):  # (not initialised: one process)
        return 1


def _world() -> tuple[int, Any]:
    """This process's rank among those of the engine, and their group (None: one process)."""
    try:
        from vllm.distributed.parallel_state import get_world_group

        group = get_world_group()
        return int(group.rank), group if int(group.world_size) > 1 else None
    except (ImportError, AssertionError, AttributeError):
        return 0, None


def after_compile(call: Callable[[], object]) -> None:
    """Run ``call`` in this process once vLLM has compiled: its worker's
    ``compile_or_warm_up_model`` compiles the graphs of every size and captures the CUDA graphs
    before the engine serves a request, so its return is the point where the compile cache is
    whole. With several processes, all of them meet there first and the first rank runs the
    calls (their caches share the node's ``torch_compile_cache``)."""
    from vllm.v1.worker.gpu_worker import Worker

    _after_compile_calls.append(call)
    if Worker in _hooked:
        return
    compile_step = Worker.compile_or_warm_up_model

    def compiled_then_called(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = compile_step(self, *args, **kwargs)
        rank, group = _world()
        if group is not None:
            group.barrier()
        calls = list(_after_compile_calls)
        _after_compile_calls.clear()
        if rank == 0:
            for done in calls:
                done()
        return result

    Worker.compile_or_warm_up_model = compiled_then_called
    _hooked.add(Worker)


def _loader_class() -> type:
    """The loader class, made once vLLM is importable (its base class is vLLM's)."""
    from vllm.model_executor.model_loader.base_loader import BaseModelLoader
    from vllm.model_executor.model_loader.default_loader import DefaultModelLoader

    from ocibridge.engines.vllm_warm import WarmSettings, restore_cache, save_cache, this_device
    from ocibridge.engines.weights import WeightSource, load_into

    class OcibridgeModelLoader(BaseModelLoader):  # type: ignore[misc]
        """Weights from a registry, verified chunk by chunk as they stream into the model."""

        def __init__(self, load_config: Any):
            super().__init__(load_config)
            self.source = WeightSource.from_settings(load_config.model_loader_extra_config)
            self.warm = WarmSettings.from_settings(load_config.model_loader_extra_config)
            if self.warm.saves:
                after_compile(lambda: save_cache(self.source, self.warm, _vllm_version(), device=this_device()))

        def download_model(self, model_config: Any) -> None:
            """Nothing to download: the weights stream at load (the config and tokenizer are the
            directory vLLM was given: ``ocibridge path REF --exclude '*.safetensors'``)."""

        def load_weights(self, model: Any, model_config: Any) -> None:
            # (vLLM compiles once the weights are in: the cache is in place before it looks)
            restore_cache(self.source, self.warm, _vllm_version(), device=this_device())
            loaded = load_into(model, self.source, strict=False, ranks=_processes_loading())
            if loaded is not None and model_config.quantization is None:
                # vLLM's own rule for the parameters a checkpoint must set (what its layers
                # make after loading exempted), as its default loader applies it
                DefaultModelLoader.track_weights_loading(self, model, loaded)

    return OcibridgeModelLoader
