"""The ``ocibridge`` command: parse arguments, call :mod:`ocibridge.api.model_ops`, print.

Errors are one line on stderr with a non-zero exit; ``--json`` prints a machine-readable
summary on stdout; progress bars appear only on a terminal.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from ocibridge.cli.common import add_pull_secret_flags
from ocibridge.cli.common import add_transfer_flags as _add_transfer_flags
from ocibridge.cli.common import annotation_values as _annotations
from ocibridge.cli.common import emit as _emit
from ocibridge.cli.common import transfer_options as _transfer
from ocibridge.cli.convert import add_override_flags, family_choices, overrides_of
from ocibridge.cli.signing import add_signing_commands, add_verify_flags, policy_from_args
from ocibridge.core import interrupt, notices
from ocibridge.core.httpx_wall import defer_cli
from ocibridge.core.lazy import LazyModule, lazy_function
from ocibridge.core.terminal import human_size, one_line, printable
from ocibridge.errors import OcibridgeError, RegistryError, UsageError, ValidationError
from ocibridge.kinds.table import format_choices, source_kinds
from ocibridge.oci.mediatypes import Family, Kind, Variant
from ocibridge.transfer.progress_modes import MODES, choose_progress

if TYPE_CHECKING:
    from ocibridge.api import copy as api_copy
    from ocibridge.api import model_ops as api
    from ocibridge.kinds.targets import StoreTarget
    from ocibridge.transfer.copy import CopyStats
else:  # loaded on first use: --help and --version need neither pydantic nor httpx
    api = LazyModule("ocibridge.api.model_ops")
    api_copy = LazyModule("ocibridge.api.copy")  # copy: without the modules of push and pull
BuildOptions = lazy_function("ocibridge.model.builder", "BuildOptions")
created_now = lazy_function("ocibridge.model.builder", "created_now")
parse_overrides = lazy_function("ocibridge.model.classify", "parse_overrides")
format_inspect = lazy_function("ocibridge.model.inspect", "format_inspect")
exports_quietly = lazy_function("ocibridge.kinds.door", "exports_quietly")

CommandAdder = Callable[..., argparse.ArgumentParser]

EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = interrupt.EXIT_INTERRUPTED


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line (what is wrong, where to look: the help of
    the command it was made in), not the whole usage block, and flags may stand between
    positionals (``push SRC --format carton DEST``, as oras and skopeo accept): plain argparse
    hands DEST to nobody once an optional positional has been passed over."""

    _intermixing = False

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"ocibridge: error: {message} (see '{self.prog} --help')\n")

    def parse_known_args(  # type: ignore[override]  # typeshed overloads it; one signature is enough here
            self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None,
    ) -> tuple[argparse.Namespace, list[str]]:
        has_subcommands = any(a.nargs == argparse.PARSER for a in self._get_positional_actions())
        if has_subcommands or self._intermixing:
            return super().parse_known_args(args, namespace)
        # Python < 3.12 parses intermixed args by calling parse_known_args again: this flag
        # sends those inner calls to argparse's own parsing.
        self._intermixing = True
        try:
            parsed, extras = self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False
        # A command's parser: what it does not know is a mistake in this command. Plain argparse
        # hands the words up to the top-level parser, whose error points at 'ocibridge --help'.
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


class _Unbuilt(_Parser):
    """A command that is not the one being run. Its subparsers action lists it (``--help``,
    "invalid choice") by the name and help given to ``add_parser``; it is never parsed, so its
    arguments are not built: building every command's parser took ~20-40 ms of each start.
    Whatever its builder calls on it is dropped."""

    def __init__(self, **kwargs: Any) -> None:  # no parser state: nothing is parsed with it
        self.prog = kwargs.get("prog") or ""
        self._actions = []

    def add_argument(self, *args: Any, **kwargs: Any) -> Any:
        return None

    def add_argument_group(self, *args: Any, **kwargs: Any) -> Any:
        return self

    def add_mutually_exclusive_group(self, *args: Any, **kwargs: Any) -> Any:
        return self

    def add_subparsers(self, *args: Any, **kwargs: Any) -> Any:
        return self

    def add_parser(self, *args: Any, **kwargs: Any) -> Any:
        return self

    def set_defaults(self, *args: Any, **kwargs: Any) -> None:
        pass

    def parse_known_args(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"{self.prog}: the parser of a command not being run was asked to parse")


