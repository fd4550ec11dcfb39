"""``ocibridge check-registry HOST[/REPO]``: what the registry supports, as text or ``--json``."""

from __future__ import annotations

import argparse

from ocibridge.cli.common import CommandAdder, add_transfer_flags, emit, transfer_options
from ocibridge.core.terminal import human_size, one_line

LABELS = (("chunkedUploads", "chunked (PATCH) uploads"), ("monolithicUploads", "single-PUT uploads"),
          ("mount", "cross-repository mount"), ("referrersApi", "OCI 1.1 referrers API"),
          ("oci11Artifacts", "OCI 1.1 artifact manifests"))


def cmd_check_registry(args: argparse.Namespace) -> int:
    from ocibridge.api.registry_check import check_registry

    report = check_registry(args.target, transfer=transfer_options(args)).as_dict()
    lines = [f"registry {report['host']}" + (f" (repository {report['repository']})" if report["repository"] else "")]
    for key, label in LABELS:
        value = report[key]
        lines.append(f"  {label}: {'yes' if value else 'unknown' if value is None else 'no'}")
    if report["maxBody"]:
        lines.append(f"  largest request body known to pass: {human_size(report['maxBody'])}")
    if report["rangeEnd"]:
        style = "0-N for N bytes held" if report["rangeEnd"] == "exclusive" else "0-(N-1) for N bytes held"
        lines.append(f"  upload Range answers: {style} ({report['rangeEnd']} end)")
    lines += [f"  note: {n}" for n in report["notes"]]
    emit(args, report, "\n".join(one_line(line) for line in lines))
    return 0


def register(command: CommandAdder) -> None:
    p = command("check-registry", cmd_check_registry)
    p.add_argument("target", metavar="HOST[/REPO]",
                   help="with a repository, small blobs and an artifact manifest are tried there (push rights)")
    add_transfer_flags(p)
