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
    **dict.fromkeys(("inspect", "load_source", "pull", "push", "tags", "validate"), "api.model_ops"),
    **dict.fromkeys(("login", "logout"), "api.auth"),
    **dict.fromkeys(("CachePruneResult", "cache_dir", "path", "prune_cache"), "api.cache_ops"),
    **dict.fromkeys(("BundleEntry", "BundleResult", "list_bundle", "load", "save"), "api.bundle"),
    **dict.fromkeys(("FetchedManifest", "RepositoryList", "diff", "fetch_manifest", "list_repositories"),
                    "api.browse"),
    **dict.fromkeys(("ConfigChange", "FileChange", "ModelDiff", "TensorChange"), "lazyread.diff"),
    **dict.fromkeys(("CompletionScript", "completion_script"), "api.completion"),
    "check_registry": "api.registry_check", "RegistryReport": "stores.registry.probe",
    **dict.fromkeys(("closing_opened_stores", "enable_request_log"), "api.session"),
    "inspect_text": "api.texts",
    **dict.fromkeys(("ChunksResult", "attach_chunks", "cat", "open_model", "open_tensors"), "api.lazy_ops"),
    "copy_reference": "api.copy",  # api.model_ops re-exports it
    **dict.fromkeys(("AttestOptions", "PushOptions", "SignOptions", "TransferOptions"), "api.options"),
    **dict.fromkeys(("AttestResult", "EvidenceDocument", "attest", "provenance", "sbom"),
                    "api.evidence"),
    "convert": "api.convert", "ConvertResult": "kinds.conversion",
    **dict.fromkeys(("attach_chunks", "cat", "open_model", "open_tensors"), "api.lazy_ops"),
    "filesystem": "api.lazy_fs",
    **dict.fromkeys(("MountRequest", "Mounted", "mount", "serve_mount", "unmount"), "api.mount"),
    **dict.fromkeys(("KeygenResult", "SignResult", "VerifiedSignature", "VerifyDirResult", "VerifyOptions",
                     "VerifyResult", "keygen", "sign", "verify", "verify_dir"), "api.signing"),
    **dict.fromkeys(("PolicyVerdict", "RequirementCheck", "Verification", "check_policy", "verification"),
                    "api.policy"),
    **dict.fromkeys(("k8s_check", "k8s_modelcar", "k8s_mount", "k8s_policy", "k8s_prewarm", "k8s_serve",
                     "k8s_validate", "k8s_volume"), "api.k8s"),
    "SchemaCheck": "k8s.schemacheck",
    **dict.fromkeys(("AdmissionPolicies", "AdmissionSigners", "K8sServeOptions", "KServeOptions",
                     "KubernetesDocuments", "ModelCarImage", "ModelCarOptions", "PodOptions", "PodRegistryAccess",
                     "PrewarmOptions", "PullSecrets", "VolumeCheck", "VolumeLayout"), "api.k8s_types"),
    **dict.fromkeys(("MergedMirrorReport", "MirrorEntry", "MirrorJob", "MirrorK8sJob", "MirrorK8sOptions",
                     "MirrorReport", "MirrorRunOptions", "MirroredArtifact", "SyncEntry", "mirror_k8s_job",
                     "mirror_merge", "mirror_plan", "mirror_run", "mirror_shard"), "api.mirror"),
    **dict.fromkeys(("ListenOptions", "ServeOptions", "create_app", "serve"), "api.serve"),
    "OcibridgeError": "errors",
    "BuildOptions": "model.builder", "build": "model.builder",
    "Family": "oci.mediatypes", "Kind": "oci.mediatypes", "Variant": "oci.mediatypes",
    "OnExisting": "core.overwrite",
    "ProgressEvent": "transfer.progress_events", "events": "transfer.progress_events",
    **dict.fromkeys(("AttachResult", "DiscoverResult", "InspectResult", "LoginResult", "ModelEntry",
                     "PruneResult", "PullResult", "PushResult", "ReferrerNode", "RemoveResult", "ResolveResult",
                     "TagResult", "ValidateResult"), "transfer.results"),
    **dict.fromkeys(("attach", "delete", "discover", "list_models", "prune", "remove", "resolve",
                     "tag"), "api.store_ops"),
}

