"""ocibridge: publish, fetch, sign, serve and mirror ML models as OCI artifacts, and run them on Kubernetes.

Models (Carton, MLSteam, Ollama, Hugging Face caches, directories) become ModelPack artifacts in
any OCI registry or layout. The API by task (every name here is importable from ``ocibridge``):

Publish
    ``push`` (a model to a store; ``PushOptions``), ``build`` and ``BuildOptions`` (the artifact
    alone), ``convert`` (one model family into another), ``tag``, ``attach``, ``attach_chunks``,
    ``save``, ``load`` and ``list_bundle`` (bundles), ``login``, ``logout``.
Fetch
    ``pull`` (``PullOptions``, ``TransferOptions``; ``pull_destination``), ``copy_reference``,
    ``path`` (a snapshot in the model cache),
    ``open_model``, ``open_tensors``, ``cat``, ``filesystem`` (lazy, verified reads), ``load_tensors``
    and ``iter_tensors`` (a whole model's tensors into memory, verified, no disk), ``mount``,
    ``serve_mount`` and ``unmount`` (a model as a read-only FUSE directory), ``inspect``,
    ``inspect_text``, ``validate``, ``tags``, ``resolve``, ``discover``, ``fetch_manifest``,
    ``list_repositories``, ``list_models``, ``diff``, ``load_source``, ``events`` (progress).
Sign
    ``sign``, ``verify``, ``verify_dir``, ``keygen``, ``attest``, ``provenance``, ``sbom``,
    ``check_policy``, ``verification`` (``SignOptions``, ``AttestOptions``, ``VerifyOptions``);
    ``scan``, ``scan_path``, ``scan_reports``, ``rescan``, ``release_scan`` (a model's files judged by content, the
    report attached signed).
Serve
    ``serve`` and ``create_app`` (the Hugging Face Hub API over registries; ``ServeOptions``,
    ``ListenOptions``); ``serve_usage`` (what each namespace holds against its quotas: ``NamespaceUsage``).
Mirror
    ``mirror_run``, ``mirror_plan``, ``mirror_shard``, ``mirror_merge``, ``mirror_k8s_job``
    (``MirrorJob``, ``MirrorRunOptions``).
Kubernetes
    ``k8s_volume``, ``k8s_mount``, ``k8s_check``, ``k8s_validate``, ``k8s_policy``, ``k8s_prewarm``,
    ``k8s_modelcar``, ``k8s_serve``, ``k8s_mount_daemon``.
Warm starts
    ``warm_save``, ``warm_caches``, ``warm_load``, ``warm_key``: compile caches kept beside the
    model as signed referrers, restored before the first compile (docs/warm.md).
Housekeeping
    ``remove``, ``delete``, ``prune``, ``prune_cache``, ``cache_dir``, ``check_registry``,
    ``closing_opened_stores``, ``enable_request_log``, ``completion_script``.

Every error is an ``OcibridgeError``. The names are imported on first use (PEP 562), so
``ocibridge --help`` and ``--version`` start without loading pydantic and httpx.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

import ocibridge.kinds  # noqa: F401  (the kinds tell places their schemes and openers: places/kinds.py)
from ocibridge.core.httpx_defer import defer_httpx_extras
from ocibridge.version import __version__ as __version__

defer_httpx_extras()  # httpx's command-line tool and trio: loaded when used (core/httpx_defer.py)

#: (module under ocibridge, the public names it defines): each public name stands here once
#: (tests/code/test_facade.py holds this table to ``__all__``)
_TABLE: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("api.model_ops", ("copy_reference", "load_source", "push")),
    ("api.pull_ops", ("pull", "pull_destination", "PullDestination")),
    ("api.inspect_ops", ("inspect", "tags", "validate")),
    ("api.auth", ("login", "logout")),
    ("api.cache_ops", ("CachePruneResult", "cache_dir", "path", "prune_cache")),
    ("api.bundle", ("BundleEntry", "BundleResult", "list_bundle", "load", "save")),
    ("api.browse", ("FetchedManifest", "RepositoryList", "diff", "fetch_manifest", "list_repositories")),
    ("lazyread.diff", ("ConfigChange", "FileChange", "ModelDiff", "TensorChange")),
    ("api.completion", ("CompletionScript", "completion_script")),
    ("api.registry_check", ("check_registry",)),
    ("stores.registry.probe", ("RegistryReport",)),
    ("api.session", ("closing_opened_stores", "enable_request_log")),
    ("api.texts", ("inspect_text",)),
    ("api.lazy_ops", ("ChunksResult", "attach_chunks", "cat", "open_model", "open_tensors")),
    ("api.load_ops", ("iter_tensors", "load_tensors")),
    ("lazyread.tensorload", ("TensorMismatch", "TensorStream")),
    ("api.options", ("AttestOptions", "PullOptions", "PushOptions", "SignOptions", "TransferOptions")),
    ("api.evidence", ("AttestResult", "EvidenceDocument", "attest", "provenance", "sbom")),
    ("api.convert", ("convert",)),
    ("api.chunk_options", ("ChunkChoice",)),
    ("kinds.conversion", ("ConvertResult",)),
    ("api.lazy_fs", ("filesystem",)),
    ("api.mount", ("MountRequest", "Mounted", "mount", "serve_mount", "unmount")),
    ("api.signing", ("KeygenResult", "SignResult", "VerifiedSignature", "VerifyDirResult", "VerifyOptions",
                     "VerifyResult", "keygen", "sign", "verify", "verify_dir")),
    ("api.policy", ("PolicyVerdict", "RequirementCheck", "Verification", "check_policy", "verification")),
    ("api.scan_ops", ("RescanResult", "ScanResult", "release_scan", "rescan", "scan", "scan_path", "scan_reports")),
    ("api.k8s", ("k8s_check", "k8s_modelcar", "k8s_mount", "k8s_policy", "k8s_prewarm", "k8s_validate",
                 "k8s_volume")),
    ("api.k8s_serve", ("k8s_serve",)),
    ("api.k8s_mount", ("MountDaemonOptions", "k8s_mount_daemon")),
    ("k8s.schemacheck", ("SchemaCheck",)),
    ("api.k8s_types", ("AdmissionPolicies", "AdmissionSigners", "K8sServeOptions", "KServeOptions",
                       "KubernetesDocuments", "ModelCarImage", "ModelCarOptions", "PodOptions", "PodRegistryAccess",
                       "PrewarmOptions", "PullSecrets", "VolumeCheck", "VolumeLayout")),
    ("api.mirror", ("MergedMirrorReport", "MirrorEntry", "MirrorJob", "MirrorK8sJob", "MirrorK8sOptions",
                    "MirrorReport", "MirrorRunOptions", "MirroredArtifact", "SyncEntry", "mirror_k8s_job",
                    "mirror_merge", "mirror_plan", "mirror_run", "mirror_shard")),
    ("api.serve", ("ListenOptions", "NamespaceUsage", "ServeOptions", "create_app", "serve", "serve_usage")),
    ("errors", ("OcibridgeError",)),
    ("model.builder", ("BuildOptions", "build")),
    ("oci.mediatypes", ("Family", "Kind", "Variant")),
    ("core.overwrite", ("OnExisting",)),
    ("transfer.progress_events", ("ProgressEvent", "events")),
    ("transfer.results", ("AttachResult", "DiscoverResult", "InspectResult", "LoginResult", "ModelEntry",
                          "PruneResult", "PullResult", "PushResult", "ReferrerNode", "RemoveResult", "ResolveResult",
                          "TagResult", "ValidateResult")),
    ("api.store_ops", ("attach", "discover", "list_models", "remove", "resolve", "tag")),
    ("api.delete_ops", ("delete",)),
    ("api.prune_ops", ("prune",)),
    ("api.warm", ("CacheMismatch", "WarmCache", "WarmKey", "WarmList", "WarmLoaded", "WarmSaved", "warm_caches",
                  "warm_key", "warm_load", "warm_save")),
)

#: public name -> the module (under ocibridge) that defines it
_HOMES = {name: home for home, names in _TABLE for name in names}

__all__ = [
    "AdmissionPolicies",
    "AdmissionSigners",
    "AttachResult",
    "AttestOptions",
    "AttestResult",
    "BuildOptions",
    "BundleEntry",
    "BundleResult",
    "CacheMismatch",
    "CachePruneResult",
    "ChunkChoice",
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
    "MountDaemonOptions",
    "MountRequest",
    "Mounted",
    "NamespaceUsage",
    "OcibridgeError",
    "OnExisting",
    "PodOptions",
    "PodRegistryAccess",
    "PolicyVerdict",
    "PrewarmOptions",
    "ProgressEvent",
    "PruneResult",
    "PullDestination",
    "PullOptions",
    "PullResult",
    "PullSecrets",
    "PushOptions",
    "PushResult",
    "ReferrerNode",
    "RegistryReport",
    "RemoveResult",
    "RepositoryList",
    "RequirementCheck",
    "RescanResult",
    "ResolveResult",
    "ScanResult",
    "SchemaCheck",
    "ServeOptions",
    "SignOptions",
    "SignResult",
    "SyncEntry",
    "TagResult",
    "TensorChange",
    "TensorMismatch",
    "TensorStream",
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
    "WarmCache",
    "WarmKey",
    "WarmList",
    "WarmLoaded",
    "WarmSaved",
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
    "iter_tensors",
    "k8s_check",
    "k8s_modelcar",
    "k8s_mount",
    "k8s_mount_daemon",
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
    "load_tensors",
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
    "pull_destination",
    "push",
    "release_scan",
    "remove",
    "rescan",
    "resolve",
    "save",
    "sbom",
    "scan",
    "scan_path",
    "scan_reports",
    "serve",
    "serve_mount",
    "serve_usage",
    "sign",
    "tag",
    "tags",
    "unmount",
    "validate",
    "verification",
    "verify",
    "verify_dir",
    "warm_caches",
    "warm_key",
    "warm_load",
    "warm_save",
]

if TYPE_CHECKING:
    from ocibridge.api.auth import login, logout
    from ocibridge.api.browse import FetchedManifest, RepositoryList, diff, fetch_manifest, list_repositories
    from ocibridge.api.bundle import BundleEntry, BundleResult, list_bundle, load, save
    from ocibridge.api.cache_ops import CachePruneResult, cache_dir, path, prune_cache
    from ocibridge.api.chunk_options import ChunkChoice
    from ocibridge.api.completion import CompletionScript, completion_script
    from ocibridge.api.convert import convert
    from ocibridge.api.delete_ops import delete
    from ocibridge.api.evidence import AttestResult, EvidenceDocument, attest, provenance, sbom
    from ocibridge.api.inspect_ops import inspect, tags, validate
    from ocibridge.api.k8s import (
        k8s_check,
        k8s_modelcar,
        k8s_mount,
        k8s_policy,
        k8s_prewarm,
        k8s_validate,
        k8s_volume,
    )
    from ocibridge.api.k8s_mount import MountDaemonOptions, k8s_mount_daemon
    from ocibridge.api.k8s_serve import k8s_serve
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
    from ocibridge.api.load_ops import iter_tensors, load_tensors
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
    from ocibridge.api.model_ops import copy_reference, load_source, push
    from ocibridge.api.mount import Mounted, MountRequest, mount, serve_mount, unmount
    from ocibridge.api.options import AttestOptions, PullOptions, PushOptions, SignOptions, TransferOptions
    from ocibridge.api.policy import PolicyVerdict, RequirementCheck, Verification, check_policy, verification
    from ocibridge.api.prune_ops import prune
    from ocibridge.api.pull_ops import PullDestination, pull, pull_destination
    from ocibridge.api.registry_check import check_registry
    from ocibridge.api.serve import ListenOptions, NamespaceUsage, ServeOptions, create_app, serve, serve_usage
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
    from ocibridge.api.store_ops import attach, discover, list_models, remove, resolve, tag
    from ocibridge.api.texts import inspect_text
    from ocibridge.api.warm import (
        CacheMismatch,
        WarmCache,
        WarmKey,
        WarmList,
        WarmLoaded,
        WarmSaved,
        warm_caches,
        warm_key,
        warm_load,
        warm_save,
    )
    from ocibridge.core.overwrite import OnExisting
    from ocibridge.errors import OcibridgeError
    from ocibridge.k8s.schemacheck import SchemaCheck
    from ocibridge.kinds.conversion import ConvertResult
    from ocibridge.lazyread.diff import ConfigChange, FileChange, ModelDiff, TensorChange
    from ocibridge.lazyread.tensorload import TensorMismatch, TensorStream
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
