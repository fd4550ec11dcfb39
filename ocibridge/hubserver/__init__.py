"""``ocibridge serve``: the Hugging Face Hub's read API over OCI registries, layouts and the
local store (docs/serve.md).

One job per module: :mod:`.sources` (what a repo id and a revision name in the sources),
:mod:`.files` (a model's files as the Hub lists them), :mod:`.hubjson` (the Hub's JSON shapes),
:mod:`.blobs` (bytes streamed while hashed, kept in the model cache, one fetch per digest),
:mod:`.app` (the Hub's routes), :mod:`.xet` and :mod:`.xetroutes` (large files over Xet),
:mod:`.answers` (what both route sets share), :mod:`.server` (uvicorn: TLS, signals, the access
log). Starlette and uvicorn are the ``ocibridge[serve]`` extra, imported only here.
"""

#: files from this size are offered over Xet by default (``--xet-min-size``; :mod:`.xet`)
XET_MIN_SIZE = 8 * 1024 * 1024
