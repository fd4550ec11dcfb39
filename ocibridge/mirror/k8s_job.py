"""``ocibridge mirror JOB --emit k8s-job``: a ConfigMap holding the job file and an Indexed Job
whose pod number I runs ``--shard I/N``.

Kubernetes is the scheduler: it starts N pods (P at a time), gives each its index as
``JOB_COMPLETION_INDEX``, retries a failed index up to ``backoffLimitPerIndex`` times (a
retried shard resumes: finished artifacts are skipped, finished blobs HEAD-skipped) and keeps
each pod's log, whose last lines are the shard's ``--json`` report. A pod that fails on a
usage error (exit 2) fails its index at once; an evicted pod is not counted as a failure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ocibridge.errors import OcibridgeError, TooLarge, UsageError
from ocibridge.mirror.job import MirrorJob
from ocibridge.oci.reference import on_this_machine

JOB_DIR = "/etc/ocibridge/job"
DOCKER_DIR = "/etc/ocibridge/docker"
REPORTS_DIR = "/reports"
CONTAINER = "mirror"
#: A ConfigMap holds at most 1 MiB.
MAX_CONFIGMAP_BYTES = 1 << 20
#: Exit status of a usage mistake: retrying the pod cannot help.
EXIT_USAGE = 2
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?\Z")
_QUANTITY = re.compile(r"[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?\Z")


@dataclass
class JobOptions:
    """What ``--emit k8s-job`` flags set; defaults suit a few thousand small-to-mid models."""

    shards: int
    image: str
    parallelism: int | None = None  # default: all shards at once
    name: str = "ocibridge-mirror"
    namespace: str | None = None
    configmap: str | None = None  # default: NAME-job
    docker_config_secret: str | None = None  # default: NAME-docker-config; "" leaves it out
    env_secrets: list[str] = field(default_factory=list)
    backoff_limit_per_index: int = 3
    max_failed_indexes: int | None = None
    cpu: str = "500m"
    memory: str = "512Mi"
    reports_claim: str | None = None  # a PVC the reports are written to, besides the logs
    service_account: str | None = None


def k8s_objects(job: MirrorJob, job_path: Path, job_text: str, opts: JobOptions) -> list[dict[str, Any]]:
    """[ConfigMap, Job] for ``job`` (read from ``job_path``, whose text goes into the ConfigMap)."""
    _check_options(opts)
    _check_job_runs_in_a_pod(job)
    needs_env = sorted({a.password_env for a in job.registries.values() if a.password_env})
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
    return [config_map, _job(job, key, configmap, labels, opts)]


def _job(job: MirrorJob, key: str, configmap: str, labels: dict[str, str], opts: JobOptions) -> dict[str, Any]:
    index = "$(JOB_COMPLETION_INDEX)"  # set by the Job controller in every pod of an Indexed Job
    args = ["mirror", f"{JOB_DIR}/{key}", "--shard", f"{index}/{opts.shards}", "--json"]
    mounts: list[dict[str, Any]] = [{"name": "job", "mountPath": JOB_DIR, "readOnly": True},
                                    {"name": "tmp", "mountPath": "/tmp"}]
    volumes: list[dict[str, Any]] = [{"name": "job", "configMap": {"name": configmap}},
                                     {"name": "tmp", "emptyDir": {}}]
    env = [{"name": "HOME", "value": "/tmp"}]  # the root filesystem is read-only
    secret = _docker_secret(opts)
    if secret:
        env.append({"name": "DOCKER_CONFIG", "value": DOCKER_DIR})
        mounts.append({"name": "docker-config", "mountPath": DOCKER_DIR, "readOnly": True})
        volumes.append({"name": "docker-config", "secret": {
            "secretName": secret, "items": [{"key": ".dockerconfigjson", "path": "config.json"}]}})
    if opts.reports_claim:
        args += ["--report", f"{REPORTS_DIR}/shard-{index}-of-{opts.shards}.json"]
        mounts.append({"name": "reports", "mountPath": REPORTS_DIR})
        volumes.append({"name": "reports", "persistentVolumeClaim": {"claimName": opts.reports_claim}})
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": opts.image,
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


def _docker_secret(opts: JobOptions) -> str:
    if opts.docker_config_secret is None:
        return f"{opts.name}-docker-config"
    return opts.docker_config_secret


def _check_options(opts: JobOptions) -> None:
    if not 1 <= opts.shards <= 100_000:
        raise UsageError("--shards must be between 1 and 100000 (an Indexed Job's limit)")
    if opts.parallelism is not None and opts.parallelism < 1:
        raise UsageError("--parallelism must be at least 1")
    if opts.backoff_limit_per_index < 0:
        raise UsageError("--backoff-limit-per-index must be 0 or more")
    if opts.max_failed_indexes is not None and not 0 <= opts.max_failed_indexes <= opts.shards:
        raise UsageError("--max-failed-indexes must be between 0 and --shards")
    if not _DNS_LABEL.match(opts.name) or len(opts.name) > 52:
        raise UsageError(f"--name {opts.name!r}: a Job name is lowercase letters, digits and '-', "
                         "at most 52 characters (its pods add a suffix)")
    for flag, value in (("--namespace", opts.namespace), ("--configmap", opts.configmap)):
        if value is not None and not _DNS_LABEL.match(value) and not (flag == "--configmap"
                                                                      and _DNS_SUBDOMAIN.match(value)):
            raise UsageError(f"{flag} {value!r} is not a valid Kubernetes name")
    for flag, values in (("--docker-config-secret", [opts.docker_config_secret or "x"]),
                         ("--env-secret", opts.env_secrets),
                         ("--reports-claim", [opts.reports_claim or "x"]),
                         ("--service-account", [opts.service_account or "x"])):
        for value in values:
            if not _DNS_SUBDOMAIN.match(value):
                raise UsageError(f"{flag} {value!r} is not a valid Kubernetes name")
    if not opts.image or any(c.isspace() or not c.isprintable() for c in opts.image):
        raise UsageError(f"--image {opts.image!r} is not an image reference")
    for flag, value in (("--cpu", opts.cpu), ("--memory", opts.memory)):
        if not _QUANTITY.match(value):
            raise UsageError(f"{flag} {value!r} is not a Kubernetes quantity (500m, 2, 512Mi, 4Gi)")


def _check_job_runs_in_a_pod(job: MirrorJob) -> None:
    """Refuse what a pod cannot do: read a path of this machine (a layout, the local Ollama
    store, a file named relative to the job, which the ConfigMap does not hold); and what it
    must not: a password inline in the job, which the ConfigMap would hold in clear."""
    for n, entry in enumerate(job.sync, 1):
        for side, text in (("source", entry.source), ("target", entry.target)):
            if on_this_machine(text):
                raise OcibridgeError(f"sync entry {n}: {side} {text!r} is a path on this machine, which "
                                     "the pods cannot read; mirror between registries in Kubernetes")
    for host, auth in job.registries.items():
        if auth.password:  # the job text goes into a ConfigMap, which is no place for a secret
            raise OcibridgeError(f"registries.{host}.password: an inline password would be copied into the "
                                 "ConfigMap in clear; use password_env with --env-secret SECRET, or the docker "
                                 "config Secret (--docker-config-secret)")
        for key, value in (("password_file", auth.password_file), ("ca_file", auth.ca_file)):
            if value and not Path(value).is_absolute():
                raise OcibridgeError(f"registries.{host}.{key} = {value!r}: relative to the job file, "
                                     "which in a pod is a ConfigMap holding only the job; use an absolute "
                                     "path of a volume you mount, or the docker config Secret")
    settings = [job.defaults, *job.sync]
    for s in settings:
        if s.verify is not None:
            for value in [*s.verify.keys, *([s.verify.trusted_root] if s.verify.trusted_root else [])]:
                if not Path(value).is_absolute():
                    raise OcibridgeError(f"verify: {value!r} is relative to the job file, which in a pod "
                                         "is a ConfigMap holding only the job; use an absolute path of a "
                                         "volume you mount")
