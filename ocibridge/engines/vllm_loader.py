"""vLLM's model loader for registry models: ``--load-format ocibridge``. The weights stream from
the registry into the engine's ``model.load_weights``, each tensor verified against the chunk
table before it is handed over, nothing written to disk (:mod:`.weights`); the model's own
settings name the registry reference, the keys and the policy (``--model-loader-extra-config``).

vLLM calls :func:`register` in every process it starts, through the ``vllm.general_plugins``
entry point (pyproject.toml); ``pip install 'ocibridge[vllm]'`` installs both. This module is the
only one that imports vLLM, and nothing in the package imports it."""

from __future__ import annotations

from typing import Any

#: the ``--load-format`` this plugin registers
LOAD_FORMAT = "ocibridge"

_registered = False


def register() -> None:
    """Register the ``ocibridge`` load format with vLLM (its general plugins are called once per
    process, and may be called again: registering twice is a no-op)."""
    global _registered
    if _registered:
        return
    from vllm.model_executor.model_loader import register_model_loader

    register_model_loader(LOAD_FORMAT)(_loader_class())
    _registered = True


def _loader_class() -> type:
    """The loader class, made once vLLM is importable (its base class is vLLM's)."""
    from vllm.model_executor.model_loader.base_loader import BaseModelLoader
    from vllm.model_executor.model_loader.default_loader import DefaultModelLoader

    from ocibridge.engines.weights import WeightSource, load_into

    class OcibridgeModelLoader(BaseModelLoader):  # type: ignore[misc]
        """Weights from a registry, verified chunk by chunk as they stream into the model."""

        def __init__(self, load_config: Any):
            super().__init__(load_config)
            self.source = WeightSource.from_settings(load_config.model_loader_extra_config)

        def download_model(self, model_config: Any) -> None:
            """Nothing to download: the weights stream at load (the config and tokenizer are the
            directory vLLM was given: ``ocibridge path REF --exclude '*.safetensors'``)."""

        def load_weights(self, model: Any, model_config: Any) -> None:
            loaded = load_into(model, self.source, strict=False)
            if loaded is not None and model_config.quantization is None:
                # vLLM's own rule for the parameters a checkpoint must set (what its layers
                # make after loading exempted), as its default loader applies it
                DefaultModelLoader.track_weights_loading(self, model, loaded)

    return OcibridgeModelLoader
