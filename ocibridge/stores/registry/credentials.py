"""Registry credential stores: Docker's config, credential helpers, containers' auth.json.

Lookup order for a host, as Docker does: ``credHelpers[host]``, then ``auths[host]``, then the
``credsStore`` helper. Helpers are ``docker-credential-<name>`` programs speaking JSON on
stdin/stdout (``get``, ``store``, ``erase``). Docker Hub's key is ``https://index.docker.io/v1/``.
The client reaches them only through :func:`credential_function`; ``login`` (login.py) checks
credentials with a client and then stores them here.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from pathlib import Path
from typing import Any

from ocibridge.core.fsutil import atomic_write_bytes
from ocibridge.core.limits import MAX_SMALL_INPUT, read_at_most
from ocibridge.errors import OcibridgeError
from ocibridge.stores.registry.options import CredentialFunc, Credentials, RegistryOptions

__all__ = ["Credentials", "credential_function", "get_credentials", "logout", "store_credentials"]

DOCKER_HUB_KEY = "https://index.docker.io/v1/"
HELPER_TIMEOUT = 30.0
IDENTITY_TOKEN_USER = "<token>"


def config_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """``DOCKER_CONFIG`` or ``~/.docker`` (the directory holding config.json)."""
    if explicit:
        return Path(explicit)
    env = os.environ.get("DOCKER_CONFIG")
    return Path(env) if env else Path.home() / ".docker"


def config_key(host: str) -> str:
    """The key a host's entry has in ``auths`` and in helpers."""
    if host in ("docker.io", "index.docker.io", "registry-1.docker.io"):
        return DOCKER_HUB_KEY
    return host


