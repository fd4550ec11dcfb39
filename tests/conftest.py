"""Shared pytest fixtures. Registry fixtures live in tests/support (see support/fixtures.py)."""

from support.fixtures import (  # noqa: F401
    auth_registry,
    fault_proxy,
    registry,
    registry2,
    tls_registry,
    token_registry,
    unique_repo,
)
