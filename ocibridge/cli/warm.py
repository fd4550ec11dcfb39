"""The ``warm`` command: ``warm save`` attaches a compile cache to a model, ``warm ls`` lists
those attached, ``warm load`` restores the one whose key is this process's (ocibridge/warm/)."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ocibridge.cli.args import given, key_values
from ocibridge.cli.common import Command, CommandAdder, add_transfer_flags, emit, transfer_options
from ocibridge.cli.signing import add_verify_flags, policy_from_args
from ocibridge.core.lazyimport import LazyModule
from ocibridge.core.terminal import human_size
from ocibridge.errors import UsageError

if TYPE_CHECKING:
    from ocibridge.api import options as api_options
    from ocibridge.api import warm as api_warm
    from ocibridge.api.warm import WarmKey
else:  # loaded when the command runs: --help needs none of it
    api_warm = LazyModule("ocibridge.api.warm")
    api_options = LazyModule("ocibridge.api.options")


def _options(args: argparse.Namespace) -> dict[str, Any]:
    """The compile options: ``--options FILE`` (a JSON object), then each ``--option KEY=VALUE``."""
    found: dict[str, Any] = {}
    if args.options:
        found.update(api_warm.options_file(args.options))
    found.update(key_values(args.option, "--option"))
    return found


def _keyed(args: argparse.Namespace) -> dict[str, Any]:
    return {"engine": args.engine, "engine_version": args.engine_version, "options": _options(args),
            "device": args.device, "transfer": transfer_options(args)}


def _files(count: int) -> str:
    return "" if not count else "1 file, " if count == 1 else f"{count} files, "


def key_text(key: WarmKey) -> str:
    return " ".join(f"{name.replace('_', '-')}={value}" for name, value in asdict(key).items())


def cmd_warm_save(args: argparse.Namespace) -> int:
    if (args.dir is None) == (args.torch is None):
        raise UsageError("warm save takes a cache directory DIR or --torch FILE (one of them)")
    cache = args.dir
    if args.torch is not None:
        try:
            cache = Path(args.torch).read_bytes()
        except OSError as e:
            raise UsageError(f"--torch {args.torch}: {e.strerror or e}") from None
    sign = None if args.key is None else api_options.SignOptions(key=args.key, identity=args.identity)
    done = api_warm.warm_save(args.ref, cache, sign=sign, **_keyed(args))
    signed = f"signed: {', '.join(done.signed)}" if done.signed else "unsigned"
    files = _files(done.files)
    emit(args, done.as_dict(), f"attached compile cache {done.reference} ({files}{human_size(done.size)}, {signed})\n"
                               f"  to {done.subject}\n  key: {key_text(done.key)}")
    return 0


def cmd_warm_ls(args: argparse.Namespace) -> int:
    listed = api_warm.warm_caches(args.ref, transfer=transfer_options(args))
    lines = [f"{c.digest}  {human_size(c.size)}\n  {key_text(c.key)}" for c in listed.caches]
    emit(args, listed.as_dict(), "\n".join(lines) if lines else f"{listed.reference}: no compile cache attached")
    return 0


def cmd_warm_load(args: argparse.Namespace) -> int:
    if args.dir is not None and args.torch is not None:
        raise UsageError("warm load restores into DIR or writes --torch FILE, not both")
    if args.dir is None and args.torch is None:
        raise UsageError("warm load needs a directory DIR to restore into, or --torch FILE")
    dest = args.dir if args.dir is not None else args.torch
    done = api_warm.warm_load(args.ref, dest, torch=args.torch is not None, verify=policy_from_args(args),
                         allow_unsigned=args.allow_unsigned, **_keyed(args))
    what = _files(done.files)
    checked = "signature verified" if done.checked else "UNSIGNED: not verified"
    emit(args, done.as_dict(), f"restored compile cache {done.digest} into {done.dest} "
                               f"({what}{human_size(done.bytes)}; {checked})")
    return 0


def _key_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("the cache's key (what it is valid for)")
    g.add_argument("--engine", default="torch", help="what compiled it: torch (default), vllm, sglang, ...")
    g.add_argument("--engine-version", metavar="VERSION",
                   help="the engine's version (default: the installed distribution's)")
    g.add_argument("--device", metavar="DEVICE", help="cpu or cuda[:N] (default: the first GPU, else the CPU)")
    g.add_argument("--options", metavar="FILE", help="the compile options, a JSON object (hashed into the key)")
    g.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="one compile option, a string (repeatable; over --options)")


def register(command: CommandAdder) -> None:
    """The ``warm`` group: ``save``, ``ls``, ``load``."""
    warm = command("warm", None, group=True)
    sub = warm.add_subparsers(dest="warm_command", required=True, metavar="WARM_COMMAND")

    def subcommand(name: str, func: Command, help: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = sub.add_parser(name, help=help, description=help)
        p.set_defaults(func=func)
        p.add_argument("--json", action="store_true", help="print a machine-readable summary")
        p.add_argument("ref", metavar="REF", help="the model")
        return p

    p = subcommand("save", cmd_warm_save, "attach a compile cache to a model as a (signed) referrer")
    p.add_argument("dir", metavar="DIR", nargs="?",
                   help="the cache directory (vLLM's torch_compile_cache, a Triton or Inductor cache, "
                        "SGLang's JIT root)")
    p.add_argument("--torch", metavar="FILE", help="torch's portable cache: the bytes torch.compiler."
                   "save_cache_artifacts() returned, in FILE")
    p.add_argument("--key", metavar="KEY", help="sign the cache with this private key (as sign takes it)")
    p.add_argument("--identity", type=given, metavar="REPOSITORY",
                   help="repository name to sign as (default: where REF is)")
    _key_flags(p)
    add_transfer_flags(p)

    p = subcommand("ls", cmd_warm_ls, "list the compile caches attached to a model, with their keys")
    add_transfer_flags(p, uploads=False)

    p = subcommand("load", cmd_warm_load, "restore the compile cache whose key is this process's, once its "
                   "signature verifies")
    p.add_argument("dir", metavar="DIR", nargs="?", help="restore a directory cache into DIR")
    p.add_argument("--torch", metavar="FILE", help="write torch's portable cache bytes to FILE "
                   "(for torch.compiler.load_cache_artifacts)")
    add_verify_flags(p, "accept a cache signed by this public key (repeatable)")
    p.add_argument("--allow-unsigned", action="store_true",
                   help="load a cache nothing verifies (a cache is code that runs: only for a registry you trust)")
    _key_flags(p)
    add_transfer_flags(p, uploads=False)

