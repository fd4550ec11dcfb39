"""Mirror jobs from Python (docs/mirroring.md): plan, run, run one shard, merge the shards'
reports, and the Kubernetes Job that runs every shard: what ``ocibridge mirror`` calls.

Each function takes a :class:`MirrorJob` (built in Python, or ``MirrorJob.from_file(path)``) or
the path of a job file, and returns a frozen result whose ``as_dict()`` is the command's
``--json``. A run never raises for one artifact: failures are in the report (``ok``,
``exit_code``); a job that cannot be read or an option that makes no sense raises.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ocibridge.errors import OcibridgeError, UsageError
from ocibridge.mirror.job import MirrorJob, Settings, SyncEntry, load_job
from ocibridge.mirror.jobsections import Concurrency, RateLimit, RegistryAuth, RevisionFilter, TagFilter, VerifySettings
from ocibridge.mirror.k8s_job import MirrorK8sJob, MirrorK8sOptions
from ocibridge.mirror.report import MergedMirrorReport, MirroredArtifact, MirrorEntry, MirrorReport
from ocibridge.mirror.shard import Shard, parse_shard

if TYPE_CHECKING:
    from ocibridge.mirror.summary import ArtifactResult
    from ocibridge.transfer.progress_events import ProgressFn

__all__ = [
    "Concurrency", "MergedMirrorReport", "MirrorEntry", "MirrorJob", "MirrorK8sJob", "MirrorK8sOptions",
    "MirrorProgress", "MirrorReport", "MirrorRunOptions", "MirroredArtifact", "RateLimit", "RegistryAuth",
    "RevisionFilter", "Settings", "Shard", "SyncEntry", "TagFilter", "VerifySettings", "check_report_place",
    "mirror_k8s_job", "mirror_merge", "mirror_plan", "mirror_run", "mirror_shard", "parse_shard",
]

#: A job, or the path of its file (TOML, YAML or JSON).
JobLike = MirrorJob | str | os.PathLike[str]

MirrorProgress = Callable[[str, MirroredArtifact], None]
"""Called as ``progress(event, artifact)`` while a job runs: ``planned``, ``skipped``, ``copied``
or ``failed``; a copy is reported when it finishes (from a worker thread, one call at a time)."""


@dataclass(frozen=True)
class MirrorRunOptions:
    """What a run obeys beyond its job file (which says where and how to reach each registry)."""

    policy: str | None = None  # the containers policy file every artifact is checked against; None: the one found
    limit_rate: int | None = None  # bytes per second over all the run's transfers together (this call's only)
    user_agent: str | None = None  # the run's requests' User-Agent (None: $OCIBRIDGE_USER_AGENT, a shard's own)
    report_file: str | Path | None = None  # also write the --json report there, whole or not at all
    blob_progress: ProgressFn | None = None  # (event, descriptor, nbytes) of every blob copied, as push reports them


def mirror_plan(job: JobLike, *, shard: Shard | str | None = None, options: MirrorRunOptions | None = None,
                progress: MirrorProgress | None = None) -> MirrorReport:
    """What a run would copy (artifacts ``planned``, with the blobs to send, mount or skip) and
    skip, changing nothing; of one shard (``"I/N"``) only, when given."""
    return _mirror(job, dry_run=True, shard=shard, options=options, progress=progress)


def mirror_run(job: JobLike, *, options: MirrorRunOptions | None = None,
               progress: MirrorProgress | None = None) -> MirrorReport:
    """Copy every artifact the job selects that the target lacks. Resumable: what a killed run
    finished is skipped by the next one, blobs already there are not sent again, and a tag is
    written only after its whole graph is there."""
    return _mirror(job, dry_run=False, shard=None, options=options, progress=progress)


def mirror_shard(job: JobLike, shard: Shard | str, *, options: MirrorRunOptions | None = None,
                 progress: MirrorProgress | None = None) -> MirrorReport:
    """Run shard ``I/N`` of the job: the artifacts a stable hash gives it (all N shards together
    do the whole job, without talking to each other). What one pod of :func:`mirror_k8s_job`'s
    Job does; its report merges with the others' in :func:`mirror_merge`. While it runs, its
    requests' User-Agent names the shard (unless ``options.user_agent`` or
    ``$OCIBRIDGE_USER_AGENT`` chooses one)."""
    return _mirror(job, dry_run=False, shard=shard, options=options, progress=progress)


def mirror_merge(reports: Iterable[MirrorReport | str | os.PathLike[str]]) -> MergedMirrorReport:
    """The shard reports of one run of one job merged into the job's report: each a
    :class:`MirrorReport` of :func:`mirror_shard` or the file of a shard's ``--json`` (or a
    pod's log holding it). Reports of another job, of differently sharded or dry runs are
    refused; shards that did not report are ``missing`` (and make the report fail)."""
    from ocibridge.mirror.merge import merge_shard_reports, parse_report, read_report

    shard_reports = [parse_report(f"reports[{n}]", report.as_dict()) if isinstance(report, MirrorReport)
                     else read_report(os.fspath(report)) for n, report in enumerate(reports)]
    return MergedMirrorReport.of_merged(merge_shard_reports(shard_reports))


def mirror_k8s_job(job: JobLike, options: MirrorK8sOptions) -> MirrorK8sJob:
    """The Kubernetes objects that run the job in ``options.shards`` pods: a ConfigMap holding
    the job file (a job built in Python goes in as JSON), the Indexed Job whose pod I runs
    shard I, and with ``create_pull_secret`` the docker config Secret of your stored
    credentials. Refuses what a pod cannot do (read a path of this machine, a password inline)."""
    from ocibridge.mirror.k8s_job import docker_secret_name, job_document, k8s_objects, registry_hosts
    from ocibridge.stores.registry.pull_secret import CREDENTIALS_WARNING, loopback_warnings, pull_secret

    if isinstance(job, MirrorJob):
        loaded = job
        path, text = job_document(job)
    else:
        path = Path(job)
        loaded = load_job(path)
        text = _job_text(path)
    if options.create_pull_secret and options.docker_config_secret == "":
        raise UsageError("--create-pull-secret creates the docker config Secret that --no-docker-config leaves out")
    hosts = registry_hosts(loaded)
    secret = None
    if options.create_pull_secret:
        secret = pull_secret(docker_secret_name(options), hosts, namespace=options.namespace, every_host=False)
    objects = k8s_objects(loaded, path, text, options, secret)
    warnings = [*loopback_warnings(hosts), *([CREDENTIALS_WARNING] if secret is not None else [])]
    return MirrorK8sJob(tuple(objects), options.name, options.shards, path.name, tuple(warnings))


def _job_text(path: Path) -> str:
    """The job file's text for the ConfigMap (read once more: the pods read the file as written)."""
    from ocibridge.core.limits import MAX_SMALL_INPUT, read_at_most

    try:
        return read_at_most(path, MAX_SMALL_INPUT).decode("utf-8")  # load_job refused a longer one
    except UnicodeDecodeError:
        raise OcibridgeError(f"{path}: not UTF-8 text, which a ConfigMap needs") from None


