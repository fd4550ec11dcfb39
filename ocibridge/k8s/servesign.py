"""``k8s serve --sign-key``: serve's ``--sign-key`` on the pods that commit. The private key is
read and loaded here as serve loads it (a bad key or a wrong ``$COSIGN_PASSWORD`` is one error
line, before anything is printed), carried in a Secret (never a ConfigMap) mounted read-only,
and named to serve by its mounted path; the password of an encrypted key goes into the same
Secret and reaches serve as ``$COSIGN_PASSWORD`` through a secretKeyRef, never in the args.

Only the writer commits: with replicas, the readers get no private key, and under ``--scan
quarantine`` its public half as one more ``--scan-verify-key`` (serve trusts its own key's
reports; a reader must trust the writer's)."""

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
    (``key``) and, for an encrypted key, its ``password``; ``public``: the key's public half (PEM)."""

    secret: str
    key: bytes = field(repr=False)
    password: str | None = field(repr=False)
    public: str
    form: str | None = None  # --sign-form; None: serve's default (both)

    def args(self) -> list[str]:
        args = ["--sign-key", f"{SIGN_KEY_DIR}/{KEY}"]
        return args + (["--sign-form", self.form] if self.form else [])

    def secret_document(self, meta: dict[str, Any]) -> dict[str, Any]:
        data = {KEY: self.key} if self.password is None else {KEY: self.key, PASSWORD: self.password.encode()}
        return {"apiVersion": "v1", "kind": "Secret", "metadata": {**meta, "name": self.secret}, "type": "Opaque",
                "data": {name: base64.b64encode(value).decode() for name, value in data.items()}}

    def volume(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The key file alone as a read-only volume (the password goes by environment), and its mount."""
        return ({"name": "sign-key", "secret": {"secretName": self.secret, "defaultMode": KEY_FILE_MODE,
                                                "items": [{"key": KEY, "path": KEY}]}},
                {"name": "sign-key", "mountPath": SIGN_KEY_DIR, "readOnly": True})

    def env(self) -> list[dict[str, Any]]:
        from ocibridge.signing import PASSWORD_ENV

        if self.password is None:
            return []
        return [{"name": PASSWORD_ENV, "valueFrom": {"secretKeyRef": {"name": self.secret, "key": PASSWORD}}}]


def pod_sign(path: str | None, form: str | None, secret: str) -> PodSign | None:
    """``--sign-key PATH`` loaded as serve loads it (its password: ``$COSIGN_PASSWORD`` now),
    carried in the Secret ``secret``; None without a key."""
    if path is None:
        if form is not None:
            raise UsageError("--sign-form goes with --sign-key")
        return None
    if form is not None and form not in FORMS:
        raise UsageError(f"--sign-form {form}: one of {', '.join(FORMS)}")
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
    return PodSign(secret, data, password, public_pem(key).decode(), form)
