"""The registry store: an OCI distribution client on httpx (auth, retries, resumable blobs)."""

from .client import ClientOptions, RegistryClient, TransferStats
from .credentials import Credentials, get_credentials, login, logout, store_credentials
from .store import RegistryStore, fallback_tag, open_repository

__all__ = [
    "ClientOptions",
    "Credentials",
    "RegistryClient",
    "RegistryStore",
    "TransferStats",
    "fallback_tag",
    "get_credentials",
    "login",
    "logout",
    "open_repository",
    "store_credentials",
]