__all__ = [
    "AdmissionPolicies",
    "AdmissionSigners",
    "AttachResult",
    "AttestOptions",
    "AttestResult",
    "BuildOptions",
    "BundleEntry",
    "BundleResult",
    "CachePruneResult",
    "ChunksResult",
    "CompletionScript",
    "ConfigChange",
    "ConvertResult",
    "DiscoverResult",
    "EvidenceDocument",
    "Family",
    "FetchedManifest",
    "FileChange",
    "InspectResult",
    "K8sServeOptions",
    "KServeOptions",
    "KeygenResult",
    "Kind",
    "KubernetesDocuments",
    "ListenOptions",
    "LoginResult",
    "MergedMirrorReport",
    "MirrorEntry",
    "MirrorJob",
    "MirrorK8sJob",
    "MirrorK8sOptions",
    "MirrorReport",
    "MirrorRunOptions",
    "MirroredArtifact",
    "ModelCarImage",
    "ModelCarOptions",
    "ModelDiff",
    "ModelEntry",
    "MountRequest",
    "Mounted",
    "OcibridgeError",
    "OnExisting",
    "PodOptions",
    "PodRegistryAccess",
    "PolicyVerdict",
    "PrewarmOptions",
    "ProgressEvent",
    "PruneResult",
    "PullResult",
    "PullSecrets",
    "PushOptions",
    "PushResult",
    "ReferrerNode",
    "RegistryReport",
    "RemoveResult",
    "RepositoryList",
    "RequirementCheck",
    "ResolveResult",
    "SchemaCheck",
    "ServeOptions",
    "SignOptions",
    "SignResult",
    "SyncEntry",
    "TagResult",
    "TensorChange",
    "TransferOptions",
    "ValidateResult",
    "Variant",
    "Verification",
    "VerifiedSignature",
    "VerifyDirResult",
    "VerifyOptions",
    "VerifyResult",
    "VolumeCheck",
    "VolumeLayout",
    "attach",
    "attach_chunks",
    "attest",
    "build",
    "cache_dir",
    "cat",
    "check_policy",
    "check_registry",
    "closing_opened_stores",
    "completion_script",
    "convert",
    "copy_reference",
    "create_app",
    "delete",
    "diff",
    "discover",
    "enable_request_log",
    "events",
    "fetch_manifest",
    "filesystem",
    "inspect",
    "inspect_text",
    "k8s_check",
    "k8s_modelcar",
    "k8s_mount",
    "k8s_policy",
    "k8s_prewarm",
    "k8s_serve",
    "k8s_validate",
    "k8s_volume",
    "keygen",
    "list_bundle",
    "list_models",
    "list_repositories",
    "load",
    "load_source",
    "login",
    "logout",
    "mirror_k8s_job",
    "mirror_merge",
    "mirror_plan",
    "mirror_run",
    "mirror_shard",
    "mount",
    "open_model",
    "open_tensors",
    "path",
    "provenance",
    "prune",
    "prune_cache",
    "pull",
    "push",
    "remove",
    "resolve",
    "save",
    "sbom",
    "serve",
    "serve_mount",
    "sign",
    "tag",
    "tags",
    "unmount",
    "validate",
    "verification",
    "verify",
    "verify_dir",
]

if TYPE_CHECKING:
    from ocibridge.api.auth import login, logout
    from ocibridge.api.browse import FetchedManifest, RepositoryList, diff, fetch_manifest, list_repositories
    from ocibridge.api.bundle import BundleEntry, BundleResult, list_bundle, load, save
    from ocibridge.api.cache_ops import CachePruneResult, cache_dir, path, prune_cache
    from ocibridge.api.completion import CompletionScript, completion_script
    from ocibridge.api.convert import convert
    from ocibridge.api.evidence import AttestResult, EvidenceDocument, attest, provenance, sbom
    from ocibridge.api.k8s import (
        k8s_check,
        k8s_modelcar,
        k8s_mount,
        k8s_policy,
        k8s_prewarm,
        k8s_serve,
        k8s_validate,
        k8s_volume,
    )
    from ocibridge.api.k8s_types import (
        AdmissionPolicies,
        AdmissionSigners,
        K8sServeOptions,
        KServeOptions,
        KubernetesDocuments,
        ModelCarImage,
        ModelCarOptions,
        PodOptions,
        PodRegistryAccess,
        PrewarmOptions,
        PullSecrets,
        VolumeCheck,
        VolumeLayout,
    )
    from ocibridge.api.lazy_fs import filesystem
    from ocibridge.api.lazy_ops import ChunksResult, attach_chunks, cat, open_model, open_tensors
    from ocibridge.api.mirror import (
        MergedMirrorReport,
        MirroredArtifact,
        MirrorEntry,
        MirrorJob,
        MirrorK8sJob,
        MirrorK8sOptions,
        MirrorReport,
        MirrorRunOptions,
        SyncEntry,
        mirror_k8s_job,
        mirror_merge,
        mirror_plan,
        mirror_run,
        mirror_shard,
    )
    from ocibridge.api.model_ops import (
        copy_reference,
        inspect,
        load_source,
        pull,
        push,
        tags,
        validate,
    )
    from ocibridge.api.mount import Mounted, MountRequest, mount, serve_mount, unmount
    from ocibridge.api.options import AttestOptions, PushOptions, SignOptions, TransferOptions
    from ocibridge.api.policy import PolicyVerdict, RequirementCheck, Verification, check_policy, verification
    from ocibridge.api.registry_check import check_registry
    from ocibridge.api.serve import ListenOptions, ServeOptions, create_app, serve
    from ocibridge.api.session import closing_opened_stores, enable_request_log
    from ocibridge.api.signing import (
        KeygenResult,
        SignResult,
        VerifiedSignature,
        VerifyDirResult,
        VerifyOptions,
        VerifyResult,
        keygen,
        sign,
        verify,
        verify_dir,
    )
    from ocibridge.api.store_ops import attach, delete, discover, list_models, prune, remove, resolve, tag
    from ocibridge.api.texts import inspect_text
    from ocibridge.core.overwrite import OnExisting
    from ocibridge.errors import OcibridgeError
    from ocibridge.k8s.schemacheck import SchemaCheck
    from ocibridge.kinds.conversion import ConvertResult
    from ocibridge.lazyread.diff import ConfigChange, FileChange, ModelDiff, TensorChange
    from ocibridge.model.builder import BuildOptions, build
    from ocibridge.oci.mediatypes import Family, Kind, Variant
    from ocibridge.stores.registry.probe import RegistryReport
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
        ReferrerNode,
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


def __dir__() -> list[str]:
    """Every public name, loaded or not: ``help(ocibridge)`` and completion list the whole API."""
    return sorted(set(globals()) | set(__all__))
