"""``serve``: the Hugging Face Hub's API (reads, and publishing with write tokens) over
registries, layouts and the local store (docs/serve.md). Starlette and uvicorn are loaded only
when it runs (``ocibridge[serve]``)."""

from __future__ import annotations

import argparse
import dataclasses
import os
from typing import TYPE_CHECKING

from ocibridge.cli.common import CommandAdder, add_transfer_flags, emit, transfer_options
from ocibridge.cli.evidence_flags import add_evidence_flags, attest_options
from ocibridge.cli.signing import add_verify_flags, policy_from_args
from ocibridge.cli.upstream_flags import add_default_tag_flag, add_upstream_policy_flags, upstream_policy
from ocibridge.core.lazyimport import LazyModule
from ocibridge.errors import UsageError

if TYPE_CHECKING:
    from ocibridge.api import options as api_options
    from ocibridge.api import serve as api_serve
    from ocibridge.api import signing as signing_api
else:  # loaded when the command runs: --help loads none of serve
    api_serve = LazyModule("ocibridge.api.serve")
    api_options = LazyModule("ocibridge.api.options")
    signing_api = LazyModule("ocibridge.api.signing")


def cmd_serve(args: argparse.Namespace) -> int:
    transfer = transfer_options(args)
    if args.upstream_keep_dry_run:
        return _keep_dry_run(args, _keep(args), transfer)
    options = serve_options(args)
    listen = api_serve.ListenOptions(args.listen, cert=args.cert, key=args.key, access_log=not args.no_access_log)
    # its models are checked as pull checks them: the containers policy file that applies
    # (--policy, else the one found; read at start) and the --verify-key keys (docs/serve.md)
    api_serve.serve(args.sources, listen=listen, options=options, transfer=transfer,
                    verify=policy_from_args(args), sign=_sign_options(args), attest=_attest_options(args))
    return 0


def serve_options(args: argparse.Namespace) -> api_serve.ServeOptions:
    """serve's options from its parsed line, each value read as serve reads it (``k8s serve``
    checks the values it passes to the pods with it)."""
    tokens = tuple(api_serve.read_tokens(args.token_file)) if args.token_file else ()
    budget = _size(args, "staging_budget", api_serve.ServeOptions.staging_budget)
    return api_serve.ServeOptions(default_tag=args.default_tag, tokens=tokens, token_file=args.token_file,
                                  audit_log=args.audit_log, scan=args.scan,
                                  scan_verify_keys=tuple(args.scan_verify_key or ()), metrics=not args.no_metrics,
                                  xet_min_size=_xet_min(args),
                                  public_url=args.public_url, send_timeout=args.send_timeout,
                                  staging_budget=budget, staging_expiry=args.staging_expiry,
                                  lfs_multipart_min=_multipart_min(args),
                                  lfs_part_size=_size(args, "lfs_part_size", api_serve.ServeOptions.lfs_part_size),
                                  writer=args.writer, trust_forwarded=_trusted(args),
                                  peers=tuple(args.peer or ()),
                                  compare_budget=_size(args, "compare_budget",
                                                       api_serve.ServeOptions.compare_budget),
                                  upstream=args.upstream, upstream_token_file=args.upstream_token_file,
                                  upstream_fresh=args.upstream_fresh, quotas=args.quotas,
                                  upstream_max_size=None if args.upstream_max_size is None
                                  else _size(args, "upstream_max_size", 0),
                                  upstream_quota_namespace=args.upstream_quota_namespace,
                                  upstream_asks_per_client=args.upstream_asks_per_client,
                                  **upstream_policy(args))


def _keep(args: argparse.Namespace) -> float:
    """``--upstream-keep``'s lifetime in seconds, which ``--upstream-keep-dry-run`` needs."""
    from ocibridge.api.durations import parse_duration

    if args.upstream_keep is None:
        raise UsageError("--upstream-keep-dry-run goes with --upstream-keep DURATION")
    return parse_duration(args.upstream_keep, "--upstream-keep")


def _keep_dry_run(args: argparse.Namespace, keep: float, transfer: api_options.TransferOptions) -> int:
    """What --upstream-keep would drop from the first SOURCE now, and the bytes; nothing served or written."""
    report = api_serve.sweep_upstream(args.sources[0], keep, dry_run=True, transfer=transfer)
    as_json = {"dryRun": True, "keepSeconds": keep, "bytes": report.freed, "skipped": report.skipped,
               "revisions": [{"repository": d.repo_id, "commit": d.commit, "digest": d.digest, "drop": d.drop,
                              "why": d.why, "tags": list(d.tags), "bytes": d.freed} for d in report.decisions]}
    emit(args, as_json, "\n".join(report.lines()))
    return 0


