"""The ``ocibridge`` command's entry points: :func:`main` parses and runs one command line,
:func:`_run` turns the errors ocibridge knows into one line and an exit code, :func:`run` is the
console script (start-up garbage collection tuned, an interrupt's exit kept).

Errors are one line on stderr with a non-zero exit; ``--json`` prints a machine-readable
summary on stdout; progress bars appear only on a terminal.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import gc
import os
import sys
import traceback
from typing import NoReturn, TextIO

from ocibridge.cli.common import EXIT_FAILURE, EXIT_USAGE
from ocibridge.cli.parser import build_parser
from ocibridge.core import interrupt, notices
from ocibridge.core.httpx_defer import defer_httpx_extras
from ocibridge.core.terminal import one_line
from ocibridge.errors import InvalidReference, OcibridgeError, RegistryError, UsageError, os_error_text

EXIT_INTERRUPTED = interrupt.EXIT_INTERRUPTED


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = DEBUG_FLAG in argv[: argv.index("--")] if "--" in argv else DEBUG_FLAG in argv
    if debug:
        argv.remove(DEBUG_FLAG)
        from ocibridge.api.session import enable_request_log

        enable_request_log()
    parser = build_parser(lazy=True)  # only the command the line names is imported and built
    args = parser.parse_args(_help_asked(argv))
    args.debug = debug  # taken out of argv above; a command may ask (path answers warm only without it)
    try:
        return _run(args, debug=debug)
    except Exception as e:
        if debug:
            traceback.print_exc()
        print(one_line(f"ocibridge: error: {_unexpected(e)}"), file=sys.stderr)
        return EXIT_FAILURE


DEBUG_FLAG = "--debug"


def _help_asked(argv: list[str]) -> list[str]:
    """``ocibridge help [COMMAND [SUBCOMMAND]]`` as ``ocibridge [COMMAND [SUBCOMMAND]] --help``: how
    git, kubectl, helm and every cobra tool of this field (oras, skopeo, modctl) take it; a word
    after it that is no command gets the usual answer, with the nearest command."""
    if not argv or argv[0] != "help":
        return argv
    return [*argv[1:], "--help"]


def _unexpected(e: BaseException) -> str:
    """One line for an error no handler below expected: a bug or an input nobody foresaw.

    Whatever an archive, an artifact or a server sends, the user sees one line, never a traceback
    (``--debug`` prints the traceback above it).
    """
    if isinstance(e, RecursionError):
        return "input nested too deeply to read (JSON, TOML or a manifest graph)"
    if isinstance(e, MemoryError):
        return "out of memory"
    detail = " ".join(str(e).split())[:300] or "no detail"
    return f"unexpected {type(e).__name__}: {detail} (run with --debug for the traceback)"


def _notice_to_stderr(text: str) -> None:
    """A notice (a resumed upload) as one line on stderr, above a bar that may be drawn: on a
    terminal the bar's line is cleared first (the bar draws itself again below)."""
    clear = "\r\x1b[K" if _isatty(sys.stderr) else ""
    print(clear + one_line(f"ocibridge: {text}"), file=sys.stderr, flush=True)


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (ValueError, OSError):  # closed, or no file behind it
        return False


