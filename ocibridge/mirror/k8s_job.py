"""``ocibridge mirror JOB --emit k8s-job``: a ConfigMap holding the job file and an Indexed Job
whose pod number I runs ``--shard I/N``.

Kubernetes is the scheduler: it starts N pods (P at a time), gives each its index as
``JOB_COMPLETION_INDEX``, retries a failed index up to ``backoffLimitPerIndex`` times (a
retried shard resumes: finished artifacts are skipped, finished blobs HEAD-skipped) and keeps
each pod's log, whose last lines are the shard's ``--json`` report. A pod that fails on a
usage error (exit 2) fails its index at once; an evicted pod is not counted as a failure.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ocibridge.core.yamldocs import comments, dump_all
from ocibridge.errors import OcibridgeError, TooLarge, UsageError
from ocibridge.mirror.endpoints import job_reference
from ocibridge.mirror.job import MirrorJob
from ocibridge.places.locate import on_this_machine
from ocibridge.places.locators import registry_of
from ocibridge.stores.registry.pull_secret import (
    ca_config_map,
    ca_mount,
    check_label,
    check_quantity,
    check_secret_name,
    docker_config_mount,
    is_label,
    read_ca_pem,
)
from ocibridge.version import __version__

if TYPE_CHECKING:
    pass

JOB_DIR = "/etc/ocibridge/job"
REPORTS_DIR = "/reports"
CONTAINER = "mirror"
#: A ConfigMap holds at most 1 MiB.
MAX_CONFIGMAP_BYTES = 1 << 20
#: Exit status of a usage mistake: retrying the pod cannot help.
EXIT_USAGE = 2


@dataclass(frozen=True)
class MirrorK8sOptions:
    """The Kubernetes Job of a mirror job (``--emit k8s-job`` flags); defaults suit a few
    thousand small-to-mid models."""

    shards: int  # one pod each (completions)
    image: str | None = None  # with ocibridge as its entrypoint; default ocibridge:VERSION
    parallelism: int | None = None  # default: all shards at once
    name: str = "ocibridge-mirror"
    namespace: str | None = None
    configmap: str | None = None  # default: NAME-job
    docker_config_secret: str | None = None  # default: NAME-docker-config; "" leaves it out
    env_secrets: tuple[str, ...] = ()
    backoff_limit_per_index: int = 3
    max_failed_indexes: int | None = None
    cpu: str = "500m"
    memory: str = "512Mi"
    reports_claim: str | None = None  # a PVC the reports are written to, besides the logs
    service_account: str | None = None
    image_pull_secrets: tuple[str, ...] = ()  # to pull IMAGE with
    create_pull_secret: bool = False  # emit the docker config Secret from the stored credentials

    @property
    def pod_image(self) -> str:
        return self.image if self.image is not None else f"ocibridge:{__version__}"


@dataclass(frozen=True)
class MirrorK8sJob:
    """The Kubernetes objects that run a mirror job in ``shards`` pods: (the docker config
    Secret,) the ConfigMap holding the job, (a CA ConfigMap,) the Indexed Job."""

    objects: tuple[dict[str, Any], ...]
    name: str
    shards: int
    job_file: str  # the job's name in the ConfigMap's header line
    warnings: tuple[str, ...] = ()  # to say on stderr: loopback registries, credentials in a Secret

    def as_dict(self) -> dict[str, Any]:
        """A Kubernetes List of the objects (the command's ``--json``)."""
        return {"apiVersion": "v1", "kind": "List", "items": copy.deepcopy(list(self.objects))}

    def to_yaml(self) -> str:
        """The objects as YAML documents after a comment line: what the command prints."""
        head = comments([f"{self.name}: {self.shards} shards of {self.job_file}, each running --shard "
                         "$JOB_COMPLETION_INDEX/N; needs Kubernetes >= 1.29 (backoffLimitPerIndex)"])
        return head + dump_all(self.objects)


def registry_hosts(job: MirrorJob) -> list[str]:
    """Every registry ``host[:port]`` the job's sync entries name (sources and targets)."""
    hosts = set()
    for entry in job.sync:
        for text in (entry.source, entry.target):
            on = registry_of(job_reference(text))  # a registry, or a kind's place served from one
            if on is not None:
                hosts.add(on.registry)
    return sorted(hosts)


def needs_docker_config(job: MirrorJob) -> bool:
    """True when some registry's credentials can only come from a docker config: one the job
    gives no password_env or password_file for. A job whose every registry has those needs no
    Secret mounted (and a mandatory one would be a Secret to create for nothing)."""
    for host in registry_hosts(job):
        auth = job.registries.get(host)
        if auth is None or not (auth.username and (auth.password_env or auth.password_file)):
            return True
    return False


def k8s_objects(job: MirrorJob, job_path: Path, job_text: str, opts: MirrorK8sOptions,
                secret: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """[ConfigMap, (CA ConfigMap,) Job] for ``job`` (read from ``job_path``, whose text goes into
    the ConfigMap); ``secret``, the docker config Secret built by the caller, goes first.

    A ``ca_file`` names a path on this machine, which no pod sees: its PEM goes into a ConfigMap
    mounted as ``/etc/containers/certs.d/HOST/ca.crt`` (where ocibridge, like podman, looks for
    a registry's CA) and the job in the ConfigMap is written without the ``ca_file`` (as JSON)."""
    _check_options(opts)
    _check_job_runs_in_a_pod(job)
    cas = _ca_files(job)
    if cas:
        job, job_path, job_text = _without_ca_files(job)
    needs_env = sorted({a.password_env for a in job.registries.values() if a.password_env}
                       | {s.token_env for s in (job.defaults, *job.sync) if s.token_env})
    if needs_env and not opts.env_secrets:
        raise UsageError(f"the job reads {', '.join(needs_env)} from the environment: pass --env-secret SECRET "
                         "naming a Secret that holds it")
    if len(job_text.encode()) > MAX_CONFIGMAP_BYTES:
        raise TooLarge(f"{job_path}: larger than a ConfigMap holds (1 MiB)")
    key = "job" + (job_path.suffix.lower() if job_path.suffix.lower() in (".yaml", ".yml", ".json") else ".toml")
    configmap = opts.configmap or f"{opts.name}-job"
    labels = {"app.kubernetes.io/name": "ocibridge-mirror", "app.kubernetes.io/instance": opts.name}
    meta: dict[str, Any] = {"name": configmap, "labels": labels}
    if opts.namespace:
        meta["namespace"] = opts.namespace
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {key: job_text}}
    objects = [] if secret is None else [secret]
    objects.append(config_map)
    ca_map = None
    if cas:
        ca_map = f"{opts.name}-ca"
        objects.append(ca_config_map({**meta, "name": ca_map}, [pem for _, pem in cas]))
    docker = _docker_secret(opts, job)
    pod_job = _job(job, key, configmap, labels, opts, docker,
                   [(host, f"ca-{n}.crt") for n, (host, _) in enumerate(cas)], ca_map)
    return [*objects, pod_job]


def _ca_files(job: MirrorJob) -> list[tuple[str, str]]:
    """(host, PEM text) of every ``ca_file`` in the job, read now, on this machine."""
    return [(host, read_ca_pem(job.base_dir / Path(auth.ca_file).expanduser(), f"registries.{host}.ca_file"))
            for host, auth in sorted(job.registries.items()) if auth.ca_file]


def _without_ca_files(job: MirrorJob) -> tuple[MirrorJob, Path, str]:
    """The job as JSON without its ``ca_file`` paths (the pod finds the CAs in certs.d)."""
    data = job.model_dump(mode="json", exclude_none=True)
    for auth in data.get("registries", {}).values():
        auth.pop("ca_file", None)
    return MirrorJob.model_validate(data), *job_document(data)


def job_document(job: MirrorJob | dict[str, Any]) -> tuple[Path, str]:
    """A job file for a job that has none (built in Python, or rewritten): its name and text,
    JSON (which every job reader takes)."""
    data = job.model_dump(mode="json", exclude_none=True) if isinstance(job, MirrorJob) else job
    return Path("job.json"), json.dumps(data, indent=2, sort_keys=True) + "\n"


def _job(job: MirrorJob, key: str, configmap: str, labels: dict[str, str], opts: MirrorK8sOptions, secret: str,
         cas: list[tuple[str, str]], ca_map: str | None) -> dict[str, Any]:
    index = "$(JOB_COMPLETION_INDEX)"  # set by the Job controller in every pod of an Indexed Job
    args = ["mirror", f"{JOB_DIR}/{key}", "--shard", f"{index}/{opts.shards}", "--json"]
    mounts: list[dict[str, Any]] = [{"name": "job", "mountPath": JOB_DIR, "readOnly": True},
                                    {"name": "tmp", "mountPath": "/tmp"}]
    volumes: list[dict[str, Any]] = [{"name": "job", "configMap": {"name": configmap}},
                                     {"name": "tmp", "emptyDir": {}}]
    env = [{"name": "HOME", "value": "/tmp"}]  # the root filesystem is read-only
    if ca_map:
        volume, mount = ca_mount(ca_map, cas)
        volumes.append(volume)
        mounts.append(mount)
    if secret:
        volume, mount, var = docker_config_mount(secret)
        env.append(var)
        mounts.append(mount)
        volumes.append(volume)
    if opts.reports_claim:
        args += ["--report", f"{REPORTS_DIR}/shard-{index}-of-{opts.shards}.json"]
        mounts.append({"name": "reports", "mountPath": REPORTS_DIR})
        volumes.append({"name": "reports", "persistentVolumeClaim": {"claimName": opts.reports_claim}})
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": opts.pod_image,
        "args": args,
        "env": env,
        "resources": {"requests": {"cpu": opts.cpu, "memory": opts.memory}, "limits": {"memory": opts.memory}},
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": mounts,
    }
    if opts.env_secrets:
        container["envFrom"] = [{"secretRef": {"name": s}} for s in opts.env_secrets]
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",  # backoffLimitPerIndex retries in a new pod
        "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container],
        "volumes": volumes,
    }
    if opts.service_account:
        pod_spec["serviceAccountName"] = opts.service_account
    if opts.image_pull_secrets:
        pod_spec["imagePullSecrets"] = [{"name": s} for s in dict.fromkeys(opts.image_pull_secrets)]
    spec: dict[str, Any] = {
        "completionMode": "Indexed",
        "completions": opts.shards,
        "parallelism": opts.parallelism or opts.shards,
        "backoffLimitPerIndex": opts.backoff_limit_per_index,
        "podFailurePolicy": {"rules": [
            {"action": "FailIndex", "onExitCodes": {"containerName": CONTAINER, "operator": "In",
                                                     "values": [EXIT_USAGE]}},
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
        ]},
        "template": {"metadata": {"labels": labels}, "spec": pod_spec},
    }
    if opts.max_failed_indexes is not None:
        spec["maxFailedIndexes"] = opts.max_failed_indexes
    meta: dict[str, Any] = {"name": opts.name, "labels": labels,
                            "annotations": {"ocibridge.io/mirror-job-digest": job.digest()}}
    if opts.namespace:
        meta["namespace"] = opts.namespace
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}


