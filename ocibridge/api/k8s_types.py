"""What the ``ocibridge k8s`` calls take and give (:mod:`ocibridge.api.k8s`): option values grouped
by concern and frozen results, each with ``as_dict()`` (the command's ``--json``) and, for
Kubernetes documents, ``to_yaml()`` (what the command prints). Standard library only: the
documents are plain mappings, written as YAML by :mod:`ocibridge.core.yamldocs` when asked."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ocibridge.api.upstream_policy import UpstreamPolicyOptions
from ocibridge.core.textlists import one_or_many as _as_texts
from ocibridge.k8s.serveflags import COMMITTING as COMMITTING  # which of serve's flags k8s serve passes, to which pods
from ocibridge.k8s.serveflags import EVERY_POD as EVERY_POD
from ocibridge.k8s.serveflags import FACING as FACING
from ocibridge.k8s.serveflags import SWITCHES as SWITCHES

if TYPE_CHECKING:
    from ocibridge.k8s.registries_d import NodeFile
    from ocibridge.layers.apply import TreeEntry

#: The runtime and node platform every call assumes unless told (the current CRI-O release).
DEFAULT_RUNTIME = "cri-o"
DEFAULT_PLATFORM = "linux/amd64"
#: The image of the container that holds a model (a Pod's, a prewarm DaemonSet's).
DEFAULT_IMAGE = "busybox:1.36"


@dataclass(frozen=True)
class PullSecrets:
    """The Secrets of type ``kubernetes.io/dockerconfigjson`` kubelet pulls with
    (``imagePullSecrets``); ``create``: also write the Secret itself, built from the stored
    login for the registries involved (the output then holds credentials). ``k8s serve``
    creates the docker config Secret its pods read the registries with instead."""

    names: Sequence[str] = ()
    create: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "names", _as_texts(self.names))


@dataclass(frozen=True)
class PodOptions:
    """The Pod ``k8s_volume`` writes: where the model is mounted, the Pod's name and image, or
    only the volume and its mount (``snippet``) to paste into a Pod of one's own."""

    mount_path: str = "/models"
    name: str = "model-consumer"
    image: str = DEFAULT_IMAGE
    snippet: bool = False


@dataclass(frozen=True)
class ModelCarOptions:
    """How ``k8s_modelcar`` builds the image: a tag in the same store, one index serving the
    image and the ModelPack artifact, the platforms, and a runnable base image (a reference)."""

    tag: str | None = None
    index: bool = False
    platforms: Sequence[str] = ()
    base: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "platforms", _as_texts(self.platforms))


@dataclass(frozen=True)
class KServeOptions:
    """A KServe InferenceService serving the ModelCar image, pinned by digest."""

    name: str
    model_format: str = "huggingface"


@dataclass(frozen=True)
class PrewarmOptions:
    """The prewarm DaemonSet: image volumes or ModelCar init containers (``mode``; default: what
    the runtime has), its name and namespace, the nodes (labels ``selector`` picks; every node
    without), and the image of the container that holds the models. ``node_mirrors``: carry the
    models' registries.toml mirrors to the nodes (False when Spegel or Dragonfly sets them).
    ``warm_image``: each node also restores the models' compile caches (``warm load``, in that
    image: the engine's, with ocibridge) for ``warm_engine``, verified with the public key
    ``warm_verify_key`` names (``secret/NAME/ITEM`` or ``configmap/NAME/ITEM``), keyed by
    ``warm_options`` (KEY=VALUE) and ``warm_device`` (``cuda``, ``cpu``), into the node's
    ``warm_host_path`` (default ``/var/lib/ocibridge/warm/NAME``), which the engine's pods mount."""

    mode: Literal["volume", "modelcar"] | None = None
    name: str = "model-prewarm"
    namespace: str | None = None
    selector: Mapping[str, str] | Sequence[str] = ()  # {"key": "value"} or ["key=value", ...]
    image: str = DEFAULT_IMAGE
    node_mirrors: bool = True
    warm_image: str | None = None
    warm_engine: str = "vllm"
    warm_verify_key: str | None = None
    warm_options: Sequence[str] = ()
    warm_device: str = "cuda"
    warm_host_path: str | None = None


