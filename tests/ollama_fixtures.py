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
