"""The ``mirror`` command of the CLI: run a job (or one shard of it), emit a Kubernetes Job that
runs every shard, or merge the shard reports (``mirror report REPORTS…``).

Flags only here: nothing heavy is imported until the command runs (``--help`` loads neither
pydantic nor httpx).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from ocibridge.cli.common import CommandAdder, add_pull_secret_flags, emit
from ocibridge.cli.signing import add_policy_flag
from ocibridge.core.limits import MAX_SMALL_INPUT, read_at_most
from ocibridge.errors import OcibridgeError, UsageError

if TYPE_CHECKING:
    from ocibridge.mirror.shard import Shard

REPORT = "report"


def register(command: CommandAdder) -> None:
    p = command("mirror", cmd_mirror)
    p.add_argument("job", metavar="JOB", help="job file (TOML, or YAML with PyYAML installed); "
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
    p.add_argument("--emit", choices=["k8s-job"], help="print a Kubernetes ConfigMap and Indexed Job running "
                   "the job in --shards pods (YAML; a List in JSON with --json) instead of running it")
    g = p.add_argument_group("Kubernetes Job (with --emit k8s-job)")
    g.add_argument("--shards", type=int, metavar="N", help="shards, one pod each (completions)")
    g.add_argument("--parallelism", type=int, metavar="P", help="pods at once (default: N)")
    g.add_argument("--image", default=None, metavar="IMAGE",
                   help="image with ocibridge as its entrypoint (default ocibridge:VERSION; see Containerfile)")
    g.add_argument("--name", default="ocibridge-mirror", help="Job name (default ocibridge-mirror)")
    g.add_argument("--namespace", help="namespace of the Job and ConfigMap")
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
    from ocibridge.mirror import load_job, run_job
    from ocibridge.mirror.command import live_reporter
    from ocibridge.mirror.shard import parse_shard

    shard = parse_shard(args.shard) if args.shard is not None else None
    if args.report and not Path(args.report).resolve().parent.is_dir():
        raise UsageError(f"--report {args.report}: no such directory")  # say so before the work, not after
    if args.limit_rate is not None:
        from ocibridge.cli.transfer_flags import parse_bytes
        from ocibridge.stores.registry.ratelimit import set_process_rate

        try:
            set_process_rate(parse_bytes(args.limit_rate))
        except ValueError as e:
            raise UsageError(f"--limit-rate: {e}") from None
    job = load_job(args.job)
    job.obey_policy(args.policy)
    live = None if args.json or not sys.stderr.isatty() else live_reporter(sys.stderr)
    with _shard_user_agent(shard):
        summary = run_job(job, dry_run=args.dry_run, progress=live, shard=shard)
    data = summary.as_dict()
    if args.report:
        from ocibridge.mirror.merge import write_report

        write_report(args.report, data)
    text = summary.format_text()
    if shard is not None:
        text += f"\nshard {shard} of job {summary.job_digest}"
    emit(args, data, text)
    return summary.exit_code


@contextmanager
def _shard_user_agent(shard: Shard | None) -> Iterator[None]:
    """While a shard runs, its requests' User-Agent names it, so registry access logs say which
    shard sent each request (unless the user chose a User-Agent)."""
    from ocibridge.stores.registry.client import ENV_USER_AGENT
    from ocibridge.version import __version__

    if shard is None or os.environ.get(ENV_USER_AGENT):
        yield
        return
    os.environ[ENV_USER_AGENT] = f"ocibridge/{__version__} mirror-shard/{shard.index}-of-{shard.count}"
    try:
        yield
    finally:
        os.environ.pop(ENV_USER_AGENT, None)


def _merge(args: argparse.Namespace) -> int:
    from ocibridge.mirror.merge import merge_reports

    if args.shard or args.emit or args.dry_run or args.report:
        raise UsageError("mirror report takes the reports and --json only")

    merged = merge_reports(args.reports)
    emit(args, merged.as_dict(), merged.format_text())
    return merged.exit_code


def _emit_k8s(args: argparse.Namespace) -> int:
    from ocibridge.mirror import load_job
    from ocibridge.mirror.k8s_job import JobOptions, docker_secret_name, k8s_objects, registry_hosts
    from ocibridge.mirror.yamlout import dump_all
    from ocibridge.version import __version__

    if args.shards is None:
        raise UsageError("--emit k8s-job needs --shards N")
    if args.shard or args.dry_run or args.report:
        raise UsageError("--emit k8s-job prints the Job; --shard, --dry-run and --report belong to a run")
    path = Path(args.job)
    job = load_job(path)
    try:
        text = read_at_most(path, MAX_SMALL_INPUT).decode("utf-8")  # load_job above refused a longer one
    except UnicodeDecodeError:
        raise OcibridgeError(f"{path}: not UTF-8 text, which a ConfigMap needs") from None
    opts = JobOptions(
        shards=args.shards, parallelism=args.parallelism, image=args.image or f"ocibridge:{__version__}",
        name=args.name, namespace=args.namespace, configmap=args.configmap,
        docker_config_secret="" if args.no_docker_config else args.docker_config_secret,
        env_secrets=args.env_secret, backoff_limit_per_index=args.backoff_limit_per_index,
        max_failed_indexes=args.max_failed_indexes, cpu=args.cpu, memory=args.memory,
        reports_claim=args.reports_claim, service_account=args.service_account,
        image_pull_secrets=args.image_pull_secret, create_pull_secret=args.create_pull_secret)
    if args.create_pull_secret and args.no_docker_config:
        raise UsageError("--create-pull-secret creates the docker config Secret that --no-docker-config leaves out")
    from ocibridge.stores.registry.pull_secret import CREDENTIALS_WARNING, loopback_warnings, pull_secret

    secret = None
    if args.create_pull_secret:
        secret = pull_secret(docker_secret_name(opts), registry_hosts(job), namespace=opts.namespace,
                             every_host=False)
    objects = k8s_objects(job, path, text, opts, secret)
    for line in loopback_warnings(registry_hosts(job)):
        print(line, file=sys.stderr)
    if secret is not None:
        print(CREDENTIALS_WARNING, file=sys.stderr)
    if args.json:
        print(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}, indent=2))
    else:
        sys.stdout.write(f"# {opts.name}: {opts.shards} shards of {path.name}, each running --shard "
                         "$JOB_COMPLETION_INDEX/N; needs Kubernetes >= 1.29 (backoffLimitPerIndex)\n")
        sys.stdout.write(dump_all(objects))  # control characters are escaped in quoted scalars
    return 0