@dataclass(frozen=True)
class K8sServeOptions(UpstreamPolicyOptions):
    """The Deployment, Service and cache volume running ``ocibridge serve`` (``image``: default
    ``ocibridge:VERSION``; ``cache_access_mode``: default ReadWriteOnce for one replica, else an
    emptyDir per replica); the ``upstream_*`` policy: :class:`UpstreamPolicyOptions`, as serve's."""

    image: str | None = None
    name: str = "ocibridge-serve"
    namespace: str | None = None
    replicas: int = 1
    port: int = 8080
    service_type: str = "ClusterIP"
    cache_size: str = "50Gi"
    cache_access_mode: str | None = None
    storage_class: str | None = None
    token_secret: str | None = None
    default_tag: str | None = None
    public_url: str | None = None
    cpu: str = "500m"
    memory: str = "1Gi"
    upstream: str | None = None  # serve --upstream: a proxy of this Hub API (docs/serve.md)
    upstream_token_secret: str | None = None  # a Secret whose key 'token' is the token sent to it
    upstream_fresh: float | None = None  # --upstream-fresh (None: serve's default)
    # with upstream and no token_secret: the anonymous clients arriving from one address share one per-client
    # budget, accepted (no warning; with token_secret a usage error)
    anonymous_shared_budget: bool = False
    quotas: str | None = None  # serve --quotas: a TOML file here, read now and carried to the pods in a ConfigMap
    scan: str = "off"  # serve --scan: refuse | quarantine | off
    scan_verify_keys: Sequence[str] = ()  # serve --scan-verify-key: public keys here, carried in a ConfigMap
    sign_key: str | None = None  # serve --sign-key: a private key here ($COSIGN_PASSWORD), carried in a Secret
    sign_form: str | None = None  # serve --sign-form: classic, bundle or both (None: serve's default, both)
    sign_key_secret: str | None = None  # instead of sign_key: a Secret the cluster has (keys sign.key, password)
    sbom: bool = False  # serve --sbom: each commit's AI-BOM (the image needs ocibridge[evidence])
    provenance: bool = False  # serve --provenance: each commit's SLSA provenance
    attest_key: str | None = None  # serve --attest-key (with sbom or provenance): as sign_key, a Secret NAME-attest-key
    attest_key_secret: str | None = None  # instead of attest_key: a Secret the cluster has (keys attest.key, password)
    verify_keys: Sequence[str] = ()  # serve --verify-key: public keys here, carried in a ConfigMap NAME-verify-keys
    policy: str | None = None  # serve --policy: a containers policy.json here, carried in a ConfigMap NAME-policy
    # serve's flags passed to the pods as given (["--concurrency", "8", "--no-metrics"]): those
    # ocibridge.k8s.serveflags lists; ``k8s serve`` checks their values with serve's own parser first
    serve_flags: Sequence[str] = ()

    def checks(self) -> tuple[Sequence[str], str | None]:
        """serve's ``--verify-key`` files and ``--policy`` file, as ``k8s.serveverify.pod_verification`` takes them."""
        return _as_texts(self.verify_keys), self.policy

    def evidence_flags(self) -> dict[str, Any]:
        """serve's evidence flags, as :func:`ocibridge.k8s.servesign.pod_evidence` takes them."""
        return {name: getattr(self, name) for name in ("sign_key", "sign_key_secret", "sign_form", "sbom",
                                                       "provenance", "attest_key", "attest_key_secret")}


@dataclass(frozen=True)
class PodRegistryAccess:
    """How ``k8s_serve``'s pods reach the registries: plain HTTP, no TLS check, a CA file of this
    machine (its text goes into a ConfigMap), and the docker config Secret mounted as
    ``$DOCKER_CONFIG`` (``docker_config=False``: none)."""

    plain_http: bool = False
    insecure: bool = False
    ca_file: str | None = None
    docker_config_secret: str | None = None
    docker_config: bool = True


@dataclass(frozen=True)
class AdmissionSigners:
    """Who must have signed which images, as flags say it (``k8s policy --image/--key/--identity
    /--issuer``) rather than from a containers policy file."""

    images: Sequence[str] = ()
    keys: Sequence[str] = ()  # public key files (PEM): any one's signature is accepted
    identity: str | None = None  # keyless: the certificate's subject
    issuer: str | None = None  # keyless: the OIDC issuer

    def __post_init__(self) -> None:
        object.__setattr__(self, "images", _as_texts(self.images))
        object.__setattr__(self, "keys", _as_texts(self.keys))


@dataclass(frozen=True)
class KubernetesDocuments:
    """Documents ``kubectl apply -f`` takes, with the comment lines above them (``header``),
    what to warn about before them (``warnings``: a loopback registry name) and after them
    (``closing_warnings``: the output holds credentials), and the references pinned by digest."""

    documents: tuple[dict[str, Any], ...]
    header: str = ""
    warnings: tuple[str, ...] = ()
    closing_warnings: tuple[str, ...] = ()
    pinned: tuple[str, ...] = ()
    holds_credentials: bool = False

    def to_yaml(self) -> str:
        """The header, then the documents separated by ``---``: what the command prints."""
        from ocibridge.core.yamldocs import dump_all

        return self.header + (dump_all(self.documents) if self.documents else "")

    def as_dict(self) -> dict[str, Any]:
        """One document as itself, several as a ``v1`` ``List`` (kubectl takes either)."""
        if len(self.documents) == 1:
            return self.documents[0]
        return {"apiVersion": "v1", "kind": "List", "items": list(self.documents)}


