"""One SSL context per default trust for the tests' own httpx clients.

``httpx.get`` and its kin make a client per call, and a client made with the default trust loads
certifi's bundle into a new SSL context (43 ms of CPU on the suite's VM), though a request to a
loopback ``http://`` server never uses it; the suite's polls and one-call requests made thousands.
The context is made once per trust the environment names (``SSL_CERT_FILE``, ``SSL_CERT_DIR``:
what httpx reads with ``trust_env``) and shared; httpx never changes a context it made, and it
verifies as a new one would. Only this test process is changed: serve and the CLI, started as
processes, make theirs as users' do."""

from __future__ import annotations

import functools
import os
import ssl
from typing import Any

import httpx._transports.default as transports
from httpx._config import create_ssl_context


@functools.lru_cache(maxsize=8)
def _made(trust_env: bool, cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    return create_ssl_context(verify=True, cert=None, trust_env=trust_env)


def shared_default_trust(verify: Any = True, cert: Any = None, trust_env: bool = True) -> ssl.SSLContext:
    if verify is True and cert is None:
        named = (os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")) if trust_env else (None, None)
        return _made(trust_env, *named)
    return create_ssl_context(verify=verify, cert=cert, trust_env=trust_env)


def install() -> None:
    """httpx's transports make their default context through :func:`shared_default_trust`."""
    transports.create_ssl_context = shared_default_trust  # type: ignore[assignment]