def cmd_serve_usage(args: argparse.Namespace) -> int:
    from ocibridge.core.terminal import human_size

    rows = api_serve.serve_usage(args.source, quotas=args.quotas, transfer=transfer_options(args),
                                 upstream_quota_namespace=args.upstream_quota_namespace)
    lines = [("NAMESPACE", "USED", "LIMIT", "REPOS", "LIMIT")]
    lines += [(r.namespace, human_size(r.bytes), "-" if r.bytes_limit is None else human_size(r.bytes_limit),
               str(r.repos), "-" if r.repos_limit is None else str(r.repos_limit)) for r in rows]
    widths = [max(len(line[i]) for line in lines) for i in range(5)]
    shown = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() for line in lines]
    emit(args, [r.as_dict() for r in rows], "\n".join(shown))
    return 0


def _sign_options(args: argparse.Namespace) -> api_options.SignOptions | None:
    """``--sign-key``: every commit published is signed (its password: $COSIGN_PASSWORD)."""
    if args.sign_key is None:
        if args.sign_form is not None:
            raise UsageError("--sign-form goes with --sign-key")
        return None
    return api_options.SignOptions(key=args.sign_key, forms=(args.sign_form or "both",))


def _attest_options(args: argparse.Namespace) -> api_options.AttestOptions | None:
    """``--sbom``/``--provenance`` of every commit, signed with --attest-key, else --sign-key."""
    attest = attest_options(args, "serve")
    if attest is not None and attest.key is None and args.sign_key is not None:  # and the signing key's password
        attest = dataclasses.replace(attest, key=args.sign_key, password=os.environ.get(signing_api.PASSWORD_ENV, ""))
    return attest


