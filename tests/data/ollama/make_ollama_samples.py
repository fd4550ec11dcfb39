#!/usr/bin/env python3
"""Writes the Ollama reference samples in this folder (stdlib only, deterministic).

1. gemma-2b/: the real on-disk manifest of registry.ollama.ai/library/gemma:2b (ollama 0.1.48
   era, copied from public notes) + two of its blobs reconstructed byte-exactly (config, template);
   the script asserts their sha256 equals the digests in the manifest.
2. safetensors-store/: a synthetic but internally consistent OLLAMA_MODELS tree for the newer
   tensor-layer ("safetensors"/MLX) format, written the way ollama's Go code serializes it
   (manifest/manifest.go WriteManifest, x/create/client/create.go newManifestWriter,
   x/create/pipeline.go importConfigBlobs, x/safetensors/extractor.go BuildPackedSafetensorsReaderWithMetadata).
"""
import hashlib
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
def sha(b): return hashlib.sha256(b).hexdigest()
def gojson(o): return json.dumps(o, separators=(",", ":"), ensure_ascii=False)  # Go json.Marshal (no HTML-escape issue here)

# ---------- 1. gemma:2b (real) ----------
g = os.path.join(HERE, "gemma-2b"); os.makedirs(g, exist_ok=True)
manifest = ('{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json",'
 '"config":{"mediaType":"application/vnd.docker.container.image.v1+json","digest":"sha256:887433b89a901c156f7e6944442f3c9e57f3c55d6ed52042cbb7303aea994290","size":483},'
 '"layers":[{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:c1864a5eb19305c40519da12cc543519e48a0697ecd30e15d5ac228644957d12","size":1678447520},'
 '{"mediaType":"application/vnd.ollama.image.license","digest":"sha256:097a36493f718248845233af1d3fefe7a303f864fae13bc31a3a9704229378ca","size":8433},'
 '{"mediaType":"application/vnd.ollama.image.template","digest":"sha256:109037bec39c0becc8221222ae23557559bc594290945a2c4221ab4f303b8871","size":136},'
 '{"mediaType":"application/vnd.ollama.image.params","digest":"sha256:22a838ceb7fb22755a3b0ae9b4eadde629d19be1f651f73efb8c6b4e2cd0eea0","size":84}]}')
m = json.loads(manifest)
diff_ids = [l["digest"] for l in m["layers"]]
config = (gojson({"model_format": "gguf", "model_family": "gemma", "model_families": ["gemma"],
                  "model_type": "3B", "file_type": "Q4_0", "architecture": "amd64", "os": "linux",
                  "rootfs": {"type": "layers", "diff_ids": diff_ids}}) + "\n").encode()  # json.Encoder adds \n
template = (b"<start_of_turn>user\n{{ if .System }}{{ .System }} {{ end }}{{ .Prompt }}<end_of_turn>\n"
            b"<start_of_turn>model\n{{ .Response }}<end_of_turn>\n")
assert "sha256:" + sha(config) == m["config"]["digest"] and len(config) == m["config"]["size"]
assert "sha256:" + sha(template) == m["layers"][2]["digest"] and len(template) == m["layers"][2]["size"]
open(os.path.join(g, "manifest.latest-on-disk.json"), "w").write(manifest)
open(os.path.join(g, "blob-config.sha256-887433b8.json"), "wb").write(config)
open(os.path.join(g, "blob-template.sha256-109037be.txt"), "wb").write(template)

# ---------- 2. tensor-layer ("safetensors") store ----------
root = os.path.join(HERE, "safetensors-store")
blobs = os.path.join(root, "blobs"); os.makedirs(blobs, exist_ok=True)
def put(data: bytes, media_type: str, name: str = None):
    d = sha(data)
    open(os.path.join(blobs, "sha256-" + d), "wb").write(data)   # blobs/sha256-<hex>
    layer = {"mediaType": media_type, "digest": "sha256:" + d, "size": len(data)}
    if name: layer["name"] = name                                 # Layer.Name (omitempty)
    return layer

def st_blob(tensors, metadata=None):
    """One packed safetensors file (u64 LE header len + JSON header padded with spaces to 8)."""
    header, off, body = {}, 0, b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(raw)]}
        off += len(raw); body += raw
    if metadata: header["__metadata__"] = metadata
    h = gojson(dict(sorted(header.items()))).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + body

layers = []
# one blob per tensor, named by tensor name (x/create/plan.go: BlobSpec{Name: name, Tensors: [one]})
for name, shape in [("model.embed_tokens.weight", [8, 4]), ("model.layers.0.mlp.down_proj.weight", [4, 4]),
                    ("model.norm.weight", [4]), ("lm_head.weight", [8, 4])]:
    n = 1
    for s in shape: n *= s
    raw = bytes(range(256))[: 2 * n] if 2 * n <= 256 else (bytes(range(256)) * 2)[: 2 * n]  # BF16 = 2 bytes/elt
    layers.append(put(st_blob([(name, "BF16", shape, raw)]), "application/vnd.ollama.image.tensor", name))
# every *.json in the HF dir except model.safetensors.index.json -> application/vnd.ollama.image.json
hf_config = gojson({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4,
                    "num_hidden_layers": 1, "vocab_size": 8, "torch_dtype": "bfloat16"}).encode()
cfg_json_layer = put(hf_config, "application/vnd.ollama.image.json", "config.json")
layers.append(cfg_json_layer)
layers.append(put(gojson({"bos_token_id": 1, "eos_token_id": 2}).encode(), "application/vnd.ollama.image.json", "generation_config.json"))
# Modelfile-derived layers (x/create/client/create.go createModelfileLayers)
layers.append(put(b"{{ .Prompt }}", "application/vnd.ollama.image.template"))
layers.append(put((gojson({"temperature": 0.7}) + "\n").encode(), "application/vnd.ollama.image.params"))
# model config blob = model.ConfigV2 via json.Marshal (no trailing \n), after 2026-08-08 without rootfs
configv2 = (b'{"model_format":"safetensors","model_family":"","model_families":null,"model_type":"",'
            b'"file_type":"","requires":"0.19.0","capabilities":["completion"],"architecture":"","os":""}')
config_layer = put(configv2, "application/vnd.docker.container.image.v1+json")
man = gojson({"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
              "config": config_layer, "layers": layers}) + "\n"          # json.Encoder adds \n
mp = os.path.join(root, "manifests", "registry.ollama.ai", "library", "tiny-safetensors", "latest")
os.makedirs(os.path.dirname(mp), exist_ok=True)
open(mp, "w").write(man)
print("ok; tensor-store manifest digest sha256:" + sha(man.encode()))
