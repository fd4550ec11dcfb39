"""Which certificates a registry connection trusts, the way Docker, podman and skopeo decide.

- The system trust store (through ``truststore``: the OS verifier on macOS and Windows, the
  distribution's bundle on Linux, so a CA added with ``update-ca-certificates`` counts), plus
  certifi's bundle, as before.
- Per host, the ``certs.d`` directories Docker and containers use: ``/etc/docker/certs.d/HOST/``
  and ``/etc/containers/certs.d/HOST/`` (and ``~/.config/containers/certs.d/HOST/``): every
  ``*.crt`` is a CA; a ``NAME.cert`` with its ``NAME.key`` is a client certificate (mTLS).
  ``$OCIBRIDGE_CERTS_DIRS`` (colon-separated) replaces the list, for tests and odd setups.
- ``--ca-file`` (or ``ca_file`` remembered by ``login`` in the settings file) on top.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from ocibridge.core.environment import CERTS_DIRS as ENV_CERTS_DIRS
from ocibridge.errors import OcibridgeError

if TYPE_CHECKING:
    import ssl



def certs_dirs() -> list[Path]:
    """The certs.d base directories, in the order they are read."""
    env = os.environ.get(ENV_CERTS_DIRS)
    if env is not None:
        return [Path(p) for p in env.split(os.pathsep) if p]
    return [Path("/etc/docker/certs.d"), Path("/etc/containers/certs.d"),
            Path.home() / ".config" / "containers" / "certs.d"]


def host_cert_files(host: str) -> tuple[list[Path], list[tuple[Path, Path]]]:
    """(CA files, (client cert, key) pairs) the certs.d directories hold for ``host``."""
    cas: list[Path] = []
    clients: list[tuple[Path, Path]] = []
    for base in certs_dirs():
        directory = base / host
        if not directory.is_dir():
            continue
        for path in sorted(directory.iterdir()):
            if path.suffix == ".crt":
                cas.append(path)
            elif path.suffix == ".cert":
                key = path.with_suffix(".key")
                if not key.is_file():
                    raise OcibridgeError(f"{path}: client certificate without its key {key.name}")
                clients.append((path, key))
    return cas, clients


def ssl_context(host: str, ca_file: str | None = None) -> ssl.SSLContext:
    """A verifying context for ``host``: system store, certifi, certs.d, then ``ca_file``."""
    import ssl  # here: the certs.d look-up of a plain-HTTP host needs none of it

    import certifi
    import truststore

    context = truststore.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(certifi.where())
    cas, clients = host_cert_files(host)
    try:
        for path in cas:
            context.load_verify_locations(cafile=str(path))
        for cert, key in clients:
            context.load_cert_chain(str(cert), str(key))
        if ca_file:
            context.load_verify_locations(cafile=ca_file)
    except (OSError, ssl.SSLError) as e:
        raise OcibridgeError(f"registry {host}: cannot load certificates: {e}") from None
    return context
