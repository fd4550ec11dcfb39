"""A Hub repository's type, model or dataset, and the three things it changes in the registry:
where the repository lives, what kind its files' layers are, and the annotation that says which.

The Hub keeps the types apart by URL (``/acme/x`` and ``/datasets/acme/x`` are two repositories) and
reserves ``datasets`` and ``spaces`` as user and organisation names, so no model id starts with
them. A dataset ``ORG/NAME`` therefore lives at ``PREFIX/datasets/ORG/NAME``: a model id can never
reach that path, because a model id whose first part is reserved is refused (:func:`model_id_allowed`).
"""

from __future__ import annotations

import posixpath

from ocibridge.oci.mediatypes import Kind

MODEL = "model"
DATASET = "dataset"
REPO_TYPES = (MODEL, DATASET)

#: the first registry path part of every dataset repository
DATASETS_PART = "datasets"
#: names the Hub keeps for its own URLs: no model id starts with them
RESERVED_FIRST_PARTS = frozenset({"datasets", "spaces"})

#: the manifest annotation that names a dataset artifact (absent on a model's)
REPO_TYPE_KEY = "io.ocibridge.hf.repo-type"


def model_id_allowed(parts: list[str]) -> bool:
    """Whether a model repo id's parts can name a model (its first part is not reserved)."""
    return bool(parts) and parts[0] not in RESERVED_FIRST_PARTS


def registry_parts(repo_type: str, parts: list[str]) -> list[str]:
    """The registry path parts (under serve's prefix) of a repo id of ``repo_type``."""
    if repo_type == DATASET:
        return [DATASETS_PART, *parts]
    if repo_type != MODEL:
        raise ValueError(f"unknown repository type {repo_type!r}")
    return list(parts)


def dataset_file_kind(path: str) -> Kind:
    """The layer kind of a dataset's file: its card is a doc, everything else is data."""
    name = posixpath.basename(path)
    if posixpath.dirname(path) == "" and name.lower() == "readme.md":
        return Kind.DOC
    return Kind.DATASET
