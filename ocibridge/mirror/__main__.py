"""``python -m ocibridge.mirror JOB [--dry-run] [--json] [--shard I/N]``: the run of
``ocibridge mirror`` (ocibridge/cli/mirror.py), with only these flags."""

from __future__ import annotations

import argparse
import sys

from ocibridge.cli.mirror import mirror_command


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ocibridge mirror", description="Run a mirror job.")
    parser.add_argument("job", help="the job file (TOML, or YAML with PyYAML)")
    parser.add_argument("--dry-run", action="store_true", help="plan only; change nothing")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--shard", metavar="I/N", help="run only shard I of N (0-based)")
    args = parser.parse_args(argv)
    return mirror_command(args.job, dry_run=args.dry_run, as_json=args.json, shard=args.shard)


if __name__ == "__main__":
    sys.exit(main())
