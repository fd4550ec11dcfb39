"""``serve``: the Hugging Face Hub's read API over registries, layouts and the local store
(docs/serve.md). Starlette and uvicorn are loaded only when it runs (``ocibridge[serve]``)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ocibridge.cli.common import CommandAdder, add_transfer_flags, transfer_options
from ocibridge.cli.signing import add_policy_flag, policy_from_args
from ocibridge.errors import OcibridgeError, UsageError

if TYPE_CHECKING:
    from ocibridge.signing.containers_policy import UsePolicy
    from ocibridge.signing.verify import VerifyPolicy

EXTRA = "ocibridge serve needs Starlette and uvicorn: pip install 'ocibridge[serve]'"


def needs_extra() -> None:
    """One error line naming the extra when its packages are missing."""
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise OcibridgeError(EXTRA) from None


def cmd_serve(args: argparse.Namespace) -> int:

    needs_extra()
    from ocibridge.serve.server import ServeOptions, parse_listen, parse_public_url, read_tokens, serve
    from ocibridge.serve.sources import Catalog, parse_sources

    parse_listen(args.listen)  # a usage mistake before anything is opened
    transfer = transfer_options(args)
    sources = parse_sources(args.sources, transfer.registry_options())  # each located once, here
    # its models are checked as pull checks them: the containers policy file that applies
    # (--policy, else the one found) and the --verify-key keys (docs/serve.md)
    catalog = Catalog(sources, default_tag=args.default_tag, verify=_policy(args))
    tokens = read_tokens(args.token_file) if args.token_file else ()
    options = ServeOptions(listen=args.listen, cert=args.cert, key=args.key, tokens=tokens,
                           access_log=not args.no_access_log, concurrency=transfer.concurrency,
                           xet_min=_xet_min(args), public_url=parse_public_url(args.public_url))
    serve(catalog, options)
    return 0


def register(command: CommandAdder) -> None:
    """Add ``serve``."""
    p = command("serve", cmd_serve)
    p.add_argument("sources", nargs="+", metavar="SOURCE",
                   help="a registry prefix (host/path: repo ORG/NAME is host/path/org/name), oci:DIR "
                        "(models named ORG/NAME:TAG) or local (the local store); searched in order")
    p.add_argument("--listen", default="127.0.0.1:8080", metavar="HOST:PORT",
                   help="address to listen on (default 127.0.0.1:8080; :PORT for every address)")
    p.add_argument("--default-tag", default="latest", metavar="TAG",
                   help="the tag the revision 'main' names (default latest)")
    p.add_argument("--verify-key", action="append", default=[], metavar="PUB",
                   help="serve only models signed by this key; others are refused with the reason (repeatable)")
    add_policy_flag(p)
    p.add_argument("--token-file", metavar="FILE",
                   help="read tokens, one a line: clients must send 'Authorization: Bearer TOKEN' (HF_TOKEN)")
    p.add_argument("--cert", metavar="PEM", help="TLS certificate (with --key): serve HTTPS")
    p.add_argument("--key", metavar="PEM", help="TLS private key")
    p.add_argument("--no-access-log", action="store_true", help="do not log each request")
    p.add_argument("--xet-min-size", metavar="SIZE",
                   help="offer files from this size over Xet, which huggingface_hub downloads in parallel "
                        "with hf_xet (default 8M; 'off': plain downloads only)")
    p.add_argument("--public-url", metavar="URL",
                   help="the URL clients reach serve at, for the Xet URLs it hands out (behind a proxy "
                        "that terminates TLS; default: the address each request came to)")
    add_transfer_flags(p)


def _xet_min(args: argparse.Namespace) -> int | None:
    from ocibridge.cli.transfer_flags import parse_bytes
    from ocibridge.serve import XET_MIN_SIZE

    if args.xet_min_size is None:
        return XET_MIN_SIZE
    if args.xet_min_size.lower() in ("off", "none", "no"):
        return None
    try:
        return max(1, parse_bytes(args.xet_min_size))
    except ValueError as e:
        raise UsageError(f"--xet-min-size: {e}") from None


def _policy(args: argparse.Namespace) -> VerifyPolicy | UsePolicy | None:
    """The ``--verify-key`` keys and the policy file, which is read now: a broken one is one
    error line at start, not a refusal of every request."""
    from ocibridge.signing.containers_policy import load_policy

    load_policy(args.policy)
    return policy_from_args(args)
