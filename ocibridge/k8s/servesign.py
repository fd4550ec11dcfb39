"""``k8s serve --sign-key`` / ``--sign-key-secret``: serve's ``--sign-key`` on the pods that
commit. ``--sign-key``: the private key is read and loaded here as serve loads it (a bad key or
a wrong ``$COSIGN_PASSWORD`` is one error line, before anything is printed) and carried in a
Secret (never a ConfigMap); the password of an encrypted key goes into the same Secret.
``--sign-key-secret``: a Secret already in the cluster (sealed-secrets, external-secrets, Vault
keep keys out of Git) is named, and nothing secret is printed. Either way the Secret's
``sign.key`` is mounted read-only and named to serve by its mounted path, and its ``password``
reaches serve as ``$COSIGN_PASSWORD`` through a secretKeyRef, never in the args.

Only the writer commits: with replicas, the readers get no private key, and under ``--scan
quarantine`` its public half as one more ``--scan-verify-key`` (serve trusts its own key's
reports; a reader must trust the writer's). A named Secret's public half is not known here."""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass, field
from typing import Any

from ocibridge.errors import UsageError

#: where the ``--sign-key`` Secret is mounted (a directory of its own), and its keys
SIGN_KEY_DIR = "/etc/ocibridge-sign-key"
KEY = "sign.key"
PASSWORD = "password"
FORMS = ("classic", "bundle", "both")
#: owner root, group the pod's fsGroup (the image's user): nobody else reads the key
KEY_FILE_MODE = 0o440
WARNING = ("warning: the output holds the private key of --sign-key (a Secret is only base64, not encrypted): "
           "do not commit it or paste it anywhere public")


@dataclass(frozen=True)
class PodSign:
    """serve's ``--sign-key`` on the pods: the Secret ``secret`` holding the key file as read
    (``key``) and, for an encrypted key, its ``password``; ``public``: the key's public half (PEM).
    ``key`` None: the Secret is already in the cluster, its key and public half unknown here."""

    secret: str
    key: bytes | None = field(repr=False)
    password: str | None = field(repr=False)
    public: str | None
    form: str | None = None  # --sign-form; None: serve's default (both)

    def args(self) -> list[str]:
        args = ["--sign-key", f"{SIGN_KEY_DIR}/{KEY}"]
        return args + (["--sign-form", self.form] if self.form else [])

    def warnings(self) -> list[str]:
        """What the output then holds: the private key, unless the Secret is only named."""
        return [] if self.key is None else [WARNING]

    def secret_document(self, meta: dict[str, Any]) -> dict[str, Any] | None:
        """The Secret to print; None when it is already in the cluster."""
        if self.key is None:
            return None
        data = {KEY: self.key} if self.password is None else {KEY: self.key, PASSWORD: self.password.encode()}
        return {"apiVersion": "v1", "kind": "Secret", "metadata": {**meta, "name": self.secret}, "type": "Opaque",
                "data": {name: base64.b64encode(value).decode() for name, value in data.items()}}

    def volume(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The key file alone as a read-only volume (the password goes by environment), and its mount."""
        return ({"name": "sign-key", "secret": {"secretName": self.secret, "defaultMode": KEY_FILE_MODE,
                                                "items": [{"key": KEY, "path": KEY}]}},
                {"name": "sign-key", "mountPath": SIGN_KEY_DIR, "readOnly": True})

    def env(self) -> list[dict[str, Any]]:
        """``$COSIGN_PASSWORD`` from the Secret: when the key printed is encrypted, or, from a named
        Secret, when it holds a ``password`` (optional: a plain key's Secret has none)."""
        from ocibridge.signing import PASSWORD_ENV

        ref: dict[str, Any] = {"name": self.secret, "key": PASSWORD}
        if self.key is None:
            ref["optional"] = True
        elif self.password is None:
            return []
        return [{"name": PASSWORD_ENV, "valueFrom": {"secretKeyRef": ref}}]


def pod_sign(path: str | None, form: str | None, name: str, existing: str | None = None) -> PodSign | None:
    """``--sign-key PATH`` loaded as serve loads it (its password: ``$COSIGN_PASSWORD`` now),
    carried in a Secret ``NAME-sign-key``, or ``--sign-key-secret`` ``existing``, a Secret the
    cluster has; None without either."""
    if path is not None and existing is not None:
        raise UsageError("--sign-key and --sign-key-secret: one or the other (--sign-key-secret names a Secret "
                         "the cluster already has, --sign-key prints one)")
    if path is None and existing is None:
        if form is not None:
            raise UsageError("--sign-form goes with --sign-key or --sign-key-secret")
        return None
    if form is not None and form not in FORMS:
        raise UsageError(f"--sign-form {form}: one of {', '.join(FORMS)}")
    if existing is not None:
        from ocibridge.stores.registry.pull_secret import check_secret_name

        check_secret_name("--sign-key-secret", existing)
        return PodSign(existing, None, None, None, form)
    assert path is not None
    from ocibridge.core.limits import MAX_SMALL_INPUT, read_small_file
    from ocibridge.errors import SignatureError
    from ocibridge.signing import PASSWORD_ENV
    from ocibridge.signing.keys import private_key_from_pem, public_pem

    data = read_small_file(path, MAX_SMALL_INPUT, "--sign-key", UsageError)
    try:
        key = private_key_from_pem(data, f"--sign-key {path}")
    except SignatureError as e:
        raise UsageError(str(e)) from None
    # loaded with a password that is not empty: the key is encrypted (a plain one refuses a password)
    password = os.environ.get(PASSWORD_ENV) or None
    return PodSign(f"{name}-sign-key", data, password, public_pem(key).decode(), form)