def _run(args: argparse.Namespace, *, debug: bool = False) -> int:
    """Run the command; the errors ocibridge knows become one line and their exit code
    (``debug``: the traceback above it, as ``--debug``'s help says)."""
    from ocibridge.api.session import closing_opened_stores

    def trace() -> None:
        if debug:
            traceback.print_exc()

    try:
        # every store a command opens is closed when it ends (a command that walks a store after
        # the API call returned, as discover's tree or k8s's documents, holds its own)
        with interrupt.handling_signals(), notices.heard_by(_notice_to_stderr), closing_opened_stores():
            code: int = args.func(args)
            return code
    except RegistryError as e:
        trace()
        hint = ""
        if e.credentials_hint and args.command not in ("login", "logout"):
            hint = f" ({args.command}: {e.credentials_hint})"
        elif e.status == 400 and e.code is None:  # what an HTTPS port answers to plain HTTP
            hint = " (if the registry serves HTTPS, pass --ca-file FILE or --insecure)"
        print(one_line(f"ocibridge: error: {e}{hint}{_local_names_hint(args, e)}"), file=sys.stderr)
        return EXIT_FAILURE
    except (UsageError, InvalidReference) as e:  # a reference typed wrong is a usage mistake too
        trace()
        print(one_line(f"ocibridge: error: {e} (see 'ocibridge {_command_line_name(args)} --help')"), file=sys.stderr)
        return EXIT_USAGE
    except OcibridgeError as e:
        trace()
        print(one_line(f"ocibridge: error: {e}{_local_names_hint(args, e)}"), file=sys.stderr)
        return EXIT_FAILURE
    except BrokenPipeError:
        # `ocibridge inspect … | head`: the reader left, which is no error of ours. Point
        # stdout at /dev/null so the interpreter's final flush does not complain either.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILURE
    except OSError as e:
        trace()
        print(one_line(f"ocibridge: error: {os_error_text(e, _places_written(args, e))}"), file=sys.stderr)
        return EXIT_FAILURE
    except Exception as e:
        # httpx is imported only by what talks to a network (~0.1-0.2 s saved on local work):
        # if it was never imported, this cannot be one of its errors.
        httpx = sys.modules.get("httpx")
        if httpx is None or not isinstance(e, httpx.HTTPError):
            raise
        trace()
        print(one_line(f"ocibridge: error: network: {e}"), file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        print(f"ocibridge: interrupted{_what_was_kept(args.command)}", file=sys.stderr)
        return EXIT_INTERRUPTED


#: commands whose transfer resumes: what an interrupted run leaves for the next one
KEPT_FOR_RESUME = {
    "pull": "the blobs received and the part of the one in flight are kept",
    "copy": "the blobs copied and the part of the one in flight are kept",
    "path": "the blobs received and the part of the one in flight are kept in the model cache",
    "push": "the blobs sent are kept by the registry, the upload in flight for as long as it holds it",
    "mirror": "the artifacts copied are kept, with the blobs of the one in flight",
}


def _command_line_name(args: argparse.Namespace) -> str:
    """The command as typed, its group's subcommand with it (``k8s serve``, ``warm save``): the
    help a usage mistake points at, as the parser's own errors point there."""
    sub = getattr(args, f"{args.command}_command", None)
    return f"{args.command} {sub}" if isinstance(sub, str) else str(args.command)


def _what_was_kept(command: str) -> str:
    """What an interrupted transfer kept and how to go on; nothing for other commands."""
    kept = KEPT_FOR_RESUME.get(command)
    return f": {kept}; run the same command again to resume" if kept else ""


def _places_written(args: argparse.Namespace, error: OSError) -> list[str]:
    """The disks this command writes to, named when a full disk is reported with no file name.
    What it wrote was staged, so nothing at the destination changed."""
    if error.errno not in (errno.ENOSPC, errno.EDQUOT) or error.filename:
        return []
    from ocibridge.api.session import written_places

    return written_places(args.command, vars(args))


def _local_names_hint(args: argparse.Namespace, error: OcibridgeError) -> str:
    """A bare ``NAME[:TAG]`` the local store does not hold was looked for on docker.io (Docker's
    rule): when that failed, the local names nearest to it, the likelier meaning of a typo; and
    that the name was read as Docker Hub's, with the form that names another registry,
    for ``inspect acme/tiny:latest`` meant for the registry the user pushed to."""
    given = vars(args)  # the command's arguments: a source or a reference, by the command
    text = given.get("src") or given.get("ref")
    if args.command == "push" or not isinstance(text, str) or _said_registry(text) != "docker.io" \
            or "docker.io" not in str(error) or text.startswith("docker.io/"):  # push reads a directory first
        return ""
    from ocibridge.api.missing import read_on_docker_hub
    from ocibridge.api.store_ops import nearest_local_names

    try:
        near = nearest_local_names(text)
        read_as = read_on_docker_hub(text)
    except (OcibridgeError, OSError):
        return ""
    registry = (f"read as Docker Hub's {read_as}, having no registry host: a model of another registry is "
                f"REGISTRY/{text}, such as localhost:5000/{text}")
    if near:
        return f" ({text} is not in the local store either; nearest there: {', '.join(near)}; {registry})"
    return f" ({text} was {registry}; the local store has no {text} either (ocibridge ls lists it))"


def _said_registry(text: str) -> str:
    """The registry a model reference names by Docker's rule (docker.io when no host is written)."""
    first, sep, _ = text.partition("/")
    return first if sep and ("." in first or ":" in first or first == "localhost") else "docker.io"


def _freeze_start_up(phase: str, info: dict[str, int]) -> None:
    """The first collection of a command's run (once 20,000 objects more are alive than were
    collected: in the middle of its imports or soon after) freezes instead: what start-up made
    (modules, classes, the parsed command, the stores it opened) lives to the end, and the
    collector found little else to free in it (~500 objects). That pass cost 5-12 ms of a copy
    within a registry (1.8 % of its instructions with the threshold below set before the
    imports, callgrind). The collector works as usual from then on, on what is made later."""
    if phase == "start":
        gc.callbacks.remove(_freeze_start_up)
        gc.freeze()  # before the pass starts: it then has nothing left to walk


def run() -> NoReturn:
    """The console entry point. An interrupted command leaves without interpreter finalization:
    finalization puts the default SIGINT action back, so a second Ctrl-C arriving then killed the
    process by the signal instead of the promised exit 130 (and would wait on worker threads)."""
    # Start-up allocates objects by the ten thousand (imports) and frees few: collecting every
    # 700 allocations walked them ~50 times for nothing (13 ms of a copy, 6 ms at 20,000).
    gc.set_threshold(20_000, 10, 10)
    gc.callbacks.append(_freeze_start_up)
    defer_httpx_extras(for_command=True)
    code = main()
    if code == EXIT_INTERRUPTED:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(code)
    # The command is done: what exists now need not be searched for reference cycles at exit.
    # Finalization then takes ~7 ms instead of ~30 (the collector's last pass over every
    # object of ~400 modules); atexit handlers, thread joins and flushes still run.
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    run()
