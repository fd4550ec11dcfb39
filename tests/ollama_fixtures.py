"""Real GGUF files (written by the ``gguf`` package) and Ollama stores made from them."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import gguf
import numpy as np

DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
OLLAMA = "application/vnd.ollama.image."


def write_gguf(path: Path, *, arch: str = "llama", size_label: str | None = None,
               file_type: gguf.LlamaFileType | None = gguf.LlamaFileType.MOSTLY_F16,
               vocab: int = 32, dim: int = 8, layers: int = 2) -> Path:
    """A small but real GGUF: architecture keys, a tokenizer array, F16/F32 tensors."""
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name("tiny test model")
    w.add_context_length(64)
    w.add_embedding_length(dim)
    w.add_block_count(layers)
    if size_label:
        w.add_size_label(size_label)
    if file_type is not None:
        w.add_file_type(int(file_type))
    w.add_tokenizer_model("llama")
    w.add_token_list([f"tok{i}".encode() for i in range(vocab)])
    w.add_token_scores([float(i) for i in range(vocab)])
    rng = np.random.default_rng(7)
    w.add_tensor("token_embd.weight", rng.standard_normal((vocab, dim)).astype(np.float16))
    for i in range(layers):
        w.add_tensor(f"blk.{i}.attn_q.weight", rng.standard_normal((dim, dim)).astype(np.float16))
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(dim, dtype=np.float32))
    w.add_tensor("output_norm.weight", np.ones(dim, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def gguf_param_count(vocab: int = 32, dim: int = 8, layers: int = 2) -> int:
    return vocab * dim + layers * (dim * dim + dim) + dim


def gojson(value) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _put(root: Path, data: bytes) -> dict:
    hexd = hashlib.sha256(data).hexdigest()
    blobs = root / "blobs"
    blobs.mkdir(parents=True, exist_ok=True)
    (blobs / f"sha256-{hexd}").write_bytes(data)
    return {"digest": f"sha256:{hexd}", "size": len(data)}


def write_store(root: Path, name: tuple[str, str, str, str], layers: list[tuple[str, bytes, dict]],
                config: dict | None = None) -> Path:
    """An OLLAMA_MODELS tree the way Ollama's Go code writes it; returns the manifest path.

    ``layers``: (kind or full media type, content, extra layer fields such as ``name``).
    """
    entries = []
    for kind, data, extra in layers:
        media_type = kind if kind.startswith("application/") else OLLAMA + kind
        entries.append({"mediaType": media_type, **_put(root, data), **extra})
    doc: dict = {"schemaVersion": 2, "mediaType": DOCKER_MANIFEST}
    if config is not None:
        config = {**config, "rootfs": {"type": "layers", "diff_ids": [e["digest"] for e in entries]}}
        doc["config"] = {"mediaType": DOCKER_CONFIG, **_put(root, gojson(config) + b"\n")}
    doc["layers"] = entries
    host, ns, model, tag = name
    path = root / "manifests" / host / ns / model / tag
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gojson(doc) + b"\n")
    return path


def gguf_store(root: Path, tmp: Path, model: str = "tiny", tag: str = "latest", **gguf_kw) -> Path:
    """A complete GGUF Ollama model: model, template, system, params, messages, license, adapter."""
    model_file = write_gguf(tmp / f"{model}.gguf", **gguf_kw)
    adapter = write_gguf(tmp / f"{model}-lora.gguf", vocab=4, dim=4, layers=1, file_type=None)
    layers = [
        ("model", model_file.read_bytes(), {}),
        ("adapter", adapter.read_bytes(), {}),
        ("template", b"{{ .System }} USER: {{ .Prompt }} ASSISTANT:", {}),
        ("system", b"You are a test.", {}),
        ("params", gojson({"stop": ["USER:"], "temperature": 0.2}) + b"\n", {}),
        ("messages", gojson([{"role": "user", "content": "hi"}]), {}),
        ("license", b"MIT License\n\nPermission is hereby granted...\n", {}),
    ]
    config = {"model_format": "gguf", "model_family": "llama", "model_families": ["llama"],
              "model_type": "1K", "file_type": "F16", "architecture": "amd64", "os": "linux"}
    return write_store(root, ("registry.ollama.ai", "library", model, tag), layers, config)


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under an Ollama models dir, by relative path."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# -- Ollama's tensor-per-layer models (x/create, ollama v0.33.0-rc2) ---------------------------
TENSOR = OLLAMA + "tensor"
JSON_LAYER = OLLAMA + "json"


def tensor_blob(tensors: dict[str, np.ndarray], metadata: dict[str, str] | None = None) -> bytes:
    """One layer's blob: a whole safetensors file (x/create writes one per tensor)."""
    from safetensors.numpy import save

    return save(tensors, metadata=metadata)


