"""``k8s serve --scan``: serve's content scan on the pods (``serve --scan``, docs/scanning.md), and
for ``--scan quarantine`` the public keys whose scan reports release a model. Each key is read
and checked here, carried in a ConfigMap (public keys: nothing secret) mounted read-only, and
named to serve by its mounted path. Quarantine without a key to trust (nor ``--sign-key``, whose
own reports serve trusts) is refused here, as serve refuses it at start: the pods would never
become ready."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import PurePath
from typing import Any

from ocibridge.errors import UsageError

#: where the ``--scan-verify-key`` ConfigMap is mounted (a directory of its own)
SCAN_KEYS_DIR = "/etc/ocibridge-scan-keys"
MODES = ("refuse", "quarantine", "off")
#: the ConfigMap's key of the ``--sign-key``'s public half, where a reader trusts the writer's reports
OWN_KEY = "serve-sign-key.pub"
#: what a ConfigMap's key may hold
_KEY_CHARACTERS = re.compile(r"[^-._a-zA-Z0-9]")


@dataclass(frozen=True)
class PodScan:
    """serve's ``--scan`` on the pods; ``keys``: (the ConfigMap's key, the public key's PEM), in
    the order given."""

    mode: str  # refuse | quarantine
    keys: tuple[tuple[str, str], ...] = ()

    def args(self) -> list[str]:
        args = ["--scan", self.mode]
        for name, _ in self.keys:
            args += ["--scan-verify-key", f"{SCAN_KEYS_DIR}/{name}"]
        return args

    def trusting(self, public_pem: str) -> PodScan:
        """This scan on a pod that does not sign, trusting the reports signed by the key of
        ``public_pem`` too (the writer's ``--sign-key``); unchanged unless it quarantines."""
        if self.mode != "quarantine":
            return self
        return replace(self, keys=(*self.keys, (_unused(OWN_KEY, dict(self.keys)), public_pem)))

    def config_map(self, meta: dict[str, Any]) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": dict(self.keys)}

    def volume(self, config_map: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """The ConfigMap ``config_map`` as a volume, and its read-only mount."""
        return ({"name": "scan-keys", "configMap": {"name": config_map}},
                {"name": "scan-keys", "mountPath": SCAN_KEYS_DIR, "readOnly": True})


def pod_scan(mode: str, key_paths: Sequence[str], signs: bool = False) -> PodScan | None:
    """``--scan MODE`` and its ``--scan-verify-key`` files, checked as serve checks them (``signs``:
    serve has ``--sign-key``, whose reports it trusts); None: off. A key is read here and carried
    as its public key's PEM (a certificate gives its key)."""
    if mode not in MODES:
        raise UsageError(f"--scan {mode}: one of refuse, quarantine, off")
    if key_paths and mode != "quarantine":
        raise UsageError("--scan-verify-key goes with --scan quarantine: the keys whose reports release a model")
    if mode == "off":
        return None
    if mode == "quarantine" and not key_paths and not signs:
        raise UsageError("--scan quarantine releases a model on a signed scan report only: give k8s serve "
                         "--scan-verify-key PUB (the key of whoever may release, repeatable) or --sign-key KEY "
                         "(its own reports signed and trusted)")
    keys: dict[str, str] = {}
    for path in key_paths:
        keys[config_key(PurePath(path).name, keys)] = _public_pem(path)
    return PodScan(mode, tuple(keys.items()))


def config_key(file_name: str, keys: dict[str, str]) -> str:
    """A ConfigMap's key for the file ``file_name`` beside ``keys``: its name, what a key may not
    hold replaced, else ``key-N.pub``."""
    return _unused(_KEY_CHARACTERS.sub("-", file_name), keys)


def _unused(name: str, keys: dict[str, str]) -> str:
    """``name``, else ``key-N.pub``: two keys of one name, or none usable."""
    number = 0
    while name in keys or name.strip(".") == "":
        name, number = f"key-{number}.pub", number + 1
    return name


def _public_pem(path: str) -> str:
    """The public key at ``path`` as PEM; one error line when it is not a public key."""
    from ocibridge.core.limits import MAX_SMALL_INPUT, read_small_file
    from ocibridge.errors import SignatureError
    from ocibridge.signing.keys import public_key_from_pem, public_pem

    where = f"--scan-verify-key {path}"
    data = read_small_file(path, MAX_SMALL_INPUT, "--scan-verify-key", UsageError)
    try:
        return public_pem(public_key_from_pem(data, where)).decode()
    except SignatureError as e:
        raise UsageError(str(e)) from None