def _layer_variants(items: list[str]) -> tuple[dict[Kind, Variant], set[Kind]]:
    variants: dict[Kind, Variant] = {}
    group: set[Kind] = set()
    for item in items:
        kind, sep, variant = item.partition("=")
        try:
            k = Kind(kind)
            v = Variant(variant)
        except ValueError:
            raise UsageError(
                f"--layer expects KIND=VARIANT (kinds: {', '.join(x.value for x in Kind)}; "
                f"variants: {', '.join(x.value for x in Variant)}), got {item!r}"
            ) from None
        if not sep:
            raise UsageError(f"--layer expects KIND=VARIANT, got {item!r}")
        variants[k] = v
    return variants, group


def cmd_push(args: argparse.Namespace) -> int:
    variants, group = _layer_variants(args.layer)
    if args.created not in (None, "now"):
        from ocibridge.model.config import is_rfc3339  # the config's own rule (push loads it anyway)

        if not is_rfc3339(args.created):
            raise UsageError(f"--created {args.created!r}: not an RFC 3339 date-time such as "
                             "2025-01-01T00:00:00Z (or give no value: now)")
    group |= {Kind(k) for k in args.group}
    options = BuildOptions(
        family=Family(args.media_types),
        variants=variants,
        group=group,
        auto_group=not args.no_auto_group,
        created_at=(created_now() if args.created == "now" else args.created) if args.created else None,
        annotations=_annotations(args.annotation),
    )
    try:
        overrides = parse_overrides(args.kind)
    except ValueError as e:
        raise UsageError(str(e)) from None
    oms, excludes = None, tuple(args.exclude)
    if args.signature:  # checked against DIR before a byte is sent; kept out of the model's files
        from ocibridge.signing.omstravel import directory_signature

        oms = directory_signature(Path(args.source), Path(args.signature))
        inside = _relative_inside(Path(args.signature), Path(args.source))
        excludes += (inside,) if inside else ()
    bar = choose_progress(args.progress, "push", quiet=args.quiet, machine_output=args.json)
    try:
        push = api.push
        if args.chunks:
            from ocibridge.api.lazy_ops import push_with_chunks as push
        result = push(
            args.source,
            args.dest,
            build_options=options,
            transfer=_transfer(args),
            format=args.format,
            kind_overrides=overrides,
            excludes=excludes,
            name=args.name,
            progress=bar,
            to=args.to,
            overrides=overrides_of(args),
            build_file=args.file,
            use_build_file=not args.no_build_file,
        )
    finally:
        if bar:
            bar.close()
    text = f"pushed {result.reference}\n  {_counts(result.stats, 'uploaded')}"
    if oms is not None:
        from ocibridge.kinds.targets import open_store_target
        from ocibridge.signing.omstravel import attach_oms

        where = result.reference.rsplit("@", 1)[0]  # the store pushed to (the reference is pinned)
        target = open_store_target(where, for_write=True, options=_transfer(args).registry_options())
        from ocibridge.stores.base import close_store

        try:
            referrer = attach_oms(target.store, result.descriptor, oms)
        finally:
            close_store(target.store)
        result.extra["signature"] = referrer.digest
        text += f"\n  OMS signature attached: {referrer.digest}"
    _emit(args, result.as_dict(), text)
    return 0


def _relative_inside(path: Path, root: Path) -> str | None:
    """``path`` relative to ``root`` when it lies inside it (a signature kept in the model)."""
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return None


def _counts(s: CopyStats, verb: str) -> str:
    if not (s.blobs_copied or s.blobs_mounted or s.manifests_copied):
        return "already there: nothing to send"
    return (f"{s.blobs_copied} blobs {verb} ({human_size(s.bytes_copied)}), "
            f"{s.blobs_skipped} already present, {s.blobs_mounted} mounted")


def cmd_pull(args: argparse.Namespace) -> int:
    if (args.dest is None) == (args.output is None):
        raise UsageError("pull needs one destination: DEST or -o/--output DIR")
    args.dest = args.dest or args.output
    # exports into an archive or the Ollama store report no progress (yet): no frozen bar
    export = exports_quietly(args.dest, args.format)
    bar = choose_progress(args.progress, "pull", quiet=args.quiet, machine_output=args.json or export)
    on_existing = "overwrite" if args.overwrite else "keep" if args.keep_old_files else "refuse"
    try:
        result = api.pull(args.src, args.dest, format=args.format, transfer=_transfer(args), progress=bar,
                          verify=policy_from_args(args), include=args.include, exclude=args.pull_exclude,
                          on_existing=on_existing, with_signatures=args.with_signatures)
    finally:
        if bar:
            bar.close()
    if result.format == "directory":
        count, size = len(result.files), human_size(result.bytes)
        text = f"pulled {result.digest} into {args.dest}: {count} files, {size}"
        if result.signature:
            text += f"; OMS signature in {result.signature}"
        if result.kept:
            text += f"; kept {len(result.kept)} existing files that differ: {', '.join(result.kept)}"
    else:
        text = f"pulled {result.digest} to {args.dest}"
    _emit(args, result.as_dict(), text)
    return 0