def _mirror(job: JobLike, *, dry_run: bool, shard: Shard | str | None, options: MirrorRunOptions | None,
            progress: MirrorProgress | None) -> MirrorReport:
    from ocibridge.mirror.run import run_job

    options = options or MirrorRunOptions()
    which = parse_shard(shard) if isinstance(shard, str) else shard
    loaded = job if isinstance(job, MirrorJob) else load_job(job)
    to_run = loaded.for_call(policy=options.policy,
                             transport=_call_transport(options.limit_rate, options.user_agent, which))
    listen = None
    if progress is not None:
        def listen(event: str, result: ArtifactResult) -> None:
            progress(event, MirroredArtifact.of(result))
    summary = run_job(to_run, dry_run=dry_run, progress=listen, shard=which, blob_progress=options.blob_progress)
    report = MirrorReport.of(summary)
    if options.report_file is not None:
        from ocibridge.mirror.merge import write_report

        write_report(options.report_file, report.as_dict())
    return report


def _call_transport(rate: int | None, user_agent: str | None, shard: Shard | None) -> dict[str, Any]:
    """What every registry client of one call is opened with: a byte budget of the call's own
    (all its transfers together under ``rate``, nobody else's under it) and the User-Agent its
    requests carry: the one asked for, else ``$OCIBRIDGE_USER_AGENT``, else for a shard one
    naming it, so registry access logs say which shard sent each request."""
    from ocibridge.stores.registry.client import ENV_USER_AGENT
    from ocibridge.stores.registry.ratelimit import RateLimit
    from ocibridge.version import __version__

    values: dict[str, Any] = {}
    if rate is not None:
        values["rate_budget"] = RateLimit(rate)
    if user_agent is None and shard is not None and not os.environ.get(ENV_USER_AGENT):
        user_agent = f"ocibridge/{__version__} mirror-shard/{shard.index}-of-{shard.count}"
    if user_agent is not None:
        values["user_agent"] = user_agent
    return values


def check_report_place(path: str) -> None:
    """Refuse a ``--report`` path before the work, not after it: its directory must exist, and a
    device or pipe there would be replaced by the staged report, not written to."""
    from ocibridge.core.fsutil import check_output_file

    if not Path(path).resolve().parent.is_dir():
        raise UsageError(f"--report {path}: no such directory")
    check_output_file(path)