def docker_secret_name(opts: MirrorK8sOptions) -> str:
    """The docker config Secret's name: ``--docker-config-secret`` or NAME-docker-config."""
    return opts.docker_config_secret or f"{opts.name}-docker-config"


def _docker_secret(opts: MirrorK8sOptions, job: MirrorJob) -> str:
    """The Secret to mount as the docker config, or "" for none: one named or created is
    mounted; by default one is mounted only when some registry's credentials must come from it."""
    if opts.docker_config_secret == "":
        return ""
    if opts.docker_config_secret is not None or opts.create_pull_secret or needs_docker_config(job):
        return docker_secret_name(opts)
    return ""


def _check_options(opts: MirrorK8sOptions) -> None:
    if not 1 <= opts.shards <= 100_000:
        raise UsageError("--shards must be between 1 and 100000 (an Indexed Job's limit)")
    if opts.parallelism is not None and opts.parallelism < 1:
        raise UsageError("--parallelism must be at least 1")
    if opts.backoff_limit_per_index < 0:
        raise UsageError("--backoff-limit-per-index must be 0 or more")
    if opts.max_failed_indexes is not None and not 0 <= opts.max_failed_indexes <= opts.shards:
        raise UsageError("--max-failed-indexes must be between 0 and --shards")
    if not is_label(opts.name) or len(opts.name) > 52:
        raise UsageError(f"--name {opts.name!r}: a Job name is lowercase letters, digits and '-', "
                         "at most 52 characters (its pods add a suffix)")
    if opts.namespace is not None:
        check_label("--namespace", opts.namespace)
    if opts.configmap is not None:
        check_secret_name("--configmap", opts.configmap)
    for flag, values in (("--docker-config-secret", [opts.docker_config_secret or "x"]),
                         ("--env-secret", opts.env_secrets),
                         ("--reports-claim", [opts.reports_claim or "x"]),
                         ("--service-account", [opts.service_account or "x"]),
                         ("--image-pull-secret", opts.image_pull_secrets)):
        for value in values:
            check_secret_name(flag, value)
    if not opts.pod_image or any(c.isspace() or not c.isprintable() for c in opts.pod_image):
        raise UsageError(f"--image {opts.pod_image!r} is not an image reference")
    check_quantity("--cpu", opts.cpu)
    check_quantity("--memory", opts.memory)


