"""``ocibridge serve``: the Hugging Face Hub's API over OCI registries, layouts and the local
store (docs/serve.md), one room per concern.

The shell: :mod:`.app` (the application and its one route table), :mod:`.routing` (the router,
on the raw path), :mod:`.guard` (limits every request passes), :mod:`.server` and
:mod:`.protocol` (uvicorn). Across every route: :mod:`.access` (who may do what: tokens, signed
URLs, Xet tokens, the pages' cookie; one ``require`` that raises), :mod:`.failures` (the one
table from an exception to status, ``X-Error-Code`` and message), :mod:`.settings` (the flags, one
frozen value), :mod:`.answers` (what a request says, the Hub's error shape). By protocol and side:
:mod:`.reading` (sources, the catalog, files, blobs, the read routes), :mod:`.uploads` (where
uploaded bytes land: staging, relay, mounts, parts), :mod:`.lfs`, :mod:`.xet`, :mod:`.writeroutes`
(repositories, commits, refs, history, evidence) and :mod:`.web` (the pages). Starlette and
uvicorn are the ``ocibridge[serve]`` extra, imported only here.
"""

#: files from this size are offered over Xet by default (``--xet-min-size``; :mod:`.xet.routes`)
XET_MIN_SIZE = 8 * 1024 * 1024