def quantized(name: str, weight: np.ndarray, bits: int = 4, group: int = 32) -> dict[str, np.ndarray]:
    """``name`` affine-quantized the way MLX's quantizer lays it out: the codes packed into
    uint32 (``name``), a scale and a bias per group (``name.scale``, ``name.bias``)."""
    rows, cols = weight.shape
    groups = weight.reshape(rows, cols // group, group).astype(np.float32)
    low, high = groups.min(axis=2), groups.max(axis=2)
    scale = np.maximum(high - low, 1e-6) / (2**bits - 1)
    codes = np.clip(np.round((groups - low[..., None]) / scale[..., None]), 0, 2**bits - 1)
    codes = codes.reshape(rows, cols).astype(np.uint32)
    per_word = 32 // bits
    words = codes.reshape(rows, cols // per_word, per_word) << (bits * np.arange(per_word, dtype=np.uint32))
    packed = np.bitwise_or.reduce(words, axis=2).astype(np.uint32)
    return {name: packed, name + ".scale": scale.astype(np.float16), name + ".bias": low.astype(np.float16)}


def write_tensor_store(root: Path, model: str, layers: list[tuple[str, str, bytes]], config: dict,
                       tag: str = "latest") -> Path:
    """A tensor-per-layer model as x/create writes it: ``layers`` are (media type, name, blob);
    the config blob is Go's json.Marshal of ConfigV2 (no rootfs, no newline). Returns the manifest."""
    entries = [{"mediaType": mt, **_put(root, data), **({"name": name} if name else {})}
               for mt, name, data in layers]
    doc = {"schemaVersion": 2, "mediaType": DOCKER_MANIFEST,
           "config": {"mediaType": DOCKER_CONFIG, **_put(root, gojson(config))}, "layers": entries}
    path = root / "manifests" / "registry.ollama.ai" / "library" / model / tag
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gojson(doc) + b"\n")
    return path


def _config(file_type: str, capabilities: list[str]) -> dict:
    return {"model_format": "safetensors", "model_family": "", "model_families": None, "model_type": "",
            "file_type": file_type, "requires": "0.19.0", "capabilities": capabilities,
            "architecture": "amd64", "os": "linux"}


def image_store(root: Path, model: str = "tinyimage") -> Path:
    """An image-generation model: ``text_encoder/``, ``transformer/``, ``vae/`` components, the
    linear weights int4-quantized (packed codes + ``.scale``/``.bias``, quant metadata), the
    norms and the VAE left as they were, each component's config.json and model_index.json."""
    rng = np.random.default_rng(7)
    q = {"quant_type": "int4", "group_size": "32"}
    f16 = lambda *shape: rng.standard_normal(shape).astype(np.float16)  # noqa: E731
    tensors = [
        ("text_encoder/model.embed_tokens.weight", tensor_blob({"model.embed_tokens.weight": f16(16, 8)})),
        ("text_encoder/model.layers.0.self_attn.q_proj.weight",
         tensor_blob(quantized("model.layers.0.self_attn.q_proj.weight", f16(8, 64)), q)),
        ("text_encoder/model.norm.weight", tensor_blob({"model.norm.weight": f16(8)})),
        ("transformer/blocks.0.attn.to_q.weight", tensor_blob(quantized("blocks.0.attn.to_q.weight", f16(8, 64)), q)),
        ("transformer/blocks.0.attn.to_k.weight", tensor_blob(quantized("blocks.0.attn.to_k.weight", f16(8, 64)), q)),
        ("transformer/norm_out.weight", tensor_blob({"norm_out.weight": f16(8)})),
        ("vae/decoder.conv_in.weight",
         tensor_blob({"decoder.conv_in.weight": rng.standard_normal((4, 4, 3, 3)).astype(np.float32)})),
    ]
    jsons = [
        ("model_index.json", gojson({"_class_name": "TinyPipeline", "architecture": "tiny-image"})),
        ("text_encoder/config.json", gojson({"model_type": "qwen3", "hidden_size": 8})),
        ("transformer/config.json", gojson({"_class_name": "TinyTransformer", "num_layers": 1})),
        ("vae/config.json", gojson({"_class_name": "AutoencoderKL", "latent_channels": 4})),
    ]
    layers = [(TENSOR, n, b) for n, b in tensors] + [(JSON_LAYER, n, b) for n, b in jsons]
    return write_tensor_store(root, model, layers, _config("int4", ["image"]))


def llm_store(root: Path, model: str = "tinyllm") -> Path:
    """An LLM imported from safetensors: tensor layers (one quantized with mixed per-tensor
    metadata), then its config.json and tokenizer files as json layers, then a template."""
    rng = np.random.default_rng(11)
    f16 = lambda *shape: rng.standard_normal(shape).astype(np.float16)  # noqa: E731
    q_proj = "model.layers.0.self_attn.q_proj.weight"
    tensors = [
        ("model.embed_tokens.weight", tensor_blob({"model.embed_tokens.weight": f16(32, 8)})),
        (q_proj, tensor_blob(quantized(q_proj, f16(8, 64), bits=8),
                             {f"{q_proj}.quant_type": "int8", f"{q_proj}.group_size": "32"})),
        ("model.norm.weight", tensor_blob({"model.norm.weight": f16(8)})),
        ("lm_head.weight", tensor_blob({"lm_head.weight": f16(32, 8)})),
    ]
    jsons = [
        ("config.json", gojson({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 8})),
        ("generation_config.json", gojson({"bos_token_id": 1})),
        ("tokenizer.json", gojson({"version": "1.0", "model": {"type": "BPE", "vocab": {"a": 0, "b": 1}}})),
        ("tokenizer_config.json", gojson({"bos_token": "<s>", "eos_token": "</s>"})),
    ]
    layers = [(TENSOR, n, b) for n, b in tensors] + [(JSON_LAYER, n, b) for n, b in jsons]
    layers.append((OLLAMA + "template", "", b"{{ .Prompt }}"))
    return write_tensor_store(root, model, layers, _config("int8", ["completion"]))
