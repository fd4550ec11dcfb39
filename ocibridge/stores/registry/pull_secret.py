"""What a pod needs to reach a private registry: a Kubernetes pull Secret built from the user's stored
credentials, the registry's CA in a ConfigMap mounted where ocibridge's certs.d lookup reads it
(stores/registry/trust.py), the docker config Secret mounted as ``$DOCKER_CONFIG``, the checks of
the names and quantities every emitted document carries, and a warning for registry names that
mean something else inside a pod. Every command that prints Kubernetes documents builds them here.

The Secret is of type ``kubernetes.io/dockerconfigjson``, the form kubelet reads for
``imagePullSecrets`` and ocibridge reads as ``$DOCKER_CONFIG/config.json``. It holds the
credentials in clear (base64 is no protection): the CLI says so on stderr.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from ocibridge.core.hosts import is_loopback
from ocibridge.core.limits import read_at_most
from ocibridge.errors import OcibridgeError, TooLarge, UsageError
from ocibridge.stores.registry.credentials import get_credentials
from ocibridge.stores.registry.options import Credentials

_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?\Z")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")
_QUANTITY = re.compile(r"[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?\Z")
#: Where the CA ConfigMap is mounted: a certs.d directory ocibridge reads (stores/registry/trust.py).
CERTS_DIR = "/etc/containers/certs.d"
#: Where the docker config Secret is mounted (``$DOCKER_CONFIG``: ocibridge reads config.json there).
DOCKER_DIR = "/etc/ocibridge/docker"
#: A CA bundle larger than this is no CA bundle (a ConfigMap holds at most 1 MiB in all).
MAX_CA_BYTES = 256 << 10
CREDENTIALS_WARNING = ("warning: the output holds registry credentials (a Secret is only base64, not "
                       "encrypted): do not commit it or paste it anywhere public")


def check_secret_name(flag: str, name: str) -> None:
    """A Secret name is a DNS subdomain; say which flag is wrong, not what the API server says later."""
    if not _DNS_SUBDOMAIN.match(name):
        raise UsageError(f"{flag} {name!r} is not a valid Kubernetes name (lowercase, digits, '-', '.')")


def is_label(name: str) -> bool:
    """A DNS label: a Namespace, a Service, a Deployment's name."""
    return bool(_DNS_LABEL.match(name))


def check_label(flag: str, name: str) -> None:
    if not is_label(name):
        raise UsageError(f"{flag} {name!r} is not a valid Kubernetes name (lowercase letters, digits and '-', "
                         "at most 63 characters)")


def check_quantity(flag: str, value: str) -> None:
    if not _QUANTITY.match(value):
        raise UsageError(f"{flag} {value!r} is not a Kubernetes quantity (500m, 2, 512Mi, 4Gi)")


def read_ca_pem(path: Path, what: str) -> str:
    """The PEM text of a CA file of this machine, read now to go into a ConfigMap (no pod sees
    this machine's paths); ``what`` names it in errors (``--ca-file``, ``registries.H.ca_file``)."""
    try:
        raw = read_at_most(path, MAX_CA_BYTES)
        pem = raw.decode("ascii")
    except (OSError, UnicodeDecodeError) as e:
        raise OcibridgeError(f"{what}: cannot read {path} to put it in a ConfigMap: "
                             f"{getattr(e, 'strerror', None) or e}") from None
    if len(raw) > MAX_CA_BYTES:
        raise TooLarge(f"{what}: {path} is larger than 256 KiB, which is no CA bundle")
    if "-----BEGIN CERTIFICATE-----" not in pem:
        raise OcibridgeError(f"{what}: {path} holds no PEM certificate")
    return pem


def ca_config_map(meta: dict[str, Any], pems: Sequence[str]) -> dict[str, Any]:
    """The ConfigMap holding CA bundles as keys ``ca-0.crt``, ``ca-1.crt``, …"""
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
            "data": {f"ca-{n}.crt": pem for n, pem in enumerate(pems)}}


def ca_mount(config_map: str, host_keys: Iterable[tuple[str, str]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(volume, volumeMount) putting each (host, key) of the CA ConfigMap at
    ``/etc/containers/certs.d/HOST/ca.crt``, where ocibridge, like podman, looks for a registry's CA."""
    items = [{"key": key, "path": f"{host}/ca.crt"} for host, key in host_keys]
    return ({"name": "registry-ca", "configMap": {"name": config_map, "items": items}},
            {"name": "registry-ca", "mountPath": CERTS_DIR, "readOnly": True})


def docker_config_mount(secret: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    """(volume, volumeMount, env var) mounting a dockerconfigjson Secret as ``$DOCKER_CONFIG/config.json``:
    ocibridge in the pod reads the registry credentials there."""
    return ({"name": "docker-config", "secret": {
                "secretName": secret, "items": [{"key": ".dockerconfigjson", "path": "config.json"}]}},
            {"name": "docker-config", "mountPath": DOCKER_DIR, "readOnly": True},
            {"name": "DOCKER_CONFIG", "value": DOCKER_DIR})


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
