"""``k8s serve``: ``ocibridge serve`` on Kubernetes. A Deployment of N replicas behind a
Service, the model cache on a volume, probes on ``/readyz`` and ``/healthz``, and what the pods
need to reach the registries (a docker config Secret, a CA ConfigMap: stores/registry/pull_secret.py).

The cache volume (docs/serve.md, "On Kubernetes"):

- one replica: a ReadWriteOnce PersistentVolumeClaim (any storage class has it), the Deployment
  replaced with ``Recreate`` (a rolling update would start the new pod while the old one holds
  the volume, and on another node it would never attach);
- several replicas and ``--cache-access-mode ReadWriteMany``: one claim all replicas share (the
  model cache's writes are atomic renames of verified files under flock, so replicas may share it);
- several replicas otherwise: an ``emptyDir`` per replica, sized by ``--cache-size``. A
  ReadWriteOnce claim cannot be shared by pods on different nodes; the registry is the source
  of truth, so a replica that restarts with an empty cache fetches again and is still right.

Several replicas (docs/serve.md, "One writer, many readers"): a registry has no compare-and-swap
on tags, so one process writes. ``--replicas N`` is N readers (``serve --writer``: they answer
reads and forward every write) behind the Service users reach, plus one writer, a Deployment of
its own (``Recreate``, its staging and cache on a ReadWriteOnce claim) behind a Service of its
own that a NetworkPolicy opens to the readers only (the writer believes the readers'
``X-Forwarded-Host``: from any peer, since only they reach it; the node's probes always do).

The registries' names must mean the same inside the cluster: loopback names are warned about
by the caller. Nothing of this machine reaches the pods but the CA's text and, when asked, the
stored login (a Secret).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ocibridge.core import environment
from ocibridge.errors import UsageError
from ocibridge.k8s.serveflags import PodFlags
from ocibridge.k8s.servescan import PodScan
from ocibridge.k8s.servesign import PodEvidence
from ocibridge.k8s.serveverify import PodVerification
from ocibridge.stores.registry import pull_secret as secrets  # the k8s helpers the mirror Job shares

CONTAINER = "serve"
#: Where the model cache is mounted in the pod (``$OCIBRIDGE_CACHE``).
CACHE_DIR = "/var/cache/ocibridge"
TOKENS_DIR = "/etc/ocibridge/tokens"
#: The key of the ``--token-secret`` Secret holding the read tokens, one a line.
TOKENS_KEY = "tokens"
#: where the ``--upstream-token-secret`` Secret is mounted, and its key holding the upstream's token
UPSTREAM_DIR = "/etc/ocibridge/upstream"
UPSTREAM_KEY = "token"
#: where the ``--quotas`` ConfigMap is mounted (a directory of its own, not a subPath: the kubelet
#: swaps the file when the ConfigMap changes, and serve reads it again), and its key
QUOTAS_DIR = "/etc/ocibridge-quotas"
QUOTAS_KEY = "quotas.toml"
#: The uid and gid of the Containerfile's image; fsGroup makes the cache volume writable to it.
IMAGE_USER = 10001
#: Seconds a pod keeps serving after it is told to stop, while the endpoints controller takes it
#: out of the Service (kube-proxy learns of it a moment later than the kubelet).
DRAIN = 5
#: where a pod finds the registries.toml carrying the sources' mirrors
SETTINGS_DIR = "/etc/ocibridge"
ACCESS_MODES = ("ReadWriteOnce", "ReadWriteMany")
#: the label telling the writer's pods from the readers'
COMPONENT = "app.kubernetes.io/component"
#: the writer's peers whose X-Forwarded-Host it believes: any (the NetworkPolicy lets only readers in)
ANY_PEER = ("0.0.0.0/0", "::/0")


@dataclass(frozen=True)
class ServeUpstream:
    """serve's ``--upstream`` flags (docs/serve.md, A proxy of an upstream Hub); the token comes
    from a Secret, mounted as a file (``--upstream-token-file``), never in the args."""

    url: str
    token_secret: str | None = None  # a Secret whose key 'token' is the upstream's token
    fresh: float | None = None  # --upstream-fresh (None: serve's default)
    policy: tuple[str, ...] = ()  # the --upstream-allow flags and their kin, as the API renders its options
    anonymous_shared_budget: bool = False  # accepted: no warning of the anonymous clients' shared budget (not serve's)

    def args(self) -> list[str]:
        args = ["--upstream", self.url]
        if self.token_secret:
            args += ["--upstream-token-file", f"{UPSTREAM_DIR}/{UPSTREAM_KEY}"]
        if self.fresh is not None:
            args += ["--upstream-fresh", f"{self.fresh:g}"]
        return args + list(self.policy)


@dataclass
class ServeDeployment:
    """What ``k8s serve`` flags set."""

    sources: Sequence[str]  # registry prefixes, as serve takes them
    image: str
    hosts: Sequence[str] = ()  # the registries the sources name (for the CA items)
    name: str = "ocibridge-serve"
    namespace: str | None = None
    replicas: int = 1
    port: int = 8080
    cache_size: str = "50Gi"
    storage_class: str | None = None
    cache_access_mode: str | None = None  # default: ReadWriteOnce for one replica, else an emptyDir
    token_secret: str | None = None
    default_tag: str | None = None
    public_url: str | None = None  # where clients reach the Service (an Ingress that ends TLS)
    plain_http: bool = False
    insecure: bool = False
    ca_pem: str | None = None  # the text of --ca-file, for every source registry
    docker_config_secret: str | None = None  # mounted as $DOCKER_CONFIG: the registries' credentials
    image_pull_secrets: Sequence[str] = ()  # to pull IMAGE with
    cpu: str = "500m"
    memory: str = "1Gi"
    grace: int = 30  # seconds serve gives requests in flight after SIGTERM
    service_type: str = "ClusterIP"
    labels: dict[str, str] = field(default_factory=dict)
    settings: str | None = None  # a registries.toml (the sources' mirrors: k8s/node_mirrors.py)
    writer: str | None = None  # a reader's --writer URL
    trust_forwarded: tuple[str, ...] = ()  # the writer's --trust-forwarded peers
    upstream: ServeUpstream | None = None  # a proxy of an upstream Hub (every replica asks it on a miss)
    quotas: str | None = None  # the text of serve's --quotas file, in a ConfigMap NAME-quotas
    scan: PodScan | None = None  # serve's --scan, its --scan-verify-key keys in a ConfigMap NAME-scan-keys
    evidence: PodEvidence | None = None  # --sign-key, --sbom, --provenance, --attest-key (the writer's alone)
    flags: PodFlags | None = None  # serve's flags passed as given (serveflags.py: which pods take which)
    verification: PodVerification | None = None  # --verify-key, --policy: their files in ConfigMaps

    def cache_volume(self) -> str:
        """``ReadWriteOnce``, ``ReadWriteMany`` (a claim) or ``emptyDir`` (one per replica)."""
        if self.cache_access_mode:
            return self.cache_access_mode
        return "ReadWriteOnce" if self.replicas == 1 else "emptyDir"

    def warnings(self) -> list[str]:
        """A proxy without tokens tells its clients apart by their address, which the Service's
        exposure may make one for many (sharedbudget.py); unless the user accepted that."""
        if self.upstream is None or self.token_secret or self.upstream.anonymous_shared_budget:
            return []
        from ocibridge.k8s.sharedbudget import shared_budget_warning

        return [shared_budget_warning(self.service_type, self.public_url)]


def check(d: ServeDeployment) -> None:
    if not d.sources:
        raise UsageError("k8s serve needs at least one SOURCE (a registry prefix)")
    if not 1 <= d.replicas <= 1000:
        raise UsageError("--replicas must be between 1 and 1000")
    if not 1 <= d.port <= 65535:
        raise UsageError("--port must be between 1 and 65535")
    if len(d.name) > 47:  # a Deployment's pods add two suffixes; the claim adds -cache
        raise UsageError(f"--name {d.name!r}: at most 47 characters (the pods' names add suffixes)")
    if d.replicas > 1 and d.writer is None and len(d.name) > 40:  # the writer's objects add -writer
        raise UsageError(f"--name {d.name!r}: at most 40 characters with --replicas (the writer's names add -writer)")
    secrets.check_label("--name", d.name)
    if d.namespace is not None:
        secrets.check_label("--namespace", d.namespace)
    for flag, names in (("--token-secret", [d.token_secret]), ("--storage-class", [d.storage_class]),
                        ("--docker-config-secret", [d.docker_config_secret]),
                        ("--image-pull-secret", list(d.image_pull_secrets)),
                        ("--upstream-token-secret", [d.upstream.token_secret if d.upstream else None])):
        for name in names:
            if name is not None:
                secrets.check_secret_name(flag, name)
    if d.cache_access_mode is not None and d.cache_access_mode not in ACCESS_MODES:
        raise UsageError(f"--cache-access-mode {d.cache_access_mode!r}: ReadWriteOnce or ReadWriteMany")
    if d.cache_access_mode == "ReadWriteOnce" and d.replicas > 1:
        raise UsageError("--cache-access-mode ReadWriteOnce with --replicas > 1: a ReadWriteOnce volume attaches "
                         "to one node, so replicas elsewhere would never start; use ReadWriteMany (a storage "
                         "class that has it) or leave the mode out for a cache per replica (emptyDir)")
    for flag, value in (("--cache-size", d.cache_size), ("--cpu", d.cpu), ("--memory", d.memory)):
        secrets.check_quantity(flag, value)
    if not d.image or any(c.isspace() or not c.isprintable() for c in d.image):
        raise UsageError(f"--image {d.image!r} is not an image reference")
    from ocibridge.oci.reference import is_tag

    if d.default_tag is not None and not is_tag(d.default_tag):  # the pods' serve would refuse it at start
        raise UsageError(f"--default-tag {d.default_tag!r} is not a tag (up to 128 of letters, digits, _ . -)")
    if d.upstream is not None:
        from ocibridge.k8s.sharedbudget import check_accepted

        check_accepted(d.upstream.anonymous_shared_budget, bool(d.token_secret))
    own = d.evidence.own() if d.evidence else None
    if (d.replicas > 1 and d.writer is None and own and own.public is None and d.scan
            and d.scan.mode == "quarantine" and not d.scan.keys):
        raise UsageError(f"--scan quarantine with --replicas and {own.kind.flag}-secret: the readers trust the "
                         "writer's scan reports by its public key, which the Secret keeps from here; give "
                         f"--scan-verify-key PUB (the public half of the Secret's {own.kind.file})")


def objects(d: ServeDeployment) -> list[dict[str, Any]]:
    """[CA ConfigMap,] [--sign-key and --attest-key Secrets,] [PersistentVolumeClaim,] Deployment, Service (a docker
    config Secret, built by the caller from the stored login, goes before them); with several replicas, the
    writer's claim, Deployment, Service and NetworkPolicy before the readers' (:func:`_replicated`)."""
    check(d)
    docs: list[dict[str, Any]] = []
    ca_map = None
    if d.ca_pem is not None:
        ca_map = f"{d.name}-ca"
        docs.append(secrets.ca_config_map({**_meta(d), "name": ca_map}, [d.ca_pem]))
    if d.evidence is not None:
        docs += d.evidence.secret_documents(_meta(d))
    if d.replicas > 1 and d.writer is None:
        return docs + _replicated(d, ca_map)
    return docs + _one_deployment(d, ca_map)


def _replicated(d: ServeDeployment, ca_map: str | None) -> list[dict[str, Any]]:
    """One writer (its claim, ``Recreate``) and its Service, a NetworkPolicy opening it to the
    readers only, then ``d.replicas`` readers sending their writes to it, behind ``d.name``. The
    writer alone commits, so it alone holds ``--sign-key`` and ``--attest-key``; the readers trust its reports."""
    writer_name = f"{d.name}-writer"
    writer = replace(d, name=writer_name, replicas=1, cache_access_mode="ReadWriteOnce", service_type="ClusterIP",
                     labels={**d.labels, COMPONENT: "writer"}, trust_forwarded=() if d.public_url else ANY_PEER,
                     flags=d.flags.writers() if d.flags else None)
    own = d.evidence.own() if d.evidence else None  # its public half None from a named Secret (see check())
    readers = replace(d, labels={**d.labels, COMPONENT: "reader"}, writer=f"http://{writer_name}:{d.port}",
                      evidence=None, flags=d.flags.readers() if d.flags else None,
                      scan=d.scan.trusting(own.public) if d.scan and own and own.public else d.scan)
    policy = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": _meta(writer), "spec": {
        "podSelector": {"matchLabels": _labels(writer)}, "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"podSelector": {"matchLabels": _labels(readers)}}],
                     "ports": [{"port": "http", "protocol": "TCP"}]}]}}
    return [*_one_deployment(writer, ca_map), policy, *_one_deployment(readers, ca_map)]


def _labels(d: ServeDeployment) -> dict[str, str]:
    return {"app.kubernetes.io/name": "ocibridge-serve", "app.kubernetes.io/instance": d.name, **d.labels}


def _meta(d: ServeDeployment) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": d.name, "labels": _labels(d)}
    if d.namespace:
        meta["namespace"] = d.namespace
    return meta


def _one_deployment(d: ServeDeployment, ca_map: str | None) -> list[dict[str, Any]]:
    """[its PersistentVolumeClaim,] [its registries, quotas, scan keys, verify keys and policy ConfigMaps,]
    the Deployment of ``d`` and its Service."""
    labels, meta = _labels(d), _meta(d)
    docs: list[dict[str, Any]] = []
    claim = None
    if d.cache_volume() != "emptyDir":
        claim = f"{d.name}-cache"
        spec: dict[str, Any] = {"accessModes": [d.cache_volume()], "resources": {"requests": {"storage": d.cache_size}}}
        if d.storage_class:
            spec["storageClassName"] = d.storage_class
        docs.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {**meta, "name": claim},
                     "spec": spec})
    if d.settings is not None:
        docs.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {**meta, "name": f"{d.name}-registries"},
                     "data": {"registries.toml": d.settings}})
    if d.quotas is not None:
        docs.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {**meta, "name": f"{d.name}-quotas"},
                     "data": {QUOTAS_KEY: d.quotas}})
    if d.scan is not None and d.scan.keys:
        docs.append(d.scan.config_map({**meta, "name": f"{d.name}-scan-keys"}))
    if d.verification is not None:
        docs += d.verification.config_maps(meta)
    docs.append(_deployment(d, meta, labels, claim, ca_map))
    docs.append({"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": {
        "type": d.service_type, "selector": labels,
        "ports": [{"name": "http", "port": d.port, "targetPort": "http", "protocol": "TCP"}]}})
    return docs


def serve_args(d: ServeDeployment) -> list[str]:
    """The container's command line (the image's entrypoint is ``ocibridge``)."""
    args = ["serve", *d.sources, "--listen", f":{d.port}"]
    if d.default_tag:
        args += ["--default-tag", d.default_tag]
    if d.public_url:
        args += ["--public-url", d.public_url]
    if d.token_secret:
        args += ["--token-file", f"{TOKENS_DIR}/{TOKENS_KEY}"]
    if d.plain_http:
        args.append("--plain-http")
    if d.insecure:
        args.append("--insecure")
    if d.writer:
        args += ["--writer", d.writer]
    for peers in d.trust_forwarded:
        args += ["--trust-forwarded", peers]
    if d.upstream is not None:
        args += d.upstream.args()
    if d.quotas is not None:
        args += ["--quotas", f"{QUOTAS_DIR}/{QUOTAS_KEY}"]
    if d.scan is not None:
        args += d.scan.args()
    if d.evidence is not None:
        args += d.evidence.args()
    if d.verification is not None:
        args += d.verification.args()
    if d.flags is not None:
        args += d.flags.args()
    return args


def _deployment(d: ServeDeployment, meta: dict[str, Any], labels: dict[str, str], claim: str | None,
                ca_map: str | None) -> dict[str, Any]:
    env = [{"name": "HOME", "value": "/tmp"},  # the root filesystem is read-only
           {"name": environment.CACHE, "value": CACHE_DIR}]
    mounts: list[dict[str, Any]] = [{"name": "cache", "mountPath": CACHE_DIR}, {"name": "tmp", "mountPath": "/tmp"}]
    cache: dict[str, Any] = ({"persistentVolumeClaim": {"claimName": claim}} if claim
                             else {"emptyDir": {"sizeLimit": d.cache_size}})
    volumes: list[dict[str, Any]] = [{"name": "cache", **cache}, {"name": "tmp", "emptyDir": {}}]
    if ca_map:
        volume, mount = secrets.ca_mount(ca_map, [(host, "ca-0.crt") for host in dict.fromkeys(d.hosts)])
        volumes.append(volume)
        mounts.append(mount)
    if d.settings is not None:  # the sources' mirrors, read as serve reads its settings file
        volumes.append({"name": "registries", "configMap": {"name": f"{d.name}-registries"}})
        mounts.append({"name": "registries", "mountPath": SETTINGS_DIR, "readOnly": True})
        env.append({"name": environment.REGISTRIES_CONF, "value": f"{SETTINGS_DIR}/registries.toml"})
    if d.docker_config_secret:
        volume, mount, var = secrets.docker_config_mount(d.docker_config_secret)
        volumes.append(volume)
        mounts.append(mount)
        env.append(var)
    if d.token_secret:
        volumes.append({"name": "tokens", "secret": {"secretName": d.token_secret,
                                                     "items": [{"key": TOKENS_KEY, "path": TOKENS_KEY}]}})
        mounts.append({"name": "tokens", "mountPath": TOKENS_DIR, "readOnly": True})
    if d.upstream is not None and d.upstream.token_secret:
        volumes.append({"name": "upstream-token", "secret": {
            "secretName": d.upstream.token_secret, "items": [{"key": UPSTREAM_KEY, "path": UPSTREAM_KEY}]}})
        mounts.append({"name": "upstream-token", "mountPath": UPSTREAM_DIR, "readOnly": True})
    if d.quotas is not None:
        volumes.append({"name": "quotas", "configMap": {"name": f"{d.name}-quotas"}})
        mounts.append({"name": "quotas", "mountPath": QUOTAS_DIR, "readOnly": True})
    if d.scan is not None and d.scan.keys:
        volume, mount = d.scan.volume(f"{d.name}-scan-keys")
        volumes.append(volume)
        mounts.append(mount)
    if d.evidence is not None:
        for volume, mount in d.evidence.volumes():
            volumes.append(volume)
            mounts.append(mount)
        env += d.evidence.env()
    for volume, mount in d.verification.volumes(d.name) if d.verification is not None else ():
        volumes.append(volume)
        mounts.append(mount)
    requests = {"cpu": d.cpu, "memory": d.memory}
    if not claim:  # the scheduler places each replica on a node with room for its cache
        requests["ephemeral-storage"] = d.cache_size

    def probe(path: str, period: int, failures: int) -> dict[str, Any]:
        return {"httpGet": {"path": path, "port": "http"}, "periodSeconds": period, "timeoutSeconds": 5,
                "failureThreshold": failures}

    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": d.image,
        "args": serve_args(d),
        "ports": [{"name": "http", "containerPort": d.port, "protocol": "TCP"}],
        "env": env,
        # ready: every source reachable (a registry down takes the replicas out of the Service, and
        # they come back by themselves); alive: the process answers (a registry down does not restart it)
        "readinessProbe": probe("/readyz", 10, 3),
        "livenessProbe": probe("/healthz", 20, 3),
        "startupProbe": probe("/healthz", 2, 30),
        # keep serving while the Service forgets the pod, then SIGTERM: serve finishes what is in flight
        "lifecycle": {"preStop": {"exec": {"command": ["sleep", str(DRAIN)]}}},
        "resources": {"requests": requests, "limits": {"memory": d.memory}},
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": mounts,
    }
    pod: dict[str, Any] = {
        # preStop, then serve's own grace for the requests in flight, then a margin to exit
        "terminationGracePeriodSeconds": DRAIN + d.grace + 5,
        "securityContext": {"runAsNonRoot": True, "fsGroup": IMAGE_USER, "fsGroupChangePolicy": "OnRootMismatch",
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container],
        "volumes": volumes,
    }
    if d.image_pull_secrets:
        pod["imagePullSecrets"] = [{"name": s} for s in dict.fromkeys(d.image_pull_secrets)]
    # a ReadWriteOnce claim is held by one pod: the old one goes before the new one starts
    strategy = {"type": "Recreate"} if claim and d.cache_volume() == "ReadWriteOnce" else {
        "type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": {
        "replicas": d.replicas, "selector": {"matchLabels": labels}, "strategy": strategy,
        "template": {"metadata": {"labels": labels}, "spec": pod}}}


def header(d: ServeDeployment) -> str:
    """The comment lines above the YAML: what the cache is, how to reach the server."""
    volume = d.cache_volume()
    where = f"{d.name}.{d.namespace or 'NAMESPACE'}.svc"
    cache = {
        "ReadWriteOnce": [f"the model cache is a ReadWriteOnce claim of {d.cache_size} (one replica: an update",
                          "recreates the pod, which holds the volume)"],
        "ReadWriteMany": [f"the model cache is one ReadWriteMany claim of {d.cache_size} every replica shares"],
        "emptyDir": [f"each replica's model cache is an emptyDir of {d.cache_size}, emptied when the pod goes",
                     "(a ReadWriteOnce claim cannot be shared across nodes; --cache-access-mode ReadWriteMany",
                     "shares one claim)"],
    }[volume]
    lines = [f"ocibridge serve: {d.replicas} replica(s) serving {', '.join(d.sources)};", *cache]
    if d.replicas > 1:
        lines += [f"they send every write to one writer ({d.name}-writer, its staging and cache on a ReadWriteOnce",
                  f"claim of {d.cache_size}): a registry has no compare-and-swap on tags, so one process commits"]
    lines.append(f"Clients: HF_ENDPOINT=http://{where}:{d.port}")
    from ocibridge.core.yamldocs import comments

    return comments(lines)
