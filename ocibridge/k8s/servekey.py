"""A private key of serve's on the pods (``--sign-key``, ``--attest-key``), one way for each:
either read and loaded here as serve loads it (a bad key or a wrong password, from the role's
variable, is one error line, before anything is printed) and printed in a Secret ``NAME-ROLE`` (never a
ConfigMap) with an encrypted key's password; or a Secret the cluster already has, named by
``--ROLE-secret`` (sealed-secrets, external-secrets, Vault keep keys out of Git), when nothing
secret is printed. Either way the Secret's key file is mounted read-only in a directory of its
own and named to serve by its mounted path, and its ``password`` reaches serve as the role's
variable (``$COSIGN_PASSWORD``, ``$OCIBRIDGE_ATTEST_PASSWORD``) through a secretKeyRef, never in
the args."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

from ocibridge.errors import UsageError

#: the Secret's key of an encrypted key's password
PASSWORD = "password"
#: owner root, group the pod's fsGroup (the image's user): nobody else reads the key
KEY_FILE_MODE = 0o440


@dataclass(frozen=True)
class KeyRole:
    """Which of serve's keys: ``role`` is serve's flag without its dashes (``sign-key``), the
    name of the volume and the printed Secret's suffix; ``file`` the Secret's key of the key file;
    ``password_env`` the variable serve reads its password from (else ``$COSIGN_PASSWORD``)."""

    role: str
    file: str
    password_env: str

    @property
    def flag(self) -> str:
        return f"--{self.role}"

    @property
    def directory(self) -> str:
        return f"/etc/ocibridge-{self.role}"

    @property
    def path(self) -> str:
        return f"{self.directory}/{self.file}"

    def warning(self) -> str:
        return (f"warning: the output holds the private key of {self.flag} (a Secret is only base64, not "
                "encrypted): do not commit it or paste it anywhere public")


@dataclass(frozen=True)
class PodKey:
    """One key on the pods: the Secret ``secret`` holding the key file as read (``key``) and, for
    an encrypted key, its ``password``; ``public``: the key's public half (PEM). ``key`` None: the
    Secret is already in the cluster, its key and public half unknown here."""

    kind: KeyRole
    secret: str
    key: bytes | None = field(repr=False)
    password: str | None = field(repr=False)
    public: str | None

    def args(self) -> list[str]:
        return [self.kind.flag, self.kind.path]

    def warnings(self) -> list[str]:
        """What the output then holds: the private key, unless the Secret is only named."""
        return [] if self.key is None else [self.kind.warning()]

    def secret_document(self, meta: dict[str, Any]) -> dict[str, Any] | None:
        """The Secret to print; None when it is already in the cluster."""
        if self.key is None:
            return None
        data = {self.kind.file: self.key, **({PASSWORD: self.password.encode()} if self.password else {})}
        return {"apiVersion": "v1", "kind": "Secret", "metadata": {**meta, "name": self.secret}, "type": "Opaque",
                "data": {name: base64.b64encode(value).decode() for name, value in data.items()}}

    def volume(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The key file alone as a read-only volume (the password goes by environment), and its mount."""
        file = self.kind.file
        return ({"name": self.kind.role, "secret": {"secretName": self.secret, "defaultMode": KEY_FILE_MODE,
                                                    "items": [{"key": file, "path": file}]}},
                {"name": self.kind.role, "mountPath": self.kind.directory, "readOnly": True})

    def env(self) -> list[dict[str, Any]]:
        """The role's password variable from the Secret: when the key printed is encrypted, or,
        from a named Secret, when it holds a ``password`` (optional: a plain key's Secret has none)."""
        ref: dict[str, Any] = {"name": self.secret, "key": PASSWORD}
        if self.key is None:
            ref["optional"] = True
        elif self.password is None:
            return []
        return [{"name": self.kind.password_env, "valueFrom": {"secretKeyRef": ref}}]

    def plain(self) -> bool:
        """A key printed here that has no password (a named Secret's is not known)."""
        return self.key is not None and self.password is None


def pod_key(kind: KeyRole, path: str | None, existing: str | None, name: str) -> PodKey | None:
    """``--ROLE PATH`` loaded as serve loads it (its password: the role's variable now), carried
    in a Secret ``NAME-ROLE``, or ``--ROLE-secret EXISTING``, a Secret the cluster has; None
    without either."""
    if path is not None and existing is not None:
        raise UsageError(f"{kind.flag} and {kind.flag}-secret: one or the other ({kind.flag}-secret names a "
                         f"Secret the cluster already has, {kind.flag} prints one)")
    if existing is not None:
        from ocibridge.stores.registry.pull_secret import check_secret_name

        check_secret_name(f"{kind.flag}-secret", existing)
        return PodKey(kind, existing, None, None, None)
    if path is None:
        return None
    from ocibridge.core.limits import MAX_SMALL_INPUT, read_small_file
    from ocibridge.errors import SignatureError
    from ocibridge.signing import env_password
    from ocibridge.signing.keys import private_key_from_pem, public_pem

    data = read_small_file(path, MAX_SMALL_INPUT, kind.flag, UsageError)
    try:
        key = private_key_from_pem(data, f"{kind.flag} {path}", password_env=kind.password_env)
    except SignatureError as e:
        raise UsageError(str(e)) from None
    # loaded with a password that is not empty: the key is encrypted (a plain one refuses a password)
    password = env_password(kind.password_env)[0] or None
    return PodKey(kind, f"{name}-{kind.role}", data, password, public_pem(key).decode())
