"""What every command module of the CLI shares: how a group adds its commands
(:class:`CommandAdder`), the registry-access flags and the options they make, --annotation
values, --json/text output and the exit codes. The group modules and parser.py import it; it
imports none of them, so the CLI has no import cycle."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from ocibridge.cli.args import given, key_values
from ocibridge.cli.transfer_flags import add_ranged_flags, add_upload_flags, ranged_options, upload_options
from ocibridge.core.lazyimport import LazyModule
from ocibridge.core.terminal import human_size, one_line, printable
from ocibridge.errors import OcibridgeError, UsageError

if TYPE_CHECKING:
    from ocibridge.api import options as api_options
    from ocibridge.api.copy import CopyStats
else:  # loaded on first use: --help and --version need neither pydantic nor httpx
    api_options = LazyModule("ocibridge.api.options")

EXIT_FAILURE = 1
EXIT_USAGE = 2

Command = Callable[[argparse.Namespace], int]


class CommandAdder(Protocol):
    """What parser.py gives each group module's ``register``: it adds one command (its parser,
    its ``func`` and ``--json``) and returns the parser for the group to add its arguments to.
    The summary and aliases come from the table (cli/commandtable.py), not from the group. A command
    that is not the one being run gets a parser that drops them (nothing is built), so a group
    may add its arguments unconditionally. ``group=True`` adds a command that only holds
    subcommands (``k8s``): no ``func``, no ``--json``, no description."""

    def __call__(self, name: str, func: Command | None, *, group: bool = False) -> argparse.ArgumentParser: ...


def add_transfer_flags(p: argparse.ArgumentParser, *, uploads: bool = True) -> None:
    """The flags of every command that reaches a registry; ``uploads``: and sends blobs there
    (``pull`` fetches: its help offers no upload flag; into a store it uploads as copy does)."""
    g = p.add_argument_group("registry access")
    g.add_argument("--concurrency", type=int, default=4, help="blobs in flight at once (default 4)")
    g.add_argument("--plain-http", action="store_true", help="use HTTP instead of HTTPS")
    g.add_argument("--insecure", action="store_true", help="skip TLS certificate verification")
    g.add_argument("--ca-file", help="CA bundle for the registry's TLS certificate")
    g.add_argument("-u", "--username", help="registry user name")
    g.add_argument("-p", "--password", help="registry password or token")
    g.add_argument("--password-stdin", action="store_true", help="read the password from stdin")
    if uploads:
        add_upload_flags(g)
    g.add_argument("--authfile", "--registry-config", metavar="FILE",
                   help="credentials file (Docker or containers auth.json format), read before the others")
    add_ranged_flags(g)


def ref_command(command: CommandAdder, name: str, func: Command) -> argparse.ArgumentParser:
    """A command whose one positional is REF, what it acts on (a registry reference, an ``oci:DIR``
    one or a local ``NAME[:TAG]``): its parser, for the group to add its own flags, then the registry flags."""
    p = command(name, func)
    p.add_argument("ref", metavar="REF")
    return p


def add_signing_key(p: argparse.ArgumentParser, key_help: str) -> argparse.ArgumentParser:
    """REF and the private key of a command that signs (sign, attest)."""
    p.add_argument("ref", metavar="REF")
    p.add_argument("--key", required=True, metavar="KEY", help=key_help)
    return p


def add_signed_name(p: argparse.ArgumentParser, identity_help: str) -> None:
    """The repository a signing command names (``--identity``), then the registry flags."""
    p.add_argument("--identity", type=given, metavar="REPOSITORY", help=identity_help)
    add_transfer_flags(p)


def transfer_options(args: argparse.Namespace) -> api_options.TransferOptions:
    password = args.password
    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    if args.concurrency < 1:
        raise UsageError("--concurrency must be at least 1")
    upload = upload_options(args)
    if args.ca_file:
        check_ca_file(args.ca_file)
    return api_options.TransferOptions(
        concurrency=args.concurrency,
        plain_http=args.plain_http,
        insecure=args.insecure,
        ca_file=args.ca_file,
        username=args.username,
        password=password,
        authfile=args.authfile,
        **upload,
        **ranged_options(args),
    )


def check_ca_file(path: str) -> None:
    """Fail early, naming the flag and the file, rather than with a bare OpenSSL message."""
    import ssl

    try:
        ssl.create_default_context(cafile=path)
    except ssl.SSLError:  # an OSError too: test it first
        raise OcibridgeError(f"--ca-file {path}: no PEM certificate in it") from None
    except OSError as e:
        raise OcibridgeError(f"--ca-file {path}: {e.strerror or e}") from None


def annotation_values(items: list[str]) -> dict[str, str]:
    return key_values(items, "--annotation")


def emit(args: argparse.Namespace, data: Any, text: str) -> None:
    if args.json:
        print(json.dumps(data, indent=2, sort_keys=True))
    else:
        print(printable(text))


def warn(lines: Iterable[str]) -> None:
    """Warnings an API result carries, on stderr as every line of ocibridge's own there:
    ``ocibridge: warning: …`` (a line that names ocibridge already is left as it is)."""
    for line in lines:
        print(one_line(line if line.startswith("ocibridge:") else f"ocibridge: {line}"), file=sys.stderr)


def image_name(text: str) -> str:
    """An ``--image`` value as a container runtime reads it (Docker's rules: ``NAME[:TAG][@DIGEST]``):
    a misspelt one is a usage line here, not a document the cluster refuses later."""
    from ocibridge.api.imagenames import image_name_problem

    problem = image_name_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return text


def add_workload_flags(p: Any, *, extra: str, name: str, named: str, namespace_help: str) -> None:
    """``--image``, ``--name`` and ``--namespace`` of every command that prints a workload running
    ocibridge itself (``extra``: the image's pip extra, such as ``[serve]``; ``named``: what ``--name`` names)."""
    p.add_argument("--image", metavar="IMAGE", type=image_name, help=f"image with ocibridge{extra} as its entrypoint "
                   "(default ocibridge:VERSION; see Containerfile)")
    p.add_argument("--name", default=name, help=f"{named} (default {name})")
    p.add_argument("--namespace", help=namespace_help)


def add_pull_secret_flags(p: Any, *, pulls: str, creates: str) -> None:
    """``--image-pull-secret`` and ``--create-pull-secret`` of every command that prints
    Kubernetes documents (``pulls``: what the Secret pulls; ``creates``: whose login it holds)."""
    p.add_argument("--image-pull-secret", action="append", default=[], metavar="NAME",
                   help=f"a Secret of type kubernetes.io/dockerconfigjson to pull {pulls} with "
                        "(imagePullSecrets; repeatable)")
    p.add_argument("--create-pull-secret", action="store_true",
                   help=f"also print that Secret, built from your stored credentials for {creates} "
                        "(the output then holds them)")


def add_file_glob_flags(p: Any, include_note: str, *, exclude_dest: str = "exclude") -> None:
    """``--include`` and ``--exclude``: which of a model's files a command lays out (pull into a
    directory, path and snapshot), by glob (``include_note``: what else an include does there)."""
    p.add_argument("--include", action="append", default=[], metavar="GLOB",
                   help=f"only files matching GLOB (repeatable; {include_note})")
    p.add_argument("--exclude", dest=exclude_dest, action="append", default=[], metavar="GLOB",
                   help="leave out files matching GLOB (repeatable)")


def plural(n: int, word: str, words: str | None = None) -> str:
    """``1 blob``, ``2 blobs`` (``words``: a plural not made with an s)."""
    return f"{n} {word if n == 1 else words or word + 's'}"


def counts(s: CopyStats, verb: str) -> str:
    """What a copy did, in one line (push, pull, copy and convert print it)."""
    if not (s.blobs_copied or s.blobs_mounted or s.manifests_copied):
        return "already there: nothing to send"
    return (f"{plural(s.blobs_copied, 'blob')} {verb} ({human_size(s.bytes_copied)} of layers and config), "
            f"{s.blobs_skipped} already present, {s.blobs_mounted} mounted")
