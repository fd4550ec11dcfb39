"""ocibridge: ML models (Carton, MLSteam, Ollama, directories) as ModelPack OCI artifacts."""

from .api import (
    PushResult,
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
    RemoveResult,
    ResolveResult,
    TagResult,
    ValidateResult,
)
from .store_ops import attach, delete, discover, list_models, prune, remove, resolve, tag

__version__ = "0.1.0"

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