def _check_job_runs_in_a_pod(job: MirrorJob) -> None:
    """Refuse what a pod cannot do: read a path of this machine (a layout, the local Ollama
    store, a file named relative to the job, which the ConfigMap does not hold); and what it
    must not: a password inline in the job, which the ConfigMap would hold in clear. A
    ``ca_file`` is read here, on this machine, and goes to the pods in a ConfigMap of its own."""
    for n, entry in enumerate(job.sync, 1):
        for side, text in (("source", entry.source), ("target", entry.target)):
            if on_this_machine(job_reference(text)):
                raise OcibridgeError(f"sync entry {n}: {side} {text!r} is a path on this machine, which "
                                     "the pods cannot read; mirror between registries in Kubernetes")
    for host, auth in job.registries.items():
        if auth.password:  # the job text goes into a ConfigMap, which is no place for a secret
            raise OcibridgeError(f"registries.{host}.password: an inline password would be copied into the "
                                 "ConfigMap in clear; use password_env with --env-secret SECRET, or the docker "
                                 "config Secret (--docker-config-secret)")
        if auth.password_file and not Path(auth.password_file).is_absolute():
            raise OcibridgeError(f"registries.{host}.password_file = {auth.password_file!r}: relative to the job "
                                 "file, which in a pod is a ConfigMap holding only the job; use an absolute "
                                 "path of a volume you mount, or the docker config Secret")
    settings = [job.defaults, *job.sync]
    for s in settings:
        if s.token_file and not Path(s.token_file).is_absolute():
            raise OcibridgeError(f"token_file = {s.token_file!r}: relative to the job file, which in a pod is a "
                                 "ConfigMap holding only the job; use token_env with --env-secret SECRET, or an "
                                 "absolute path of a volume you mount")
        if s.verify is not None:
            for value in [*s.verify.keys, *([s.verify.trusted_root] if s.verify.trusted_root else [])]:
                if not Path(value).is_absolute():
                    raise OcibridgeError(f"verify: {value!r} is relative to the job file, which in a pod "
                                         "is a ConfigMap holding only the job; use an absolute path of a "
                                         "volume you mount")
