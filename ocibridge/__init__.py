"""ocibridge: ML models (Carton, MLSteam, Ollama, directories) as ModelPack OCI artifacts.

The public names are imported on first use (PEP 562): ``ocibridge --help`` and
``--version`` then start without loading pydantic and httpx (~0.15 s).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ocibridge.version import __version__ as __version__

#: public name -> the module (under ocibridge) that defines it
_HOMES = {
    **dict.fromkeys(("inspect", "load_source", "login", "logout", "path", "pull", "push", "tags", "validate"),
                    "api.model_ops"),
    "copy_reference": "api.copy",  # api.model_ops re-exports it
    **dict.fromkeys(("AttestOptions", "PushOptions", "SignatureOptions", "TransferOptions"), "api.options"),
    **dict.fromkeys(("AttestResult", "ProvenanceResult", "SbomResult", "attest", "provenance", "sbom"),
                    "api.evidence"),
    **dict.fromkeys(("ConversionResult", "convert"), "api.convert"),
    **dict.fromkeys(("attach_chunks", "cat", "open_model", "open_tensors"), "api.lazy_ops"),
    "filesystem": "api.lazy_fs",
    "OcibridgeError": "errors",
    "BuildOptions": "model.builder", "build": "model.builder",
    "Family": "oci.mediatypes", "Kind": "oci.mediatypes", "Variant": "oci.mediatypes",
    "OnExisting": "core.overwrite",
    "ProgressEvent": "transfer.progress_events", "events": "transfer.progress_events",
    **dict.fromkeys(("AttachResult", "DiscoverResult", "InspectResult", "LoginResult", "ModelEntry",
                     "PruneResult", "PullResult", "PushResult", "RemoveResult", "ResolveResult", "TagResult",
                     "ValidateResult"), "transfer.results"),
    **dict.fromkeys(("attach", "delete", "discover", "list_models", "prune", "remove", "resolve",
                     "tag"), "api.store_ops"),
}

__all__ = [
    "AttachResult",
    "AttestOptions",
    "AttestResult",
    "BuildOptions",
    "ConversionResult",
    "DiscoverResult",
    "Family",
    "InspectResult",
    "Kind",
    "LoginResult",
    "ModelEntry",
    "OcibridgeError",
    "OnExisting",
    "ProgressEvent",
    "ProvenanceResult",
    "PruneResult",
    "PullResult",
    "PushOptions",
    "PushResult",
    "RemoveResult",
    "ResolveResult",
    "SbomResult",
    "SignatureOptions",
    "TagResult",
    "TransferOptions",
    "ValidateResult",
    "Variant",
    "attach",
    "attach_chunks",
    "attest",
    "build",
    "cat",
    "convert",
    "copy_reference",
    "delete",
    "discover",
    "events",
    "filesystem",
    "inspect",
    "list_models",
    "load_source",
    "login",
    "logout",
    "open_model",
    "open_tensors",
    "path",
    "provenance",
    "prune",
    "pull",
    "push",
    "remove",
    "resolve",
    "sbom",
    "tag",
    "tags",
    "validate",
]

if TYPE_CHECKING:
    from ocibridge.api.convert import ConversionResult, convert
    from ocibridge.api.evidence import AttestResult, ProvenanceResult, SbomResult, attest, provenance, sbom
    from ocibridge.api.lazy_fs import filesystem
    from ocibridge.api.lazy_ops import attach_chunks, cat, open_model, open_tensors
    from ocibridge.api.model_ops import (
        copy_reference,
        inspect,
        load_source,
        login,
        logout,
        path,
        pull,
        push,
        tags,
        validate,
    )
    from ocibridge.api.options import AttestOptions, PushOptions, SignatureOptions, TransferOptions
    from ocibridge.api.store_ops import attach, delete, discover, list_models, prune, remove, resolve, tag
    from ocibridge.core.overwrite import OnExisting
    from ocibridge.errors import OcibridgeError
    from ocibridge.model.builder import BuildOptions, build
    from ocibridge.oci.mediatypes import Family, Kind, Variant
    from ocibridge.transfer.progress_events import ProgressEvent, events
    from ocibridge.transfer.results import (
        AttachResult,
        DiscoverResult,
        InspectResult,
        LoginResult,
        ModelEntry,
        PruneResult,
        PullResult,
        PushResult,
        RemoveResult,
        ResolveResult,
        TagResult,
        ValidateResult,
    )


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'ocibridge' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{home}", __name__), name)
    globals()[name] = value
    return value
