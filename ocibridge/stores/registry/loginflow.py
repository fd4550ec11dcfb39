"""``login``: check credentials against a registry with a client, then store them.

Above both the client and the credential stores, so neither imports the other.
"""

from __future__ import annotations

import os
from pathlib import Path

from ocibridge.errors import RegistryError
from ocibridge.stores.registry import errcodes
from ocibridge.stores.registry.client import RegistryClient
from ocibridge.stores.registry.credentials import store_credentials
from ocibridge.stores.registry.options import Credentials, RegistryOptions


def login(host: str, username: str, password: str, options: RegistryOptions | None = None, *,
          directory: str | os.PathLike[str] | None = None) -> Path:
    """Check the credentials against the registry's ``/v2/``, then store them.

    Returns the config file written. Raises RegistryError when the registry refuses them.
    ``options`` says how to reach the registry; its credential fields are not used.
    """
    given = Credentials(username, password)
    client = RegistryClient(host, options or RegistryOptions(), credentials=lambda _host: given)
    try:
        # A scope-less token is what `docker login` asks for: it proves the credentials.
        response = client.send("GET", "/v2/")
        if response.status_code == 401:
            raise RegistryError(f"login to {host} failed: the registry refused the credentials",
                                401, errcodes.UNAUTHORIZED)
        if response.status_code != 200:
            raise client.error(response, "refused login")
    finally:
        client.close()
    return store_credentials(host, username, password, directory)