def _add_pull_file_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("into a directory")
    g.add_argument("--include", action="append", default=[], metavar="GLOB",
                   help="only files matching GLOB (repeatable; unmatched layers are not fetched)")
    g.add_argument("--exclude", dest="pull_exclude", action="append", default=[], metavar="GLOB",
                   help="leave out files matching GLOB (repeatable)")
    g.add_argument("--with-signatures", action="store_true",
                   help="write the model's OMS signature beside the files as model.sig (OpenSSF model "
                        "signing tools verify the directory with it); the pulled files are checked against it")
    mode = g.add_mutually_exclusive_group()
    mode.add_argument("--overwrite", action="store_true", help="replace existing files that differ")
    mode.add_argument("-k", "--keep-old-files", action="store_true", help="keep existing files that differ")


def cmd_copy(args: argparse.Namespace) -> int:
    bar = choose_progress(args.progress, "copy", quiet=args.quiet, machine_output=args.json)
    try:
        result = api_copy.copy_reference(
            args.src, args.dst, referrers=args.referrers, transfer=_transfer(args), progress=bar,
            verify=policy_from_args(args),
        )
    finally:
        if bar:
            bar.close()
    s = result.stats
    referrers = f", {len(s.referrers)} referrers" if args.referrers else ""
    _emit(args, result.as_dict(),
          f"copied {args.src} to {result.reference}\n  {_counts(s, 'copied')}{referrers}")
    return 0


def cmd_inspect(args: argparse.Namespace) -> int:
    info = api.inspect(args.ref, transfer=_transfer(args)).as_dict()
    _emit(args, info, format_inspect(info))
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    warnings: list[str] = []
    try:
        desc = api.validate(args.ref, transfer=_transfer(args), strict=args.strict, warnings=warnings,
                            runtime=args.runtime)
    except ValidationError as e:
        if args.json:
            print(json.dumps({"valid": False, "reasons": e.reasons, "warnings": warnings}, indent=2))
        else:
            print(one_line(f"{args.ref}: invalid{' ' + e.family if e.family else ''}"), file=sys.stderr)
            for reason in e.reasons:
                print(one_line(f"  - {reason}"), file=sys.stderr)
            for warning in [] if args.strict else warnings:
                print(one_line(f"  warning: {warning}"), file=sys.stderr)
        return EXIT_FAILURE
    note = [] if not desc.title else [  # another family: what was checked, and the way to ModelPack
        f"  note: not a ModelPack artifact; its ModelPack form (`ocibridge convert {args.ref} DEST --to modelpack`) "
        "conforms to the model-spec"]
    title = f" {desc.title}" if desc.title else ""
    text = "\n".join([f"{args.ref}: valid{title} ({desc.digest})", *map(one_line, note),
                      *(one_line(f"  warning: {w}") for w in desc.warnings)])
    _emit(args, desc.as_dict(), text)
    return 0


def cmd_tags(args: argparse.Namespace) -> int:
    names = api.tags(args.ref, transfer=_transfer(args))
    if args.json:
        print(json.dumps(names))
    elif names:
        print("\n".join(one_line(name) for name in names))  # per tag: a newline in one forges no line
    if not names:  # most often a misspelt repository (registries answer 404): say so, as peers do
        print(f"ocibridge: error: {args.ref} has no tags (no such repository, or nothing tagged)",
              file=sys.stderr)
        return EXIT_FAILURE
    return 0


def cmd_login(args: argparse.Namespace) -> int:
    from ocibridge.stores.registry.loginflow import login

    transfer = _transfer(args)
    if sys.stdin.isatty() and not args.password_stdin:  # ask, as docker and oras do
        import getpass

        transfer.username = transfer.username or input("Username: ").strip()
        if transfer.password is None:
            transfer.password = getpass.getpass("Password: ")
    if not transfer.username or not transfer.password:
        raise UsageError("login needs --username and --password or --password-stdin")
    login(args.host, transfer.username, transfer.password, transfer.registry_options())
    from ocibridge.stores.registry.hosts import remember

    # What it took to reach the host is kept, so later commands need no --ca-file (as Docker's certs.d)
    saved = remember(args.host, ca_file=transfer.ca_file, plain_http=transfer.plain_http or None,
                     insecure=transfer.insecure or None)
    text = f"login succeeded for {args.host}"
    if saved is not None:
        text += f"; its TLS settings are remembered in {saved}"
    _emit(args, {"host": args.host, "username": transfer.username, "loggedIn": True,
                 "settings": str(saved) if saved else None}, text)
    return 0


