"""Metadata read from the model's own files, flags that override it, tool folders left out."""

from __future__ import annotations

import json
import struct

from ocibridge.api import model_ops as api
from ocibridge.cli import main
from ocibridge.stores.layout import LayoutStore


def _safetensors(path, tensors: dict[str, tuple[str, list[int]]]) -> None:
    """A valid safetensors file: header JSON, then zeroed tensor data."""
    sizes = {"BF16": 2, "F16": 2, "F32": 4, "I64": 8}
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, (dtype, shape) in tensors.items():
        n = sizes[dtype]
        for dim in shape:
            n *= dim
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(offset))


def hf_model(root):
    """config.json + two safetensors shards, as a Hugging Face download leaves them."""
    root.mkdir()
    (root / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "torch_dtype": "bfloat16",
        "hidden_size": 64}))
    _safetensors(root / "model-00001-of-00002.safetensors",
                 {"embed": ("BF16", [1000, 64]), "norm": ("F32", [64])})
    _safetensors(root / "model-00002-of-00002.safetensors",
                 {"layer.0": ("BF16", [64, 64]), "pos": ("I64", [10])})
    (root / "model.safetensors.index.json").write_text('{"weight_map": {}}')
    (root / "tokenizer.json").write_text("{}")
    (root / ".gitattributes").write_text("*.safetensors filter=lfs\n")
    (root / ".cache" / "huggingface").mkdir(parents=True)
    (root / ".cache" / "huggingface" / "download.lock").write_text("x")
    return root


def _config(layout, tag: str) -> dict:
    store = LayoutStore(layout)
    manifest = json.loads(store.fetch_bytes(store.resolve(tag)))
    from ocibridge.oci.models import Descriptor

    return json.loads(store.fetch_bytes(Descriptor.model_validate(manifest["config"])))


def test_a_hugging_face_directory_gets_architecture_family_precision_and_size(tmp_path):
    model = hf_model(tmp_path / "llama-tiny")
    result = api.push(str(model), f"oci:{tmp_path / 'out'}:v1")
    config = _config(tmp_path / "out", "v1")
    assert config["config"] == {"architecture": "LlamaForCausalLM", "format": "safetensors",
                                "paramSize": "68.2K", "precision": "bf16"}  # 64000+64+4096+10 = 68170
    assert config["descriptor"]["family"] == "llama"
    api.pull(result.reference.split("@")[0], str(tmp_path / "back"))
    names = sorted(p.name for p in (tmp_path / "back").rglob("*") if p.is_file())
    assert ".gitattributes" not in names and "download.lock" not in names
    assert "model-00002-of-00002.safetensors" in names


def test_precision_comes_from_the_headers_without_torch_dtype(tmp_path):
    model = hf_model(tmp_path / "m")
    (model / "config.json").write_text('{"model_type": "llama"}')
    api.push(str(model), f"oci:{tmp_path / 'out'}:v1")
    assert _config(tmp_path / "out", "v1")["config"]["precision"] == "bf16"


def test_flags_override_what_the_files_say(tmp_path):
    model = hf_model(tmp_path / "m")
    code = main(["push", str(model), f"oci:{tmp_path / 'out'}:v1", "-q", "--arch", "MyArch",
                 "--param-size", "70b", "--precision", "fp16", "--family", "mine", "--license", "MIT",
                 "--version", "2.0", "--description", "a test", "--quantization", "none",
                 "--model-format", "pytorch"])
    assert code == 0
    config = _config(tmp_path / "out", "v1")
    assert config["config"] == {"architecture": "MyArch", "format": "pytorch", "paramSize": "70b",
                                "precision": "fp16", "quantization": "none"}
    d = config["descriptor"]
    assert (d["family"], d["licenses"], d["version"], d["description"]) == ("mine", ["MIT"], "2.0", "a test")


def test_a_broken_safetensors_header_is_no_reason_to_fail(tmp_path):
    model = tmp_path / "m"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"\xff" * 64)
    api.push(str(model), f"oci:{tmp_path / 'out'}:v1")
    assert _config(tmp_path / "out", "v1")["config"] == {"format": "safetensors"}
