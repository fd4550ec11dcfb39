"""The ``ocibridge mirror JOB [--dry-run] [--json]`` command body, shared by the CLI and
``python -m ocibridge.mirror``."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import TextIO

from ocibridge.core.terminal import one_line, printable
from ocibridge.errors import OcibridgeError
from ocibridge.mirror import load_job, run_job
from ocibridge.mirror.shard import parse_shard
from ocibridge.mirror.summary import ArtifactResult


def mirror_command(job_path: str, *, dry_run: bool = False, as_json: bool = False,
                   out: TextIO | None = None, err: TextIO | None = None, shard: str | None = None) -> int:
    """Run the job (or one ``I/N`` shard of it), print the summary (text or JSON); 1 when
    anything failed, 2 for a bad shard."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        which = parse_shard(shard) if shard is not None else None
    except OcibridgeError as e:
        print(one_line(f"ocibridge: error: {e}"), file=err)
        return 2
    try:
        job = load_job(job_path)
    except OcibridgeError as e:
        print(one_line(f"ocibridge: {e}"), file=err)
        return 1
    live = None if as_json or not err.isatty() else live_reporter(err)
    summary = run_job(job, dry_run=dry_run, progress=live, shard=which)
    if as_json:
        print(json.dumps(summary.as_dict(), indent=2), file=out)
    else:
        print(printable(summary.format_text()), file=out)
    return summary.exit_code


def live_reporter(err: TextIO) -> Callable[[str, ArtifactResult], None]:
    """One line per finished artifact, so a long job on a terminal is not silent until its summary."""

    def report(event: str, result: ArtifactResult) -> None:
        if event in ("copied", "failed"):
            print(one_line(f"{event}: {result.source}"), file=err, flush=True)

    return report