def cmd_logout(args: argparse.Namespace) -> int:
    from ocibridge.stores.registry.credentials import logout

    removed = logout(args.host)
    text = f"removed credentials for {args.host}" if removed else f"not logged in to {args.host}"
    _emit(args, {"host": args.host, "removed": removed}, text)
    return 0


def _k8s_target(args: argparse.Namespace, for_write: bool = False) -> StoreTarget:
    from ocibridge.kinds.targets import open_store_target

    return open_store_target(args.ref, for_write=for_write, options=_transfer(args).registry_options())


def cmd_k8s_check(args: argparse.Namespace) -> int:
    from ocibridge.k8s import check

    t = _k8s_target(args)
    result = check(t.store, t.reference, args.runtime, platform=args.platform)
    result.reference = args.ref  # as the user wrote it, not the store-relative tag
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        verdict = "will mount" if result.will_mount else "will NOT mount"
        hidden = result.layers_hidden if result.will_mount else 0
        but = f", but {hidden} layer(s) will not be visible (see warnings)" if hidden else ""
        label = result.version.label if result.version else args.runtime
        print(one_line(f"{args.ref}: {verdict} on {label} ({result.kind}){but}"))
        for reason in result.reasons:
            print(one_line(f"  reason: {reason}"))
        for warning in result.warnings:
            print(one_line(f"  warning: {warning}"))
        for layer in result.layers:
            print(one_line(f"  {layer}"))
        if result.tree:
            print(f"files at the mount path{' (subPath ' + result.sub_path + ')' if result.sub_path else ''}:")
            for entry in result.tree:
                extra = f" -> {entry.target}" if entry.type == "symlink" else f" {entry.target or ''}".rstrip()
                size = human_size(entry.size) if entry.type == "file" else entry.type
                print(one_line(f"  {entry.path}  {size}{extra}"))
    return 0 if result.will_mount else EXIT_FAILURE


def cmd_k8s_modelcar(args: argparse.Namespace) -> int:
    from ocibridge.kinds.modelcar.from_any import build_from_any
    from ocibridge.stores.registry.pull_secret import CREDENTIALS_WARNING, loopback_warnings, pull_secret

    if args.kserve:
        from ocibridge.k8s.kserve import check_name
        from ocibridge.k8s.volume import pinned_reference

        check_name(args.kserve)
        pinned_reference(args.ref, "sha256:" + "0" * 64)  # a layout: refused before anything is built
    if args.create_pull_secret and not (args.kserve and args.image_pull_secret):
        raise UsageError("--create-pull-secret needs --kserve NAME and --image-pull-secret NAME "
                         "(the Secret it creates)")
    t = _k8s_target(args, for_write=True)
    from ocibridge.signing.policy import verify_before_use

    # the reference is resolved once: the image is built from the digest that was verified,
    # not from whatever the tag names by then (docs/security.md, "what is verified is used")
    source = t.store.resolve(t.reference)
    verify_before_use(t.store, source, policy_from_args(args), name=args.ref)
    platforms = tuple(args.platform) if args.platform else None
    base = None
    if args.base:
        from ocibridge.kinds.modelcar.base import open_base
        from ocibridge.kinds.targets import open_store_target

        b = open_store_target(args.base, options=_transfer(args).registry_options())
        base = open_base(b.store, b.reference, platform=(args.platform or ["linux/amd64"])[0], shown=args.base)
    desc = build_from_any(t.store, source.digest, shown=args.ref, tag=args.tag, index=args.index,
                          platforms=platforms, base=base)
    summary: dict[str, Any] = {"digest": desc.digest, "mediaType": desc.mediaType, "size": desc.size}
    text = f"built {desc.mediaType} {desc.digest}" + (f" tagged {args.tag}" if args.tag else "")
    if not args.kserve:
        _emit(args, summary, text)
        return 0
    from ocibridge.k8s.kserve import header, inference_service
    from ocibridge.k8s.volume import pinned_reference
    from ocibridge.mirror.yamlout import dump_all
    from ocibridge.oci.reference import parse_registry_reference

    pinned = pinned_reference(args.ref, desc.digest)
    host = parse_registry_reference(args.ref).registry
    docs = [inference_service(args.kserve, pinned, runnable=base is not None, model_format=args.model_format,
                              pull_secrets=args.image_pull_secret)]
    if args.create_pull_secret:
        docs.insert(0, pull_secret(args.image_pull_secret[0], [host]))
    for line in loopback_warnings([host]):
        print(line, file=sys.stderr)
    if args.json:
        print(json.dumps({**summary, "objects": docs}, indent=2))
    else:
        print(one_line(text), file=sys.stderr)
        print(printable(header(pinned, base is not None) + dump_all(docs)), end="")
    if args.create_pull_secret:
        print(CREDENTIALS_WARNING, file=sys.stderr)
    return 0


