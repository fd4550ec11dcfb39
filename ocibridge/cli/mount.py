"""``mount`` (a registry model as a read-only FUSE directory, read lazily and verified) and
``umount``. docs/mount.md."""

from __future__ import annotations

import argparse

from ocibridge.api.mount import READ_TIMEOUT
from ocibridge.api.session import OFFLINE_ENV as OFFLINE
from ocibridge.cli.common import CommandAdder, add_transfer_flags, transfer_options
from ocibridge.cli.signing import add_verify_flags, policy_from_args


def cmd_mount(args: argparse.Namespace) -> int:
    from ocibridge.api import mount as api

    transfer, verify = transfer_options(args), policy_from_args(args)
    offline = True if args.offline else None  # else the OFFLINE variable
    if args.foreground:  # until unmounted (Ctrl-C unmounts)
        api.serve_mount(args.ref, args.dir, transfer=transfer, verify=verify, allow_other=args.allow_other,
                        offline=offline, read_timeout=args.read_timeout)
    else:  # a process of its own serves it, left running
        api.mount(args.ref, args.dir, transfer=transfer, verify=verify, allow_other=args.allow_other,
                  offline=offline, read_timeout=args.read_timeout)
    return 0


def cmd_umount(args: argparse.Namespace) -> int:
    from ocibridge.api import mount as api

    api.unmount(args.dir)
    return 0


def register(command: CommandAdder) -> None:
    """Add ``mount`` and ``umount``."""
    p = command("mount", cmd_mount)
    p.add_argument("ref", metavar="REF", help="host/repo:tag or host/repo@digest")
    p.add_argument("dir", metavar="DIR", help="an empty directory to mount the model's files on")
    p.add_argument("--foreground", action="store_true",
                   help="stay in the foreground until unmounted (Ctrl-C unmounts); default: detach once mounted")
    p.add_argument("--allow-other", action="store_true",
                   help="let other users read the mount (FUSE allow_other; a non-root user needs "
                        "user_allow_other in /etc/fuse.conf)")
    p.add_argument("--offline", action="store_true",
                   help="ask the registry nothing: REF means what it last resolved to, and what the model cache "
                        f"holds reads (the rest: EIO); default ${OFFLINE}")
    p.add_argument("--read-timeout", type=float, default=READ_TIMEOUT, metavar="SECONDS",
                   help="a read whose fetch hears nothing from the registry for this long, retries included, "
                        f"fails with EIO (a line names the file; the other reads go on); default {READ_TIMEOUT:g}")
    add_verify_flags(p)
    add_transfer_flags(p, uploads=False)

    p = command("umount", cmd_umount)
    p.add_argument("dir", metavar="DIR", help="a directory 'ocibridge mount' mounted")
