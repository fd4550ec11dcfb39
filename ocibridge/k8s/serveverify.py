"""``k8s serve --verify-key PUB --policy FILE``: serve's own check of the models it serves
(``serve --verify-key``, ``--policy``: docs/serve.md) on the pods. Each file is read here as serve
reads it at start (a file that is not a public key or a policy file is one error line, before
anything is printed), carried in a ConfigMap (nothing secret) mounted read-only, and named to
serve by its mounted path. Every pod checks what it serves, the writer and the readers alike."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from ocibridge.errors import UsageError
from ocibridge.k8s.servescan import config_key

#: where the ``--verify-key`` ConfigMap is mounted (a directory of its own)
VERIFY_KEYS_DIR = "/etc/ocibridge-verify-keys"
#: where the ``--policy`` ConfigMap is mounted, and its key
POLICY_DIR = "/etc/ocibridge-policy"
POLICY_KEY = "policy.json"


@dataclass(frozen=True)
class PodVerification:
    """``keys``: (the ConfigMap's key, the key file's text), in the order given; ``policy``: the
    policy file's text."""

    keys: tuple[tuple[str, str], ...] = ()
    policy: str | None = None

    def args(self) -> list[str]:
        args = [word for name, _ in self.keys for word in ("--verify-key", f"{VERIFY_KEYS_DIR}/{name}")]
        return args + (["--policy", f"{POLICY_DIR}/{POLICY_KEY}"] if self.policy is not None else [])

    def config_maps(self, meta: dict[str, Any]) -> list[dict[str, Any]]:
        """NAME-verify-keys and NAME-policy, ``meta`` the Deployment's."""
        return [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {**meta, "name": f"{meta['name']}-{suffix}"},
                 "data": data} for suffix, data in self._data()]

    def volumes(self, name: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """Each ConfigMap of the Deployment ``name`` as a volume, and its read-only mount (a directory:
        an edited ConfigMap reaches the pods; serve reads the policy file at start)."""
        where = {"verify-keys": VERIFY_KEYS_DIR, "policy": POLICY_DIR}
        return [({"name": suffix, "configMap": {"name": f"{name}-{suffix}"}},
                 {"name": suffix, "mountPath": where[suffix], "readOnly": True}) for suffix, _ in self._data()]

    def _data(self) -> Iterator[tuple[str, dict[str, str]]]:
        if self.keys:
            yield "verify-keys", dict(self.keys)
        if self.policy is not None:
            yield "policy", {POLICY_KEY: self.policy}

    def warnings(self) -> list[str]:
        if self.policy is None or not any(_key_paths(json.loads(self.policy))):
            return []
        return ["warning: --policy names key files by path (keyPath, keyPaths): the pods read them at those paths, "
                "which these documents do not carry; give the keys inline (keyData) or mount them there"]


def pod_verification(key_paths: Sequence[str], policy: str | None) -> PodVerification | None:
    """The ``--verify-key`` files and the ``--policy`` file, read and checked as serve reads them;
    None: neither given."""
    from ocibridge.core.limits import MAX_SMALL_INPUT
    from ocibridge.signing.containers_policy import MAX_POLICY_BYTES
    from ocibridge.signing.policy_file import read_policy_file
    from ocibridge.signing.verify import VerifyPolicy

    if not key_paths and policy is None:
        return None
    if key_paths:  # as serve loads them: one error line for one that is not a key
        VerifyPolicy.from_files(list(key_paths))
    keys: dict[str, str] = {}
    for path in key_paths:
        keys[config_key(PurePath(path).name, keys)] = _text(path, "--verify-key", MAX_SMALL_INPUT)
    text = None
    if policy is not None:
        read_policy_file(policy)  # as serve reads it at start: refused as containers/image refuses it
        text = _text(policy, "--policy", MAX_POLICY_BYTES)
    return PodVerification(tuple(keys.items()), text)


def _text(path: str, flag: str, cap: int) -> str:
    from ocibridge.core.limits import read_small_file

    data = read_small_file(path, cap, flag, UsageError)
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise UsageError(f"{flag} {path}: not text (a ConfigMap carries it as text)") from None


def _key_paths(value: Any) -> Iterator[bool]:
    """True for each ``keyPath`` or ``keyPaths`` of a policy document."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield key in ("keyPath", "keyPaths")
            yield from _key_paths(item)
    elif isinstance(value, list):
        for item in value:
            yield from _key_paths(item)
