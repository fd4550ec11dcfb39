"""Model engines fed straight from a registry: vLLM's model-loader plugin (``--load-format
ocibridge``, :mod:`.vllm_loader`) over a weights iterator that needs only torch (:mod:`.weights`).
Nothing else in the package imports this one: the plugin is reached through its entry point."""