def cmd_k8s_volume(args: argparse.Namespace) -> int:
    from ocibridge.k8s import volume_yaml
    from ocibridge.oci.reference import parse_registry_reference
    from ocibridge.stores.registry.pull_secret import CREDENTIALS_WARNING, loopback_warnings, pull_secret

    secret = None
    if args.create_pull_secret and (not args.image_pull_secret or args.snippet):
        raise UsageError("--create-pull-secret needs --image-pull-secret NAME (the Secret it creates) "
                         "and a whole Pod (not --snippet)")
    t = _k8s_target(args)
    if args.create_pull_secret:  # after the reference is known to be a registry's
        host = parse_registry_reference(args.ref).registry
        secret = pull_secret(args.image_pull_secret[0], [host])
    with contextlib.suppress(OcibridgeError):  # a layout reference is refused below, with its own message
        for line in loopback_warnings([parse_registry_reference(args.ref).registry]):
            print(line, file=sys.stderr)
    if args.json:  # the same Pod (or snippet) as a JSON document: kubectl takes either
        from ocibridge.k8s.volume import volume_document

        doc, *_ = volume_document(
            t.store, t.reference, args.ref, runtime=args.runtime, platform=args.platform,
            mount_path=args.mount_path, name=args.name, image=args.image, snippet=args.snippet,
            pull_secrets=args.image_pull_secret,
        )
        if secret is not None:
            doc = {"apiVersion": "v1", "kind": "List", "items": [secret, doc]}
        print(json.dumps(doc, indent=2, ensure_ascii=True))
    else:
        text = volume_yaml(
            t.store, t.reference, args.ref, runtime=args.runtime, mount_path=args.mount_path,
            name=args.name, image=args.image, snippet=args.snippet, platform=args.platform,
            pull_secrets=args.image_pull_secret,
        )
        if secret is not None:
            from ocibridge.mirror.yamlout import dump_all

            text = dump_all([secret]) + "---\n" + text
        print(printable(text), end="")
    if secret is not None:
        print(CREDENTIALS_WARNING, file=sys.stderr)
    return 0


def cmd_k8s_mount(args: argparse.Namespace) -> int:
    from ocibridge.k8s import mount

    t = _k8s_target(args)
    done = mount(t.store, t.reference, args.dir, args.runtime, platform=args.platform)
    text = f"laid out {len(done.paths)} paths in {args.dir} as {args.runtime} would mount them"
    _emit(args, {"files": done.paths, "notReproduced": done.not_reproduced},
          "\n".join([text, *(f"  not reproduced: {one_line(n)}" for n in done.not_reproduced)]))
    return 0


def cmd_convert(args: argparse.Namespace) -> int:
    from ocibridge.cli import convert as convert_command
    from ocibridge.kinds.conversion import convert

    bar = choose_progress(args.progress, "convert", quiet=args.quiet, machine_output=args.json)
    try:
        result = convert(args.src, args.dst, args.to, options=convert_command.write_options(args),
                         registry_options=_transfer(args).registry_options(), concurrency=args.concurrency,
                         progress=bar)
    finally:
        if bar:
            bar.close()
    convert_command.report(args, result, _counts(result.stats, "copied"))
    return 0


def _runtime_arg(text: str) -> str:
    """``--runtime``: a runtime with an optional version, checked when the line is parsed."""
    from ocibridge.k8s.runtime import RuntimeVersion

    try:
        RuntimeVersion.parse(text)
    except OcibridgeError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


K8S_HELP = "Kubernetes image volumes: check, modelcar, volume, mount"


