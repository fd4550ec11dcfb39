"""What a pod needs to reach a private registry: a Kubernetes pull Secret built from the user's stored
credentials, and a warning for registry names that mean something else inside a pod.

The Secret is of type ``kubernetes.io/dockerconfigjson``, the form kubelet reads for
``imagePullSecrets`` and ocibridge reads as ``$DOCKER_CONFIG/config.json``. It holds the
credentials in clear (base64 is no protection): the CLI says so on stderr.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Iterable
from typing import Any

from ocibridge.core.hosts import is_loopback
from ocibridge.errors import OcibridgeError, UsageError
from ocibridge.stores.registry.credentials import get_credentials
from ocibridge.stores.registry.options import Credentials

_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?\Z")
CREDENTIALS_WARNING = ("warning: the output holds registry credentials (a Secret is only base64, not "
                       "encrypted): do not commit it or paste it anywhere public")


def check_secret_name(flag: str, name: str) -> None:
    """A Secret name is a DNS subdomain; say which flag is wrong, not what the API server says later."""
    if not _DNS_SUBDOMAIN.match(name):
        raise UsageError(f"{flag} {name!r} is not a valid Kubernetes name (lowercase, digits, '-', '.')")


def loopback_warnings(hosts: Iterable[str]) -> list[str]:
    """One warning line per loopback registry name, for stderr."""
    return [f"warning: registry {h} is a loopback name: inside a pod it is the pod itself (and for "
            "image volumes, the node), not this machine; use a name the cluster resolves"
            for h in sorted(set(hosts)) if is_loopback(h)]


def pull_secret(
    name: str,
    hosts: Iterable[str],
    *,
    namespace: str | None = None,
    lookup: Callable[[str], Credentials | None] = get_credentials,
    every_host: bool = True,
) -> dict[str, Any]:
    """A ``kubernetes.io/dockerconfigjson`` Secret with the stored credentials of each host.

    A host without stored credentials is refused when ``every_host`` (a Secret that silently
    lacks the one registry fails later, at pull time, on a node); otherwise left out (a mirror
    job may read a public registry anonymously), but a Secret of no host at all is refused. A
    host with only an identity token, which kubelet does not read, is refused.
    """
    check_secret_name("--create-pull-secret", name)
    auths: dict[str, dict[str, str]] = {}
    for host in sorted(set(hosts)):
        creds = lookup(host)
        if creds is None and not every_host:
            continue
        if creds is None:
            raise OcibridgeError(f"no stored credentials for {host}: run 'ocibridge login {host}' first "
                                 "(or drop --create-pull-secret and name an existing Secret)")
        if creds.identity_token and not creds.password:
            raise OcibridgeError(f"the credentials for {host} are an identity token, which kubelet does not "
                                 "read; create the Secret with 'kubectl create secret docker-registry'")
        token = base64.b64encode(f"{creds.username}:{creds.password}".encode()).decode()
        auths[host] = {"username": creds.username, "password": creds.password, "auth": token}
    if not auths:
        raise OcibridgeError(f"no stored credentials for any of {', '.join(sorted(set(hosts)))}: run "
                             "'ocibridge login HOST' first")
    config = json.dumps({"auths": auths}, sort_keys=True, separators=(",", ":"))
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": "kubernetes.io/dockerconfigjson",
            "data": {".dockerconfigjson": base64.b64encode(config.encode()).decode()}}
