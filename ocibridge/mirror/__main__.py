"""``python -m ocibridge.mirror JOB [--dry-run] [--json] [--shard I/N]``: a run of a mirror job by
the engine alone, for an image that wants no more than it. ``ocibridge mirror`` (the CLI, through
:mod:`ocibridge.api.mirror`) is the full command; this entry stays inside the mirror package so
that no arrow runs from it back up to the CLI."""

from __future__ import annotations

import argparse
import json
import sys

from ocibridge.core.terminal import one_line, printable
from ocibridge.errors import OcibridgeError
from ocibridge.mirror.job import load_job
from ocibridge.mirror.report import MirrorReport
from ocibridge.mirror.run import run_job
from ocibridge.mirror.shard import parse_shard


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ocibridge.mirror", description="Run a mirror job.")
    parser.add_argument("job", help="the job file (TOML, or YAML with PyYAML)")
    parser.add_argument("--dry-run", action="store_true", help="plan only; change nothing")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--shard", metavar="I/N", help="run only shard I of N (0-based)")
    args = parser.parse_args(argv)
    try:
        shard = parse_shard(args.shard) if args.shard is not None else None
    except OcibridgeError as e:
        print(one_line(f"ocibridge: error: {e}"), file=sys.stderr)
        return 2
    try:
        report = MirrorReport.of(run_job(load_job(args.job), dry_run=args.dry_run, shard=shard))
    except OcibridgeError as e:  # the job file: a run itself never raises for an artifact
        print(one_line(f"ocibridge: {e}"), file=sys.stderr)
        return 1
    print(json.dumps(report.as_dict(), indent=2) if args.json else printable(report.format_text()))
    return report.exit_code


if __name__ == "__main__":
    sys.exit(main())
