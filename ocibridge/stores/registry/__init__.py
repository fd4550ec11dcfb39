"""The registry store: an OCI distribution client on httpx (auth, retries, resumable blobs).

Names load on first use: :class:`RegistryOptions` (options.py) is built by every command, a
push into a layout too, and must not pay for importing httpx (~0.2 s).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ocibridge.stores.registry.client import ClientOptions, RegistryClient, TransferStats
    from ocibridge.stores.registry.credentials import credential_function, get_credentials, logout, store_credentials
    from ocibridge.stores.registry.loginflow import login
    from ocibridge.stores.registry.options import CredentialFunc, Credentials, RegistryOptions, RequestGate
    from ocibridge.stores.registry.referrers import fallback_tag
    from ocibridge.stores.registry.store import RegistryStore, open_repository

_HOMES = {
    "ClientOptions": "client", "RegistryClient": "client", "TransferStats": "client",
    "credential_function": "credentials", "get_credentials": "credentials", "logout": "credentials",
    "store_credentials": "credentials", "login": "loginflow",
    "CredentialFunc": "options", "Credentials": "options", "RegistryOptions": "options",
    "RequestGate": "options",
    "RegistryStore": "store", "fallback_tag": "referrers", "open_repository": "store",
}

__all__ = [
    "ClientOptions", "CredentialFunc", "Credentials", "RegistryClient", "RegistryOptions",
    "RegistryStore", "RequestGate", "TransferStats", "credential_function", "fallback_tag",
    "get_credentials", "login", "logout", "open_repository", "store_credentials",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
