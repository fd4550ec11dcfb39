"""A repository's key: the one name every part of serve keys a repository by (a token's prefixes,
the private, gated, deleted and moved record, the catalog, staging, Xet grants, the audit).

A model's key is its repo id (``acme/x``); a dataset's is ``datasets/`` and its repo id
(``datasets/acme/x``), which is both its registry path under serve's prefix
(:func:`ocibridge.kinds.hf.repotype.registry_parts`) and its path on the Hub's web. No model id
starts with ``datasets`` (:func:`ocibridge.kinds.hf.repotype.model_id_allowed`), so a model and a
dataset of one name have two keys, and every rule keyed by it is one code for both types.
"""

from __future__ import annotations

from ocibridge.kinds.hf.repotype import DATASET, DATASETS_PART, MODEL, registry_parts

#: the path part of each type's API routes (``/api/models/...``, ``/api/datasets/...``)
API_PARTS = {MODEL: "models", DATASET: "datasets"}


def key_of(repo_type: str, repo_id: str) -> str:
    """The key of the repository ``repo_id`` of ``repo_type``."""
    return "/".join(registry_parts(repo_type, repo_id.split("/")))


def type_of(key: str) -> str:
    """The repository type a key names."""
    head, sep, rest = key.partition("/")
    return DATASET if sep and rest and head.lower() == DATASETS_PART else MODEL


def hub_id(key: str) -> str:
    """The repo id the Hub shows for a key (a dataset's without its ``datasets/``)."""
    return key.split("/", 1)[1] if type_of(key) == DATASET else key


def api_path(key: str) -> str:
    """The repository's API path: ``/api/models/acme/x``, ``/api/datasets/acme/x``."""
    return f"/api/{API_PARTS[type_of(key)]}/{hub_id(key)}"


def noun(key: str) -> str:
    """What the Hub calls the repository in its messages: model, dataset."""
    return type_of(key)
