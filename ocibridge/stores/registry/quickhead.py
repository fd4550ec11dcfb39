"""One manifest ``HEAD`` over a plain socket: does a tag still name a digest?

``ocibridge path`` of a model the cache holds needs one answer from the registry, the digest
its tag names now. The full client (httpx, the transport stack, auth) costs more to import
than the whole answer takes, and so does http.client (it parses headers with the email
package), so this writes the one request itself, anonymously, and answers only when the
answer is plain: a 200 with a digest. Anything else (a challenge, a redirect, an error, a
host with settings, certificates or a proxy of its own) is None, and the caller goes the
full client's way, which handles every one of them.
"""

from __future__ import annotations

import os
import re
import socket

from ocibridge.core.environment import USER_AGENT as ENV_USER_AGENT
from ocibridge.core.hosts import is_loopback, split_host_port
from ocibridge.oci.mediatypes import ALL_MANIFEST_TYPES

DOCKER_HUB = "docker.io"
_PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy")
TIMEOUT = 30.0
#: A HEAD answer is a status line and headers: more than this is no answer to read here.
MAX_HEAD = 64 * 1024
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128}")
_STATUS = re.compile(rb"HTTP/1\.[01] (\d{3})[ \r]")
_PATH_PART = re.compile(r"[A-Za-z0-9._/:@-]+")  # what repository names and tags are made of


def user_agent() -> str:
    """``ocibridge/VERSION``, or ``$OCIBRIDGE_USER_AGENT``: a registry's access log then tells
    which tool (and, for a mirror shard, which shard) sent a request."""
    from ocibridge.version import __version__

    return os.environ.get(ENV_USER_AGENT) or f"ocibridge/{__version__}"


def _plain_case(host: str) -> bool:
    """Whether the full client would reach ``host`` with no setting of its own: no entry in
    the settings file (mirrors, TLS choices), no certs.d files, no proxy, not Docker Hub."""
    if host == DOCKER_HUB or any(os.environ.get(v) or os.environ.get(v.upper()) for v in _PROXY_VARIABLES):
        return False
    from ocibridge.stores.registry.hostsettings import HostSettings, host_settings
    from ocibridge.stores.registry.trust import host_cert_files

    saved = host_settings(host)
    if (saved.plain_http, saved.insecure, saved.ca_file, saved.mirrors) != (
            HostSettings.plain_http, HostSettings.insecure, HostSettings.ca_file, HostSettings.mirrors):
        return False
    return host_cert_files(host) == ([], [])


def _address(host: str, default_port: int) -> tuple[str, int] | None:
    """(name, port) of ``host[:port]`` (``[v6]:port`` too), None if malformed."""
    name, port = split_host_port(host)
    port = str(default_port) if port is None else port
    return (name, int(port)) if name and port.isdigit() else None


def head_digest(host: str, repository: str, reference: str) -> str | None:
    """The digest ``host/repository:reference`` names now, by one anonymous HEAD, or None
    where only the full client can tell (see the module's docstring)."""
    if not (_PATH_PART.fullmatch(repository) and _PATH_PART.fullmatch(reference)) or not _plain_case(host):
        return None
    plain = is_loopback(host)  # plain HTTP, as the full client uses with no TLS option
    address = _address(host, 80 if plain else 443)
    if address is None:
        return None
    request = (f"HEAD /v2/{repository}/manifests/{reference} HTTP/1.1\r\nHost: {host}\r\n"
               f"Accept: {', '.join(ALL_MANIFEST_TYPES)}\r\nUser-Agent: {user_agent()}\r\n"
               "Connection: close\r\n\r\n").encode("ascii", "replace")
    try:
        with socket.create_connection(address, timeout=TIMEOUT) as raw:
            if plain:
                return _answer(raw, request)
            from ocibridge.stores.registry.trust import ssl_context

            with ssl_context(host).wrap_socket(raw, server_hostname=address[0]) as tls:
                return _answer(tls, request)
    except (OSError, ValueError, UnicodeError):
        return None  # the full client retries, and says what went wrong


def _answer(sock: socket.socket, request: bytes) -> str | None:
    """Send the HEAD; the ``Docker-Content-Digest`` of a 200 answer, else None."""
    sock.sendall(request)
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(8192)
        if not chunk or len(head) > MAX_HEAD:
            return None
        head += chunk
    lines = head.split(b"\r\n\r\n", 1)[0].split(b"\r\n")
    status = _STATUS.match(lines[0] + b"\r")
    if status is None or status.group(1) != b"200":
        return None
    for line in lines[1:]:
        name, _, value = line.decode("latin-1").partition(":")
        if name.strip().lower() == "docker-content-digest" and _DIGEST.fullmatch(value.strip()):
            return value.strip()
    return None