def documents_with_secret(secret: dict[str, Any] | None, docs: Sequence[dict[str, Any]], *, header: str,
                          warnings: Sequence[str] = (), pinned: Sequence[str] = (),
                          holding: Sequence[str] = ()) -> KubernetesDocuments:
    """The documents a call built, the pull Secret it created (``pull_secrets.create``) first so
    ``kubectl apply`` makes it before what pulls with it, and the closing warning that the
    output then holds credentials (``holding``: the warnings of other secrets it holds): one
    builder for every call that may create the Secret."""
    from ocibridge.stores.registry.pull_secret import CREDENTIALS_WARNING

    closing = (*((CREDENTIALS_WARNING,) if secret is not None else ()), *holding)
    return KubernetesDocuments((*([secret] if secret else []), *docs), header=header, warnings=tuple(warnings),
                               closing_warnings=closing, pinned=tuple(pinned), holds_credentials=bool(closing))


@dataclass(frozen=True)
class AdmissionPolicies(KubernetesDocuments):
    """The Kyverno ClusterPolicy and policy-controller ClusterImagePolicies, with what does not
    carry over from the policy (``notes``; ``untranslated`` of them left a part out)."""

    notes: tuple[str, ...] = ()
    untranslated: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "List", "items": list(self.documents), "notes": list(self.notes)}


@dataclass(frozen=True)
class ModelCarImage:
    """The ModelCar image (or index) built, and with ``kserve`` the InferenceService serving it."""

    digest: str
    media_type: str
    size: int
    tag: str | None = None
    kserve: KubernetesDocuments | None = None

    def to_yaml(self) -> str:
        """The InferenceService (and Secret) as the command prints them; empty without ``kserve``."""
        return self.kserve.to_yaml() if self.kserve else ""

    def as_dict(self) -> dict[str, Any]:
        summary: dict[str, Any] = {"digest": self.digest, "mediaType": self.media_type, "size": self.size}
        if self.kserve is None:
            return summary
        return {**summary, "objects": list(self.kserve.documents)}


@dataclass(frozen=True)
class VolumeCheck:
    """Whether ``runtime`` mounts the reference as an image volume, why not (``reasons``), what
    may surprise (``warnings``), what it does with each layer, the node policy's verdict, and
    the files the pod sees (``tree``)."""

    reference: str
    runtime: str  # cri-o or containerd
    runtime_label: str  # with the version whose rules were applied: cri-o@1.36
    platform: str
    manifest: str  # digest of the manifest the runtime ends up with
    kind: str  # image (unpacked) or artifact (blobs as files)
    will_mount: bool
    node_policy: str  # the node's containers policy's verdict, one line
    node_policy_refused: bool = False  # that verdict is a refusal (then also one of the reasons)
    reasons: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    layers: tuple[str, ...] = ()
    layers_hidden: int = 0  # layers whose content the pod will not see
    sub_path: str | None = None
    diff_ids_verified: bool | None = None
    tree: tuple[TreeEntry, ...] = field(default=())
    #: files every node needs for its pull to pass (a registries.d file turning sigstore attachments on)
    node_files: tuple[NodeFile, ...] = field(default=())

    def as_dict(self) -> dict[str, Any]:
        return {
            "reference": self.reference,
            "runtime": self.runtime,
            "runtimeVersion": self.runtime_label.split("@", 1)[1],
            "platform": self.platform,
            "manifest": self.manifest,
            "kind": self.kind,
            "willMount": self.will_mount,
            "subPath": self.sub_path,
            "diffIdsVerified": self.diff_ids_verified,
            "layersHidden": self.layers_hidden,
            "reasons": list(self.reasons),
            "warnings": list(self.warnings),
            "layers": list(self.layers),
            "tree": [e.to_json() for e in self.tree],
            "nodePolicy": self.node_policy,
            "nodeFiles": [f.as_dict() for f in self.node_files],
        }


@dataclass(frozen=True)
class VolumeLayout:
    """A directory laid out as ``runtime`` presents the volume: its paths, and what a copy on
    disk could not reproduce (ownership, as non-root)."""

    directory: str
    runtime: str
    files: tuple[str, ...]
    not_reproduced: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"files": list(self.files), "notReproduced": list(self.not_reproduced)}
