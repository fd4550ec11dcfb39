"""``login`` and ``logout``: credentials kept in the docker config (credential helpers honoured),
and what it took to reach the host kept beside them, where every later call finds both."""

from __future__ import annotations

import dataclasses

from ocibridge.api.options import TransferOptions
from ocibridge.transfer.results import LoginResult


def login(host: str, username: str, password: str, *, transfer: TransferOptions | None = None) -> LoginResult:
    """Check the credentials against ``host`` and store them, as ``ocibridge login`` does. The
    TLS settings ``transfer`` gives (``ca_file``, ``plain_http``, ``insecure``) are remembered for
    the host too (as Docker's certs.d), so later calls need none of them; ``settings`` names that
    file when any was given."""
    from ocibridge.stores.registry.hostsettings import remember
    from ocibridge.stores.registry.loginflow import login as store_login

    host = registry_host(host)
    transfer = dataclasses.replace(transfer or TransferOptions(), username=username, password=password)
    store_login(host, username, password, transfer.registry_options())
    saved = remember(host, ca_file=transfer.ca_file, plain_http=transfer.plain_http or None,
                     insecure=transfer.insecure or None)
    return LoginResult(host, username, str(saved) if saved else None)


def registry_host(host: str) -> str:
    """The host ``login`` keeps ``host``'s credentials under (a URL or ``docker://HOST`` reduced
    to its ``HOST[:PORT]``, as ``docker login`` reduces it); one error line for a layout, a
    model's place or nothing."""
    from ocibridge.places.locate import registry_host as host_of

    return host_of(host, "login and logout take a registry's HOST (layouts and local models need none)")


def logout(host: str) -> bool:
    """Forget the stored credentials of ``host``; False when there were none."""
    from ocibridge.stores.registry.credentials import logout as store_logout

    return store_logout(registry_host(host))