def load_config(directory: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    return _load_auth_file(config_dir(directory) / "config.json", "docker config")


def _auth_entry(auths: dict[str, Any], host: str) -> dict[str, Any] | None:
    """An ``auths`` entry for the host, accepting the URL forms older clients wrote."""
    key = config_key(host)
    entry = auths.get(key)
    if isinstance(entry, dict):
        return entry
    for name, entry in auths.items():
        if not isinstance(entry, dict):
            continue
        bare = name.split("://", 1)[-1].split("/", 1)[0]
        if bare == key or (key == DOCKER_HUB_KEY and bare in ("index.docker.io", "docker.io")):
            return entry
    return None


def _decode_entry(entry: dict[str, Any], host: str) -> Credentials | None:
    username, password = entry.get("username") or "", entry.get("password") or ""
    if entry.get("auth"):
        try:
            raw = base64.b64decode(entry["auth"], validate=False).decode()
        except (binascii.Error, UnicodeDecodeError):
            raise OcibridgeError(f"docker config: invalid auth for {host}") from None
        username, sep, password = raw.partition(":")
        if not sep:
            raise OcibridgeError(f"docker config: invalid auth for {host} (no ':')")
    token = entry.get("identitytoken") or None
    if not username and not token:
        return None
    return Credentials(username, password, token)


def run_helper(name: str, action: str, payload: str) -> str:
    """Run ``docker-credential-<name> <action>`` with ``payload`` on stdin; its stdout."""
    import subprocess  # here: every registry command reads credentials, few run a helper (~1.5 ms)

    program = f"docker-credential-{name}"
    try:
        done = subprocess.run([program, action], input=payload.encode(), capture_output=True,
                              timeout=HELPER_TIMEOUT, check=False)
    except FileNotFoundError:
        raise OcibridgeError(f"credential helper {program} not found on PATH") from None
    except subprocess.TimeoutExpired:
        raise OcibridgeError(f"credential helper {program} {action} timed out") from None
    out = done.stdout.decode("utf-8", "replace")
    if done.returncode != 0:
        message = (out or done.stderr.decode("utf-8", "replace")).strip()
        if action == "get" and "credentials not found" in message.lower():
            raise LookupError(message)
        raise OcibridgeError(f"credential helper {program} {action} failed: {message[:200]}")
    return out


def _from_helper(name: str, host: str) -> Credentials | None:
    try:
        out = run_helper(name, "get", config_key(host))
    except LookupError:
        return None
    try:
        data = json.loads(out)
        username, secret = data.get("Username") or "", data.get("Secret") or ""
    except (ValueError, AttributeError):
        raise OcibridgeError(f"credential helper docker-credential-{name}: bad output") from None
    if not secret:
        return None
    if username == IDENTITY_TOKEN_USER:
        return Credentials(username, "", secret)
    return Credentials(username, secret)


def containers_auth_files() -> list[Path]:
    """Where podman, skopeo and buildah keep credentials (containers-auth.json(5)), in their
    order: ``$REGISTRY_AUTH_FILE``, ``$XDG_RUNTIME_DIR/containers/auth.json``,
    ``~/.config/containers/auth.json``."""
    files = []
    if os.environ.get("REGISTRY_AUTH_FILE"):
        files.append(Path(os.environ["REGISTRY_AUTH_FILE"]))
    if os.environ.get("XDG_RUNTIME_DIR"):
        files.append(Path(os.environ["XDG_RUNTIME_DIR"]) / "containers" / "auth.json")
    files.append(Path.home() / ".config" / "containers" / "auth.json")
    return files


def _load_auth_file(path: Path, what: str = "auth file") -> dict[str, Any]:
    """An auth file in Docker's or containers' format (both: ``auths``, ``credHelpers``)."""
    try:
        raw = read_at_most(path, MAX_SMALL_INPUT)
        if len(raw) > MAX_SMALL_INPUT:
            raise ValueError(f"larger than {MAX_SMALL_INPUT} bytes")
        data = json.loads(raw)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        raise OcibridgeError(f"cannot read {what} {path}: {e}") from None
    if not isinstance(data, dict):
        raise OcibridgeError(f"{what} {path} is not a JSON object")
    _check_fields(data, f"{what} {path}")
    return data


def _check_fields(data: dict[str, Any], where: str) -> None:
    """The fields the lookup reads, of the types Docker writes (null is taken as absent): a
    wrong one is a line naming the file and the field, not a TypeError where it is read."""
    def refuse(field: str, kind: str) -> OcibridgeError:
        return OcibridgeError(f"{where}: {field} is not {kind}")

    for field in ("auths", "credHelpers"):
        if not isinstance(data.get(field) or {}, dict):
            raise refuse(field, "a JSON object")
    if not isinstance(data.get("credsStore") or "", str):
        raise refuse("credsStore", "a string")
    for host, helper in (data.get("credHelpers") or {}).items():
        if not isinstance(helper or "", str):
            raise refuse(f"credHelpers.{host}", "a string")
    for host, entry in (data.get("auths") or {}).items():
        if not isinstance(entry or {}, dict):
            raise refuse(f"auths.{host}", "a JSON object")
        for key in ("auth", "username", "password", "identitytoken"):
            if not isinstance((entry or {}).get(key) or "", str):
                raise refuse(f"auths.{host}.{key}", "a string")


def get_credentials(host: str, directory: str | os.PathLike[str] | None = None,
                    authfile: str | os.PathLike[str] | None = None) -> Credentials | None:
    """Credentials for ``host``, or None (anonymous).

    Looked up in ``authfile`` when given (``--authfile``), then the docker config, then
    containers' auth files (so a ``podman login`` or ``skopeo login`` is honoured too).
    """
    configs = []
    if authfile:
        path = Path(authfile)
        if not path.is_file():
            raise OcibridgeError(f"auth file {path} not found")
        configs.append(_load_auth_file(path))
    configs.append(load_config(directory))
    configs.extend(_load_auth_file(path) for path in containers_auth_files())
    for config in configs:
        found = _lookup(config, host)
        if found is not None:
            return found
    return None


def _lookup(config: dict[str, Any], host: str) -> Credentials | None:
    """Credentials for ``host`` in one loaded config, Docker's order: helper, auths, store."""
    helpers = config.get("credHelpers") or {}
    key = config_key(host)
    helper = helpers.get(key) or helpers.get(host)
    if helper:
        return _from_helper(helper, host)
    entry = _auth_entry(config.get("auths") or {}, host)
    if entry is not None:
        found = _decode_entry(entry, host)
        if found is not None:
            return found
    store = config.get("credsStore")
    if store:
        return _from_helper(store, host)
    return None


def _helper_for(config: dict[str, Any], host: str) -> str | None:
    helpers = config.get("credHelpers") or {}
    return helpers.get(config_key(host)) or helpers.get(host) or config.get("credsStore")


def _save_config(config: dict[str, Any], directory: str | os.PathLike[str] | None) -> Path:
    path = config_dir(directory) / "config.json"
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    atomic_write_bytes(path, (json.dumps(config, indent="\t") + "\n").encode(), mode=0o600)
    return path


def store_credentials(host: str, username: str, password: str,
                      directory: str | os.PathLike[str] | None = None) -> Path:
    """Save credentials: in the host's helper if one is configured, else base64 in ``auths``."""
    config = load_config(directory)
    key = config_key(host)
    helper = _helper_for(config, host)
    if helper:
        payload = json.dumps({"ServerURL": key, "Username": username, "Secret": password})
        run_helper(helper, "store", payload)
        auths = config.setdefault("auths", {})
        if key not in auths:  # Docker records the host with an empty entry
            auths[key] = {}
    else:
        token = base64.b64encode(f"{username}:{password}".encode()).decode()
        entry = dict((config.setdefault("auths", {}).get(key)) or {})
        entry.pop("identitytoken", None)
        entry.update({"auth": token})
        config["auths"][key] = entry
    return _save_config(config, directory)


def logout(host: str, directory: str | os.PathLike[str] | None = None) -> bool:
    """Remove stored credentials for ``host``; False when there were none."""
    config = load_config(directory)
    key = config_key(host)
    removed = False
    helper = _helper_for(config, host)
    if helper:
        try:
            run_helper(helper, "erase", key)
            removed = True
        except OcibridgeError:
            removed = False
    auths = config.get("auths") or {}
    for name in [n for n in auths if n == key or n.split("://", 1)[-1].rstrip("/") == key]:
        del auths[name]
        removed = True
    if removed:
        _save_config(config, directory)
    return removed


def credential_function(options: RegistryOptions) -> CredentialFunc:
    """host -> credentials for a client: ``-u``/``-p`` when given, else what the
    ``--authfile``, the docker config or containers' auth files hold for the host."""
    if options.username:
        given = Credentials(options.username, options.password or "")
        return lambda host: given
    docker_config, authfile = options.docker_config, options.authfile
    return lambda host: get_credentials(host, docker_config, authfile)
