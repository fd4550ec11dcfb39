"""The ``scan`` command: parse, one call of :mod:`ocibridge.api.scan_ops`, print the findings;
exit 1 when the verdict is flagged (docs/scanning.md)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ocibridge.cli.args import given
from ocibridge.cli.common import EXIT_FAILURE, CommandAdder, add_transfer_flags, emit, transfer_options
from ocibridge.core.lazyimport import LazyModule
from ocibridge.errors import UsageError

if TYPE_CHECKING:
    from ocibridge.api import scan_ops as api
    from ocibridge.api.scan_ops import ScanReport
else:  # loaded when the command runs: --help needs none of it
    api = LazyModule("ocibridge.api.scan_ops")


def cmd_scan(args: argparse.Namespace) -> int:
    if (args.ref is None) == (args.rescan is None):
        raise UsageError("scan takes REF or --rescan PREFIX (one of them)")
    if args.rescan is not None:
        if args.no_attach:
            raise UsageError("--rescan attaches a new report to each model; --no-attach is for one REF")
        rescanned = api.rescan(args.rescan, key=args.key, identity=args.identity, transfer=transfer_options(args),
                               every=args.all)
        lines = [_rescan_line(r) for r in rescanned.results] or [f"{args.rescan}: no tagged model"]
        emit(args, rescanned.as_dict(), "\n".join(lines))
        return EXIT_FAILURE if rescanned.flagged else 0
    if args.release:
        if args.key is None or args.no_attach or args.path:
            raise UsageError("--release attaches a signed report: it takes REF and --key, not --path or --no-attach")
        released = api.release_scan(args.ref, key=args.key, identity=args.identity, transfer=transfer_options(args))
        emit(args, released.as_dict(), f"{released.reference} ({released.digest}): released: {released.attached}")
        return 0
    if args.path:
        report = api.scan_path(args.ref)
        emit(args, report.as_dict(), "\n".join(report_lines(args.ref, report)))
        return EXIT_FAILURE if report.flagged else 0
    result = api.scan(args.ref, key=args.key, identity=args.identity, attach=not args.no_attach,
                      transfer=transfer_options(args))
    lines = report_lines(f"{result.reference} ({result.digest})", result.report)
    if result.attached:
        lines.append(f"report attached: {result.attached} ({'signed' if result.signed else 'unsigned'})")
    emit(args, result.as_dict(), "\n".join(lines))
    return EXIT_FAILURE if result.flagged else 0


def report_lines(what: str, report: ScanReport) -> list[str]:
    """The verdict line, then each finding (info left to --json)."""
    shown = [f for f in report.findings if f.severity != "info"]
    lines = [f"{what}: {report.verdict} ({len(report.files)} files, scanner {report.scanner.describe()})"]
    return lines + [f"  {f.line()}" for f in shown]


def _rescan_line(result: api.ScanResult) -> str:
    how = "already scanned by this version" if result.skipped else \
        f"report {result.attached} ({'signed' if result.signed else 'unsigned'})"
    first = f": {result.report.flagged[0].line()}" if result.report.flagged else ""
    return f"{result.reference} ({result.digest}): {result.report.verdict}{first} [{how}]"


def register(command: CommandAdder) -> None:
    """Add ``scan``."""
    p = command("scan", cmd_scan)
    p.add_argument("ref", metavar="REF", nargs="?",
                   help="the model to scan (a registry reference, oci:DIR[:TAG], a local NAME[:TAG])")
    p.add_argument("--rescan", metavar="PREFIX",
                   help="scan again every model under REGISTRY/PREFIX (or oci:DIR) whose newest report is not "
                        "by this scanner version, and attach the new report")
    p.add_argument("--all", action="store_true", help="with --rescan: every model, this version's reports too")
    p.add_argument("--path", action="store_true",
                   help="REF is a directory or file on disk: scan it, attach nothing (what push --scan checks)")
    p.add_argument("--key", metavar="KEY",
                   help="sign the report with this ECDSA P-256 private key, as sign takes it (password in "
                        "$COSIGN_PASSWORD); without it the report is attached unsigned, which no policy counts")
    p.add_argument("--identity", type=given, metavar="REPOSITORY",
                   help="repository name the signed report's subject names (default: where REF is)")
    p.add_argument("--no-attach", action="store_true", help="print the findings, attach no report")
    p.add_argument("--release", action="store_true",
                   help="release REF from serve --scan quarantine: its newest flagged report attached again, "
                        "verdict released, signed with --key")
    add_transfer_flags(p, uploads=False)
