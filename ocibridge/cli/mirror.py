"""The ``mirror`` command of the CLI: run a job (or one shard of it), emit a Kubernetes Job that
runs every shard, or merge the shard reports (``mirror report REPORTS…``); each one call of
:mod:`ocibridge.api.mirror`. :func:`mirror_command` is the same run for ``python -m ocibridge.mirror``.

Flags only here: nothing heavy is imported until the command runs (``--help`` loads neither
pydantic nor httpx).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from ocibridge.cli.common import CommandAdder, add_pull_secret_flags, add_workload_flags, emit, warn
from ocibridge.cli.progress_flags import add_progress_flags, progress_display
from ocibridge.cli.signing import add_policy_flag
from ocibridge.core.terminal import one_line, printable
from ocibridge.errors import OcibridgeError, UsageError

if TYPE_CHECKING:
    from ocibridge.api.mirror import MirroredArtifact, MirrorReport, MirrorRunOptions, Shard
    from ocibridge.transfer.progress_modes import Display

REPORT = "report"


def register(command: CommandAdder) -> None:
    p = command("mirror", cmd_mirror)
    p.add_argument("job", metavar="JOB", help="job file (TOML, YAML or JSON); "
                   "or 'report' followed by the shard reports to merge")
    # default=[]: without one, argparse before 3.13 counts a '*' positional as required, and a
    # 'mirror' with no JOB said "required: JOB, REPORT"
    p.add_argument("reports", metavar="REPORT", nargs="*", default=[], help=argparse.SUPPRESS)
    p.add_argument("--dry-run", action="store_true", help="plan only: say what would be copied, change nothing")
    p.add_argument("--shard", metavar="I/N", help="run only shard I of N (0-based): the artifacts a stable hash "
                   "gives it; all N shards together do the whole job")
    add_policy_flag(p)
    p.add_argument("--report", metavar="FILE", help="also write the --json report to FILE (whole or not at all)")
    p.add_argument("--limit-rate", metavar="RATE",
                   help="cap all the job's transfers together at RATE bytes per second (e.g. 20M)")
    add_progress_flags(p)
    p.add_argument("--emit", choices=["k8s-job"], help="print a Kubernetes ConfigMap and Indexed Job running "
                   "the job in --shards pods (YAML; a List in JSON with --json) instead of running it")
    g = p.add_argument_group("Kubernetes Job (with --emit k8s-job)")
    g.add_argument("--shards", type=int, metavar="N", help="shards, one pod each (completions)")
    g.add_argument("--parallelism", type=int, metavar="P", help="pods at once (default: N)")
    add_workload_flags(g, extra="", name="ocibridge-mirror", named="Job name",
                       namespace_help="namespace of the Job and ConfigMap")
    g.add_argument("--configmap", metavar="NAME", help="ConfigMap holding the job file (default NAME-job)")
    g.add_argument("--docker-config-secret", metavar="SECRET",
                   help="Secret of type kubernetes.io/dockerconfigjson with the registry credentials "
                        "(default NAME-docker-config)")
    g.add_argument("--no-docker-config", action="store_true", help="mount no docker config Secret")
    g.add_argument("--env-secret", action="append", default=[], metavar="SECRET",
                   help="a Secret whose keys become environment variables (for password_env; repeatable)")
    g.add_argument("--backoff-limit-per-index", type=int, default=3, metavar="K",
                   help="retries of one shard's pod (default 3)")
    g.add_argument("--max-failed-indexes", type=int, metavar="M", help="stop the Job once M shards failed")
    g.add_argument("--cpu", default="500m", help="CPU request per pod (default 500m)")
    g.add_argument("--memory", default="512Mi", help="memory request and limit per pod (default 512Mi)")
    g.add_argument("--reports-claim", metavar="PVC",
                   help="a PersistentVolumeClaim to write each shard's report to, besides its log")
    g.add_argument("--service-account", metavar="NAME", help="service account of the pods")
    add_pull_secret_flags(g, pulls="IMAGE", creates="every registry of the job")


def cmd_mirror(args: argparse.Namespace) -> int:
    if args.job == REPORT:  # a job file named 'report' is ./report
        return _merge(args)
    if args.reports:
        raise UsageError(f"unexpected argument {args.reports[0]!r} (one JOB; or 'mirror report REPORT…')")
    if args.emit:
        return _emit_k8s(args)
    from ocibridge.api import mirror as api

    shard = api.parse_shard(args.shard) if args.shard is not None else None
    if args.report:
        api.check_report_place(args.report)
    limit_rate = None
    if args.limit_rate is not None:
        from ocibridge.cli.transfer_flags import parse_bytes

        try:
            limit_rate = parse_bytes(args.limit_rate)
        except ValueError as e:
            raise UsageError(f"--limit-rate: {e}") from None
    display = None if args.dry_run else progress_display(args, "mirror")
    options = api.MirrorRunOptions(policy=args.policy, limit_rate=limit_rate, report_file=args.report,
                                   blob_progress=display)
    quiet = args.json or args.quiet or args.progress == "none"
    live = None if quiet or (display is None and not sys.stderr.isatty()) else live_reporter(sys.stderr, display)
    try:
        report = _run(args.job, dry_run=args.dry_run, shard=shard, options=options, progress=live)
    finally:
        if display is not None:
            display.close()
    emit(args, report.as_dict(), report.format_text())
    return report.exit_code


def _run(job: str, *, dry_run: bool, shard: Shard | None, options: MirrorRunOptions | None = None,
         progress: Callable[[str, MirroredArtifact], None] | None = None) -> MirrorReport:
    """The one API call of a run: a plan, a shard's run or the whole job's."""
    from ocibridge.api import mirror as api

    if dry_run:
        return api.mirror_plan(job, shard=shard, options=options, progress=progress)
    if shard is not None:
        return api.mirror_shard(job, shard, options=options, progress=progress)
    return api.mirror_run(job, options=options, progress=progress)


def mirror_command(job_path: str, *, dry_run: bool = False, as_json: bool = False,
                   out: TextIO | None = None, err: TextIO | None = None, shard: str | None = None) -> int:
    """Run the job (or one ``I/N`` shard of it), print the summary (text or JSON); 1 when
    anything failed, 2 for a bad shard."""
    from ocibridge.api import mirror as api

    out = out or sys.stdout
    err = err or sys.stderr
    try:
        which = api.parse_shard(shard) if shard is not None else None
    except OcibridgeError as e:
        print(one_line(f"ocibridge: error: {e}"), file=err)
        return 2
    display = None
    if not as_json and not dry_run and err.isatty():
        from ocibridge.transfer.progress_modes import progress_bar

        display = progress_bar("mirror", err)
    live = None if as_json or not err.isatty() else live_reporter(err, display)
    try:
        report = _run(job_path, dry_run=dry_run, shard=which, progress=live,
                      options=api.MirrorRunOptions(blob_progress=display))
    except OcibridgeError as e:  # the job file: a run itself never raises for an artifact
        print(one_line(f"ocibridge: {e}"), file=err)
        return 1
    finally:
        if display is not None:
            display.close()
    if as_json:
        print(json.dumps(report.as_dict(), indent=2), file=out)
    else:
        print(printable(report.format_text()), file=out)
    return report.exit_code


def live_reporter(err: TextIO, display: Display | None = None) -> Callable[[str, MirroredArtifact], None]:
    """One line per finished artifact, so a long job on a terminal is not silent until its
    summary; above the bar when one is drawn (the job's bytes, as push draws them)."""
    from ocibridge.transfer.progress_modes import print_above

    def report(event: str, result: MirroredArtifact) -> None:
        if event in ("copied", "failed"):
            print_above(display, one_line(f"{event}: {result.source}"), err)

    return report


def _merge(args: argparse.Namespace) -> int:
    from ocibridge.api.mirror import mirror_merge

    if args.shard or args.emit or args.dry_run or args.report:
        raise UsageError("mirror report takes the reports and --json only")

    merged = mirror_merge(args.reports)
    emit(args, merged.as_dict(), merged.format_text())
    return merged.exit_code


def _emit_k8s(args: argparse.Namespace) -> int:
    from ocibridge.api.mirror import MirrorK8sOptions, mirror_k8s_job

    if args.shards is None:
        raise UsageError("--emit k8s-job needs --shards N")
    if args.shard or args.dry_run or args.report:
        raise UsageError("--emit k8s-job prints the Job; --shard, --dry-run and --report belong to a run")
    options = MirrorK8sOptions(
        shards=args.shards, parallelism=args.parallelism, image=args.image,
        name=args.name, namespace=args.namespace, configmap=args.configmap,
        docker_config_secret="" if args.no_docker_config else args.docker_config_secret,
        env_secrets=tuple(args.env_secret), backoff_limit_per_index=args.backoff_limit_per_index,
        max_failed_indexes=args.max_failed_indexes, cpu=args.cpu, memory=args.memory,
        reports_claim=args.reports_claim, service_account=args.service_account,
        image_pull_secrets=tuple(args.image_pull_secret), create_pull_secret=args.create_pull_secret)
    k8s_job = mirror_k8s_job(args.job, options)
    warn(k8s_job.warnings)
    if args.json:
        print(json.dumps(k8s_job.as_dict(), indent=2))
    else:
        sys.stdout.write(k8s_job.to_yaml())  # control characters are escaped in quoted scalars
    return 0
