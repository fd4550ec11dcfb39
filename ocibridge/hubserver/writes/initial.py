"""A new repository's first commit, as the Hub makes it: ``create_repo`` commits a
``.gitattributes`` at once ("initial commit"), so that a repository exists with a ``main`` from
its creation (``model_info``, ``create_branch`` and ``create_tag`` on ``main`` answer), and its
commit count is the Hub's. The patterns are the Hub's own for a model repository: the files
that go to LFS whatever their size (huggingface_hub's preupload asks serve which mode a file
takes, and serve answers from this file of the branch)."""

from __future__ import annotations

#: the first commit's summary, as the Hub writes it
SUMMARY = "initial commit"

_LFS_PATTERNS = (
    "*.7z", "*.arrow", "*.bin", "*.bz2", "*.ckpt", "*.ftz", "*.gz", "*.h5", "*.joblib", "*.lfs.*",
    "*.mlmodel", "*.model", "*.msgpack", "*.npy", "*.npz", "*.onnx", "*.ot", "*.parquet", "*.pb",
    "*.pickle", "*.pkl", "*.pt", "*.pth", "*.rar", "*.safetensors", "saved_model/**/*", "*.tar.*",
    "*.tar", "*.tflite", "*.tgz", "*.wasm", "*.xz", "*.zip", "*.zst", "*tfevents*",
)

#: the ``.gitattributes`` of a new model repository
GITATTRIBUTES = "".join(f"{p} filter=lfs diff=lfs merge=lfs -text\n" for p in _LFS_PATTERNS).encode()