def _add_k8s_commands(sub: argparse._SubParsersAction[_Parser], command: CommandAdder) -> None:
    k8s = sub.add_parser("k8s", help=K8S_HELP)
    ksub = k8s.add_subparsers(dest="k8s_command", required=True, metavar="K8S_COMMAND")

    def kcommand(name: str, func: Callable[[argparse.Namespace], int], help: str) -> argparse.ArgumentParser:
        p = ksub.add_parser(name, help=help, description=help)
        p.set_defaults(func=func)
        p.add_argument("--json", action="store_true", help="print a machine-readable summary")
        p.add_argument("ref", metavar="REF")
        if name != "modelcar":
            p.add_argument("--runtime", type=_runtime_arg, default="cri-o", metavar="RUNTIME[@VERSION]",
                           help="cri-o[@1.33|@1.34|…] or containerd[@1.6|@1.7|@2.0|@2.1|@2.2|@2.3|…]; "
                                "default: the current release (cri-o 1.36, containerd 2.3)")
            p.add_argument("--platform", default="linux/amd64", help="node platform os/arch")
        _add_transfer_flags(p)
        return p

    kcommand("check", cmd_k8s_check, "say whether an image volume will mount and what the pod will see")
    p = kcommand("modelcar", cmd_k8s_modelcar, "build a ModelCar-style image (files under /models) for containerd")
    p.add_argument("--tag", help="tag the image (or index) in the same store")
    p.add_argument("--index", action="store_true", help="one index serving the image and the ModelPack artifact")
    p.add_argument("--platform", action="append", default=[], help="platform os/arch (repeatable)")
    p.add_argument("--base", metavar="IMAGE", help="build on this runnable image (busybox, say: read from its "
                   "registry or layout) so KServe's ModelCar sidecar can start; its platform is the image's")
    p.add_argument("--kserve", metavar="NAME", help="print a KServe InferenceService serving the image (pinned)")
    p.add_argument("--model-format", default="huggingface", help="the InferenceService's modelFormat name")
    add_pull_secret_flags(p, pulls="the InferenceService's image", creates="the registry")
    add_verify_flags(p)
    p = kcommand("volume", cmd_k8s_volume, "print a Pod with the image volume pinned by digest")
    p.add_argument("--mount-path", default="/models")
    p.add_argument("--name", default="model-consumer", help="Pod name")
    p.add_argument("--image", default="busybox:1.36", help="container image of the Pod")
    p.add_argument("--snippet", action="store_true", help="only the volume and volumeMount")
    add_pull_secret_flags(p, pulls="the model", creates="the registry")
    p = kcommand("mount", cmd_k8s_mount, "lay out DIR as the runtime would present the mount")
    p.add_argument("dir", metavar="DIR")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; with ``only`` (a command or alias as typed first), that
    command's parser alone is built and the others are listed by name and help
    (:class:`_Unbuilt`): what ``--help`` and the usage errors show is the same."""
    parser = _Parser(
        prog="ocibridge",
        description="Publish ML models to OCI registries as ModelPack artifacts, and bring them back.",
    )
    parser.add_argument("--version", action="version", version=f"ocibridge {_version()}")
    parser.add_argument("--debug", action="store_true",
                        help="log every HTTP request (secrets redacted) and, on an error, the traceback "
                             "(accepted anywhere on the line)")
    unbuilt = [False]  # whether the add_parser call in progress is for a command not being run

    def parser_class(**kwargs: Any) -> _Parser:
        return _Unbuilt(**kwargs) if unbuilt[0] else _Parser(**kwargs)

    # parser_class may be any callable making a parser; typeshed asks for a class
    sub: argparse._SubParsersAction[_Parser] = parser.add_subparsers(  # type: ignore[call-overload]
        dest="command", required=True, metavar="COMMAND", parser_class=parser_class)

    def command(name: str, func: Callable[[argparse.Namespace], int], help: str,
                aliases: tuple[str, ...] = ()) -> argparse.ArgumentParser:
        unbuilt[0] = only is not None and only not in (name, *aliases)
        try:
            p = sub.add_parser(name, help=help, description=help, aliases=list(aliases))
        finally:
            unbuilt[0] = False
        p.set_defaults(func=func)
        p.add_argument("--json", action="store_true", help="print a machine-readable summary")
        return p

    p = command("push", cmd_push, f"convert a model ({source_kinds()}) and store it")
    p.add_argument("source", metavar="SOURCE")
    p.add_argument("dest", metavar="DEST", nargs="?",
                   help="oci:PATH:TAG or host/repo:tag (default: the local store)")
    p.add_argument("--format", choices=["auto", *format_choices()], default=None,
                   help="source format (default: by extension, else by content)")
    p.add_argument("--media-types", choices=[f.value for f in Family], default=Family.CNAI.value,
                   help="ModelPack naming family to write (default cnai)")
    p.add_argument("--name", help="model name (default: from the source)")
    p.add_argument("-f", "--file", metavar="FILE",
                   help="a Modelfile (modctl) or Kitfile (KitOps) naming the files of SOURCE and their metadata "
                        "(default: a Kitfile or Modelfile at the top of SOURCE)")
    p.add_argument("--no-build-file", action="store_true",
                   help="pack a top-level Kitfile or Modelfile as a plain file instead of reading it")
    p.add_argument("--to", choices=family_choices(), default=None,
                   help="model family to write (default modelpack)")
    add_override_flags(p, skip=("name",), renamed={"format": "model-format"})
    p.add_argument("--kind", action="append", default=[], metavar="GLOB=KIND",
                   help="override the inferred kind of matching files (repeatable)")
    p.add_argument("--layer", action="append", default=[], metavar="KIND=VARIANT",
                   help="layer variant per kind: raw, tar, tar+gzip, tar+zstd (repeatable)")
    p.add_argument("--group", action="append", default=[], choices=[k.value for k in Kind],
                   help="pack all files of this kind into one tar layer (repeatable)")
    p.add_argument("--no-auto-group", action="store_true",
                   help="never group many small files into one tar layer automatically")
    p.add_argument("--signature", metavar="FILE",
                   help="an OMS signature of SOURCE (model_signing's model.sig): checked to sign exactly its "
                        "files, then attached to the pushed artifact (and left out of its files)")
    p.add_argument("--exclude", action="append", default=[], metavar="GLOB",
                   help="leave out matching files (repeatable)")
    p.add_argument("-a", "--annotation", action="append", default=[], metavar="KEY=VALUE",
                   help="manifest annotation (repeatable)")
    p.add_argument("--chunks", action="store_true",
                   help="bind a chunk table of the large files in the manifest, for verified lazy reads "
                        "(reads those files twice; docs/lazy.md)")
    p.add_argument("--created", nargs="?", const="now", default=None, metavar="RFC3339",
                   help="set descriptor.createdAt (now, honouring SOURCE_DATE_EPOCH, or a time)")
    p.add_argument("-q", "--quiet", "--no-tty", action="store_true", help="no progress bar")
    p.add_argument("--progress", choices=MODES, default="auto",
                   help="auto (a bar on a terminal), bar, plain (a line per blob), none")
    _add_transfer_flags(p)

    p = command("pull", cmd_pull, "fetch an artifact into a directory, an archive or another store")
    p.add_argument("src", metavar="SRC")
    p.add_argument("dest", metavar="DEST", nargs="?",
                   help=f"{source_kinds()} or a store")
    p.add_argument("-o", "--output", metavar="DIR", help="DEST as oras spells it")
    p.add_argument("--format", choices=["auto", *format_choices()], default=None)
    _add_pull_file_flags(p)
    p.add_argument("-q", "--quiet", "--no-tty", action="store_true", help="no progress bar")
    p.add_argument("--progress", choices=MODES, default="auto",
                   help="auto (a bar on a terminal), bar, plain (a line per blob), none")
    add_verify_flags(p)
    _add_transfer_flags(p)

    p = command("copy", cmd_copy, "copy an artifact and everything it references between stores", aliases=("cp",))
    p.add_argument("src", metavar="SRC")
    p.add_argument("dst", metavar="DST")
    p.add_argument("-r", "--referrers", "--recursive", action="store_true",
                   help="copy signatures and other referrers too (oras: --recursive)")
    p.add_argument("-q", "--quiet", "--no-tty", action="store_true", help="no progress bar")
    p.add_argument("--progress", choices=MODES, default="auto",
                   help="auto (a bar on a terminal), bar, plain (a line per blob), none")
    add_verify_flags(p)
    _add_transfer_flags(p)

    from ocibridge.cli.convert import add_convert_command

    add_convert_command(command, _add_transfer_flags, cmd_convert)

    p = command("inspect", cmd_inspect, "show an artifact's manifest, config and layers")
    p.add_argument("ref", metavar="REF")
    _add_transfer_flags(p)

    p = command("validate", cmd_validate, "check an artifact against the ModelPack rules")
    p.add_argument("ref", metavar="REF")
    p.add_argument("--strict", action="store_true",
                   help="warnings (what the spec recommends; with --runtime, that runtime's needs) count as errors")
    p.add_argument("--runtime", metavar="cri-o|containerd[@VERSION]",
                   help="also check what this runtime needs beyond the spec (CRI-O file names, containerd images)")
    _add_transfer_flags(p)

    p = command("tags", cmd_tags, "list the tags of a repository or layout")
    p.add_argument("ref", metavar="REF")
    _add_transfer_flags(p)

    p = command("login", cmd_login, "store registry credentials in the docker config")
    p.add_argument("host", metavar="HOST")
    _add_transfer_flags(p)

    p = command("logout", cmd_logout, "remove stored registry credentials")
    p.add_argument("host", metavar="HOST")

    from ocibridge.cli.mirror import register as register_mirror

    register_mirror(command)
    from ocibridge.cli.modelcache import register as register_model_cache

    register_model_cache(command, _add_transfer_flags)

    if only in (None, "k8s"):
        _add_k8s_commands(sub, command)
    else:
        unbuilt[0] = True
        sub.add_parser("k8s", help=K8S_HELP)
        unbuilt[0] = False
    add_signing_commands(command, _add_transfer_flags, _transfer)
    from ocibridge.cli.registry_check import register as register_check_registry

    register_check_registry(command, _add_transfer_flags)
    from ocibridge.cli.store import register as register_store_commands

    register_store_commands(command, _add_transfer_flags)
    from ocibridge.cli.bundle import register as register_bundle_commands

    register_bundle_commands(command, _add_transfer_flags)
    from ocibridge.cli.lazy import register as register_lazy_commands

    register_lazy_commands(command, _add_transfer_flags, _transfer)
    from ocibridge.cli.help import add_examples

    add_examples(parser)
    return parser


def _version() -> str:
    from ocibridge.version import __version__

    return __version__


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = DEBUG_FLAG in argv[: argv.index("--")] if "--" in argv else DEBUG_FLAG in argv
    if debug:
        argv.remove(DEBUG_FLAG)
        from ocibridge.stores.registry.debuglog import enable_request_log

        enable_request_log()
    # the command is the first word (the main parser's own flags take no value)
    parser = build_parser(only=argv[0] if argv and not argv[0].startswith("-") else None)
    args = parser.parse_args(argv)
    try:
        return _run(args)
    except Exception as e:
        if debug:
            traceback.print_exc()
        print(one_line(f"ocibridge: error: {_unexpected(e)}"), file=sys.stderr)
        return EXIT_FAILURE


DEBUG_FLAG = "--debug"


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
    """A notice (a resumed upload) as one line on stderr, above a bar that may be drawn."""
    print(one_line(f"ocibridge: {text}"), file=sys.stderr, flush=True)


def _run(args: argparse.Namespace) -> int:
    """Run the command; the errors ocibridge knows become one line and their exit code."""
    try:
        with interrupt.handling_signals(), notices.heard_by(_notice_to_stderr):
            code: int = args.func(args)
            return code
    except RegistryError as e:
        hint = ""
        if e.status in (401, 403) and args.command not in ("login", "logout"):
            if e.credentials_sent:
                hint = f" ({args.command}: the registry refused the credentials that were sent)"
            elif e.credentials_sent is not None or e.status == 401:
                hint = (f" ({args.command}: no credentials were sent; log in with 'ocibridge login HOST', "
                        "or pass -u/-p)")
        elif e.status == 400 and e.code is None:  # what an HTTPS port answers to plain HTTP
            hint = " (if the registry serves HTTPS, pass --ca-file FILE or --insecure)"
        print(one_line(f"ocibridge: error: {e}{hint}"), file=sys.stderr)
        return EXIT_FAILURE
    except UsageError as e:
        print(one_line(f"ocibridge: error: {e} (see 'ocibridge {args.command} --help')"), file=sys.stderr)
        return EXIT_USAGE
    except OcibridgeError as e:
        print(one_line(f"ocibridge: error: {e}"), file=sys.stderr)
        return EXIT_FAILURE
    except BrokenPipeError:
        # `ocibridge inspect … | head`: the reader left, which is no error of ours. Point
        # stdout at /dev/null so the interpreter's final flush does not complain either.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILURE
    except OSError as e:
        where = f"{e.filename}: " if e.filename else ""
        print(one_line(f"ocibridge: error: {where}{e.strerror or e}"), file=sys.stderr)
        return EXIT_FAILURE
    except Exception as e:
        # httpx is imported only by what talks to a network (~0.1-0.2 s saved on local work):
        # if it was never imported, this cannot be one of its errors.
        httpx = sys.modules.get("httpx")
        if httpx is None or not isinstance(e, httpx.HTTPError):
            raise
        print(one_line(f"ocibridge: error: network: {e}"), file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        print("ocibridge: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


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
    defer_cli()
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
