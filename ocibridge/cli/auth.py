"""``login`` and ``logout``: credentials (and the TLS settings it took to reach the host) kept
in the docker config, where later commands find them."""

from __future__ import annotations

import argparse
import sys

from ocibridge.cli.common import CommandAdder, add_transfer_flags, emit, transfer_options
from ocibridge.errors import UsageError


def cmd_login(args: argparse.Namespace) -> int:
    from ocibridge.api.auth import login

    transfer = transfer_options(args)
    username, password = transfer.username, transfer.password
    if sys.stdin.isatty() and not args.password_stdin:  # ask, as docker and oras do
        import getpass

        username = username or input("Username: ").strip()
        if password is None:
            password = getpass.getpass("Password: ")
    if not username or not password:
        raise UsageError("login needs --username and --password or --password-stdin")
    # what it took to reach the host is kept too, so later commands need no --ca-file
    result = login(args.host, username, password, transfer=transfer)
    text = f"login succeeded for {result.host}"
    if result.settings is not None:
        text += f"; its TLS settings are remembered in {result.settings}"
    emit(args, result.as_dict(), text)
    return 0


def cmd_logout(args: argparse.Namespace) -> int:
    from ocibridge.api.auth import logout, registry_host

    host = registry_host(args.host)  # as login keeps it
    removed = logout(host)
    text = f"removed credentials for {host}" if removed else f"not logged in to {host}"
    emit(args, {"host": host, "removed": removed}, text)
    return 0


def register(command: CommandAdder) -> None:
    p = command("login", cmd_login)
    p.add_argument("host", metavar="HOST")
    add_transfer_flags(p)

    p = command("logout", cmd_logout)
    p.add_argument("host", metavar="HOST")