def register(command: CommandAdder) -> None:
    """Add ``serve`` and ``serve-usage``."""
    p = command("serve", cmd_serve)
    p.add_argument("sources", nargs="+", metavar="SOURCE",
                   help="a registry prefix (host/path: repo ORG/NAME is host/path/org/name), oci:DIR "
                        "(models named ORG/NAME:TAG) or local (the local store); searched in order")
    p.add_argument("--listen", default="127.0.0.1:8080", metavar="HOST:PORT",
                   help="address to listen on (default 127.0.0.1:8080; :PORT for every address)")
    add_default_tag_flag(p)
    add_verify_flags(p, "serve only models signed by this key; others are refused with the reason (repeatable)")
    p.add_argument("--token-file", metavar="FILE",
                   help="tokens, one a line ('TOKEN [read|write] [REPO-PREFIX] [NAME]': a bare token reads "
                        "everything; a prefix (acme/) confines a token to those repositories; write ones publish): "
                        "clients must send 'Authorization: Bearer TOKEN' (HF_TOKEN); read again when it changes")
    p.add_argument("--quotas", metavar="FILE",
                   help="bytes and repositories per namespace, and what the proxy's clients may have it fetch "
                        "(TOML: docs/quotas.md); a write past a quota is refused with the Hub's 403; read again "
                        "when it changes")
    p.add_argument("--audit-log", metavar="FILE",
                   help="append each write (landed or refused) as one JSON line to FILE ('-': stdout)")
    p.add_argument("--no-metrics", action="store_true",
                   help="do not answer GET /metrics (Prometheus' text format; open on the listen address)")
    p.add_argument("--cert", metavar="PEM", help="TLS certificate (with --key): serve HTTPS")
    p.add_argument("--key", metavar="PEM", help="TLS private key")
    p.add_argument("--no-access-log", action="store_true", help="do not log each request")
    p.add_argument("--xet-min-size", metavar="SIZE",
                   help="offer files from this size over Xet, which huggingface_hub downloads in parallel "
                        "with hf_xet (default 8M; 'off': plain downloads only)")
    p.add_argument("--public-url", metavar="URL",
                   help="the URL clients reach serve at, for the Xet URLs it hands out (behind a proxy "
                        "that terminates TLS; default: the address each request came to)")
    p.add_argument("--send-timeout", type=float, default=30.0, metavar="SECONDS",
                   help="seconds one write of an answer may take: a client that reads slower is "
                        "disconnected (default 30)")
    p.add_argument("--staging-budget", metavar="SIZE",
                   help="bytes uploads not yet committed may take in serve's cache; an upload past it is "
                        "refused with 507 (default 256G)")
    p.add_argument("--staging-expiry", type=float, default=3600.0, metavar="SECONDS",
                   help="an upload no commit names within this many seconds is removed (default 3600)")
    p.add_argument("--lfs-multipart-min", metavar="SIZE",
                   help="LFS uploads (HF_HUB_DISABLE_XET=1) of files from this size come in parts, each "
                        "resent alone when it fails (default 5G; 'off': one PUT each)")
    p.add_argument("--lfs-part-size", metavar="SIZE", help="the size of those parts (default 512M)")
    p.add_argument("--compare-budget", metavar="SIZE",
                   help="what one compare page may read from registries to compare configs and tensors; "
                        "past it the page names the ocibridge diff that compares the rest (default 64M)")
    g = p.add_argument_group("replicas (docs/serve.md, One writer, many readers)")
    g.add_argument("--writer", metavar="URL",
                   help="send every write (uploads, commits, branches, tags, new repositories) to the serve at "
                        "URL, and answer reads here: several serves over one registry act as one")
    g.add_argument("--peer", action="append", metavar="URL",
                   help="another serve with write tokens over the same SOURCE (repeatable): while it holds the "
                        "writer lease, writes asked here are sent to it instead of refused with 503")
    g.add_argument("--trust-forwarded", action="append", metavar="CIDR",
                   help="believe X-Forwarded-Host/-Proto (sent by a --writer reader) from these peers "
                        "(repeatable; default loopback only)")
    g = p.add_argument_group("a proxy of an upstream Hub (docs/serve.md, A proxy of an upstream Hub)")
    g.add_argument("--upstream", metavar="URL",
                   help="a Hub API (https://huggingface.co, a mirror, another serve): a repository or revision the "
                        "first SOURCE lacks is fetched from it once, written there as push hf: makes it, and served")
    g.add_argument("--upstream-token-file", metavar="FILE",
                   help="the token sent to the upstream (its first line; default: the environment variable "
                        "docs/serve.md names for it); a client's token is never sent")
    g.add_argument("--upstream-fresh", type=float, metavar="SECONDS",
                   help="re-check a branch's head at the upstream at most every SECONDS (default 300; 0: never)")
    g.add_argument("--upstream-keep-dry-run", action="store_true",
                   help="print what --upstream-keep would drop from the first SOURCE now, and the bytes, and exit")
    add_upstream_policy_flags(g)
    g.add_argument("--upstream-max-size", metavar="SIZE",
                   help="refuse an ingest whose files take more than SIZE (the upstream's listing says, before a "
                        "file is fetched), with the Hub's 403")
    g.add_argument("--upstream-quota-namespace", metavar="NAME",
                   help="count what the proxy fetches against the --quotas of namespace NAME")
    g.add_argument("--upstream-asks-per-client", metavar="N/PERIOD",
                   help="asks of the upstream one client's misses may cost (its token, else its address; e.g. "
                        "60/min, 5/s, 1000/h; 'off': no bound); past them the Hub's 429 with Retry-After, the "
                        "upstream not asked (default 60/min)")
    g = p.add_argument_group("evidence on publish (docs/serve.md, Publishing)")
    g.add_argument("--scan", choices=("refuse", "quarantine", "off"), default="off",
                   help="scan every commit's files by content before its branch's tag moves (docs/scanning.md) and "
                        "refuse one with a flagged file, the Hub's 400 naming file, finding and scanner, or "
                        "quarantine it: stored, read by its owners only until a clean scan releases it (needs "
                        "pip install 'ocibridge[scan]'; default off)")
    g.add_argument("--scan-verify-key", action="append", metavar="PUB",
                   help="with --scan quarantine: a scan report signed by this public key may release a model "
                        "(repeatable; --sign-key's own reports count too); unsigned or other keys' reports decide "
                        "nothing")
    g.add_argument("--sign-key", metavar="KEY",
                   help="sign every commit published, before its branch's tag moves (ECDSA P-256 PEM or a "
                        "cosign key file; its password in $COSIGN_PASSWORD): a commit that cannot be signed is refused")
    g.add_argument("--sign-form", choices=("classic", "bundle", "both"), default=None,
                   help="the signature's form: classic (.sig tag), bundle (OCI 1.1 referrer) or both (default)")
    add_evidence_flags(p, "commit")
    add_transfer_flags(p)
    u = command("serve-usage", cmd_serve_usage)
    u.add_argument("source", metavar="SOURCE", help="serve's first SOURCE: the registry prefix it writes to")
    u.add_argument("--quotas", metavar="FILE", help="serve's --quotas file: each namespace's limits shown beside it")
    u.add_argument("--upstream-quota-namespace", metavar="NAME",
                   help="what serve --upstream fetched counted against NAME, as serve counts it")
    add_transfer_flags(u)


def _trusted(args: argparse.Namespace) -> tuple[str, ...]:
    return tuple(args.trust_forwarded or api_serve.ServeOptions.trust_forwarded)


def _multipart_min(args: argparse.Namespace) -> int | None:
    from ocibridge.api.k8s_serve_values import size_or_off

    return size_or_off("--lfs-multipart-min", args.lfs_multipart_min, api_serve.ServeOptions.lfs_multipart_min)


def _size(args: argparse.Namespace, name: str, default: int) -> int:
    """A ``SIZE`` flag (``500K``, ``20M``, ``1G``), or its default (read as ``k8s serve`` reads the pods')."""
    from ocibridge.api.k8s_serve_values import size

    return size(f"--{name.replace('_', '-')}", getattr(args, name), default)


def _xet_min(args: argparse.Namespace) -> int | None:
    from ocibridge.api.k8s_serve_values import size_or_off

    return size_or_off("--xet-min-size", args.xet_min_size, api_serve.XET_MIN_SIZE)
