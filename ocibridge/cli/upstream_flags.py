"""The flags ``serve`` and ``k8s serve`` share (``k8s serve`` hands them to its pods' serve, and
imports no module of serve's own group): what may come from an upstream Hub (``--upstream-allow``
and its kin), parsed here, one way, into the ``upstream_*`` options that ``ServeOptions`` and
``K8sServeOptions`` share, and ``--default-tag``."""

from __future__ import annotations

import argparse
from typing import Any

from ocibridge.api import choices
from ocibridge.api.chunk_options import UPSTREAM_FLAGS, choose
from ocibridge.api.durations import parse_duration
from ocibridge.api.upstream_policy import DEFAULT_MAX_FETCHES as MOST
from ocibridge.api.upstream_policy import DEFAULT_MAX_FETCHES_PER_CLIENT as PER_CLIENT


def add_upstream_policy_flags(g: Any) -> None:
    """The flags that decide which repositories and commits the upstream proxy may fetch."""
    g.add_argument("--upstream-allow", action="append", metavar="GLOB",
                   help="only repositories whose id matches may be fetched (repeatable)")
    g.add_argument("--upstream-deny", action="append", metavar="GLOB",
                   help="repositories whose id matches are never fetched (repeatable; before --upstream-allow)")
    g.add_argument("--upstream-allow-pickle", action="store_true",
                   help="fetch repositories with pickle files (*.bin, *.pt, *.pth, *.pkl, *.pickle, *.joblib, *.ckpt, "
                        "..., or any file whose content is a pickle's), refused by default")
    g.add_argument("--upstream-scan", choices=("refuse", "off"), default="off",
                   help="scan each fetched file by its content (pickles under any name, NumPy object arrays, Keras "
                        "Lambda layers, ONNX external data paths, lying safetensors headers) and refuse a commit "
                        "with a flagged file (refuse needs pip install 'ocibridge[scan]'; default off)")
    g.add_argument("--upstream-license", action="append", metavar="ID",
                   help="only repositories whose card names this license (its license: id, e.g. apache-2.0, or "
                        "license_name with license: other) may be fetched (repeatable)")
    g.add_argument("--upstream-refuse-files", action="append", metavar="GLOB",
                   help="a commit with a file whose path or name matches is never fetched (repeatable)")
    g.add_argument("--upstream-allow-gated", action="append", metavar="GLOB",
                   help="repositories whose id matches are fetched though gated at the upstream (with the upstream "
                        "token) and kept gated here: their files go to the readers on their gate's list only "
                        "(repeatable; needs serve's own tokens: --token-file, k8s serve --token-secret; "
                        "default: gated ones refused)")
    g.add_argument("--upstream-allow-private", action="append", metavar="GLOB",
                   help="repositories whose id matches are fetched though private at the upstream (with the upstream "
                        "token) and kept private here: readers without a private grant learn nothing of them "
                        "(repeatable; needs serve's own tokens; default: private ones refused, as not found)")
    g.add_argument("--upstream-max-fetches", type=int, default=None, metavar="N",
                   help=f"upstream fetches under way at once, over all clients (default {MOST}); a read that would "
                        "start one more is answered 503 with Retry-After")
    g.add_argument("--upstream-max-fetches-per-client", type=int, default=None, metavar="N",
                   help=f"upstream fetches one client (its token, else its address) may have under way at once "
                        f"(default {PER_CLIENT})")
    g.add_argument("--upstream-keep", metavar="DURATION",
                   help="drop a fetched commit no one read for this long (30d, 12h, 90m): its tags go, so the "
                        "registry's garbage-collect frees its bytes, unless a tag a person made or a copy in another "
                        "repository keeps it; the next request fetches it again (docs/lifetimes.md; default: kept)")
    g.add_argument("--upstream-no-chunks", action="store_true",
                   help="a fetched commit's artifact binds no chunk table (push --no-chunks)")
    g.add_argument("--upstream-chunk-threshold", metavar="SIZE", default=None,
                   help="its files from this size get a chunk table (push --chunk-threshold; default 64M; e.g. 16M)")
    g.add_argument("--upstream-chunk-hash", choices=choices.chunk_hashes(), default=None,
                   help="the hash of that table's digests (push --chunk-hash; default blake3)")


def upstream_policy(args: argparse.Namespace) -> dict[str, Any]:
    """Those flags as the keyword arguments of ``ServeOptions`` and ``K8sServeOptions`` (the chunk
    flags checked as push's are, chunks/choice.py)."""
    chunks = choose(args.upstream_no_chunks, args.upstream_chunk_threshold, args.upstream_chunk_hash, UPSTREAM_FLAGS)
    return {"upstream_no_chunks": not chunks.chunks, "upstream_chunk_threshold": chunks.threshold,
            "upstream_chunk_hash": chunks.algorithm,
            "upstream_allow": tuple(args.upstream_allow or ()), "upstream_deny": tuple(args.upstream_deny or ()),
            "upstream_allow_pickle": args.upstream_allow_pickle, "upstream_scan": args.upstream_scan,
            "upstream_licenses": tuple(args.upstream_license or ()),
            "upstream_refuse_files": tuple(args.upstream_refuse_files or ()),
            "upstream_allow_gated": tuple(args.upstream_allow_gated or ()),
            "upstream_allow_private": tuple(args.upstream_allow_private or ()),
            "upstream_max_fetches": MOST if args.upstream_max_fetches is None else args.upstream_max_fetches,
            "upstream_max_fetches_per_client": PER_CLIENT if args.upstream_max_fetches_per_client is None
            else args.upstream_max_fetches_per_client,
            "upstream_keep": None if args.upstream_keep is None else parse_duration(args.upstream_keep)}


def add_default_tag_flag(p: argparse.ArgumentParser, default: str | None = "latest") -> None:
    """``--default-tag``: serve's, and k8s serve's, which hands it on to its pods' serve (there
    ``default`` is None: left out, the pods' serve takes its own)."""
    p.add_argument("--default-tag", default=default, metavar="TAG",
                   help="the tag the revision 'main' names (default latest)")
