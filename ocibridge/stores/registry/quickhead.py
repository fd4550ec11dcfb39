"""One manifest ``HEAD`` with the standard library: does a tag still name a digest?

``ocibridge path`` of a model the cache holds needs one answer from the registry, the digest
its tag names now. The full client (httpx, the transport stack, auth) costs more to import
than the whole answer takes, so this asks once, anonymously, and answers only when the
answer is plain: a 200 with a digest. Anything else (a challenge, a redirect, an error, a
host with settings, certificates or a proxy of its own) is None, and the caller goes the
full client's way, which handles every one of them.
"""

from __future__ import annotations

import http.client
import os

from ocibridge.oci.digest import is_digest
from ocibridge.oci.mediatypes import ALL_MANIFEST_TYPES
from ocibridge.stores.registry.hosts import HostSettings, host_settings
from ocibridge.stores.registry.trust import host_cert_files

ENV_USER_AGENT = "OCIBRIDGE_USER_AGENT"
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1", "[::1]")
DOCKER_HUB = "docker.io"
_PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy")
TIMEOUT = 30.0


def user_agent() -> str:
    """``ocibridge/VERSION``, or ``$OCIBRIDGE_USER_AGENT``: a registry's access log then tells
    which tool (and, for a mirror shard, which shard) sent a request."""
    from ocibridge.version import __version__

    return os.environ.get(ENV_USER_AGENT) or f"ocibridge/{__version__}"


def is_loopback(host: str) -> bool:
    """Whether ``host[:port]`` names this machine (plain HTTP by Docker's convention)."""
    name = host.rsplit(":", 1)[0] if not host.endswith("]") and host.count(":") == 1 else host
    if name.startswith("[") and "]" in name:
        name = name[1 : name.index("]")]
    return name in LOOPBACK_HOSTS or name.startswith("127.")


def _plain_case(host: str) -> bool:
    """Whether the full client would reach ``host`` with no setting of its own: no entry in
    the settings file (mirrors, TLS choices), no certs.d files, no proxy, not Docker Hub."""
    if host == DOCKER_HUB or any(os.environ.get(v) or os.environ.get(v.upper()) for v in _PROXY_VARIABLES):
        return False
    saved = host_settings(host)
    if (saved.plain_http, saved.insecure, saved.ca_file, saved.mirrors) != (
            HostSettings.plain_http, HostSettings.insecure, HostSettings.ca_file, HostSettings.mirrors):
        return False
    return host_cert_files(host) == ([], [])


def head_digest(host: str, repository: str, reference: str) -> str | None:
    """The digest ``host/repository:reference`` names now, by one anonymous HEAD, or None
    where only the full client can tell (see the module's docstring)."""
    if not _plain_case(host):
        return None
    connection: http.client.HTTPConnection
    if is_loopback(host):  # plain HTTP, as the full client uses with no TLS option
        connection = http.client.HTTPConnection(host, timeout=TIMEOUT)
    else:
        from ocibridge.stores.registry.trust import ssl_context

        connection = http.client.HTTPSConnection(host, timeout=TIMEOUT, context=ssl_context(host))
    try:
        connection.request("HEAD", f"/v2/{repository}/manifests/{reference}", headers={
            "Accept": ", ".join(ALL_MANIFEST_TYPES), "User-Agent": user_agent()})
        response = connection.getresponse()
        digest = response.getheader("Docker-Content-Digest")
        if response.status != 200 or not digest or not is_digest(digest):
            return None
        return digest
    except (OSError, http.client.HTTPException):
        return None  # the full client retries, and says what went wrong
    finally:
        connection.close()
