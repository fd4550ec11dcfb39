"""ocibridge: ML models (Carton, MLSteam, Ollama, directories) as ModelPack OCI artifacts.

The public names are imported on first use (PEP 562): ``ocibridge --help`` and
``--version`` then start without loading pydantic and httpx (~0.15 s).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .version import __version__ as __version__

#: public name -> the module (under ocibridge) that defines it
_HOMES = {
    **dict.fromkeys(("inspect", "load_source", "login", "logout", "pull", "push", "tags", "validate"), "api"),
    **dict.fromkeys(("TransferOptions", "copy_reference"), "api_copy"),  # api re-exports them
    "OcibridgeError": "errors",
    "BuildOptions": "modelpack.builder", "build": "modelpack.builder",
    "Family": "oci.mediatypes", "Kind": "oci.mediatypes", "Variant": "oci.mediatypes",
    "OnExisting": "overwrite",
    "ProgressEvent": "progress_events", "events": "progress_events",
    **dict.fromkeys(("AttachResult", "DiscoverResult", "InspectResult", "LoginResult", "ModelEntry",
                     "PruneResult", "PullResult", "PushResult", "RemoveResult", "ResolveResult", "TagResult",
                     "ValidateResult"), "results"),
    **dict.fromkeys(("attach", "delete", "discover", "list_models", "prune", "remove", "resolve",
                     "tag"), "store_ops"),
}

__all__ = [
    "AttachResult",
    "BuildOptions",
    "DiscoverResult",
    "Family",
    "InspectResult",
    "Kind",
    "LoginResult",
    "ModelEntry",
    "OcibridgeError",
    "OnExisting",
    "ProgressEvent",
    "PruneResult",
    "PullResult",
    "PushResult",
    "RemoveResult",
    "ResolveResult",
    "TagResult",
    "TransferOptions",
    "ValidateResult",
    "Variant",
    "attach",
    "build",
    "copy_reference",
    "delete",
    "discover",
    "events",
    "inspect",
    "list_models",
    "load_source",
    "login",
    "logout",
    "prune",
    "pull",
    "push",
    "remove",
    "resolve",
    "tag",
    "tags",
    "validate",
]

if TYPE_CHECKING:
    from .api import (
        TransferOptions,
        copy_reference,
        inspect,
        load_source,
        login,
        logout,
        pull,
        push,
        tags,
        validate,
    )
    from .errors import OcibridgeError
    from .modelpack.builder import BuildOptions, build
    from .oci.mediatypes import Family, Kind, Variant
    from .overwrite import OnExisting
    from .progress_events import ProgressEvent, events
    from .results import (
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
    from .store_ops import attach, delete, discover, list_models, prune, remove, resolve, tag


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'ocibridge' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{home}", __name__), name)
    globals()[name] = value
    return value
