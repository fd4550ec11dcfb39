"""Test infrastructure: real registries (plain, Basic, token, TLS), a token server, a fault
proxy and a tiny OCI layout writer. Importable as `support` from tests (tests/ is on sys.path).
"""

from .faultproxy import (
    FaultProxy,
    corrupt,
    delay,
    drop_request,
    drop_response,
    ignore_range,
    lose_response,
    server_error,
    status,
    throttle,
    too_many_requests,
    truncate,
)
from .fixtures import new_repo
from .ocilayout import TinyImage, write_tiny_image
from .registry import ExternalRegistry, RegistryProcess, RegistryUnavailable
from .token_registry import TokenRegistry
from .token_server import TokenServer, User

__all__ = [
    "ExternalRegistry", "FaultProxy", "RegistryProcess", "RegistryUnavailable", "TinyImage",
    "TokenRegistry", "TokenServer", "User", "corrupt", "delay", "drop_request",
    "drop_response", "ignore_range", "lose_response", "new_repo", "server_error", "status", "throttle",
    "too_many_requests", "truncate",
    "write_tiny_image",
]
