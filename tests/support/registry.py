"""Start a real distribution registry (Debian's `docker-registry`) for tests.

A registry here is anything with `.host`, `.url` and `.stop()`: a `RegistryProcess` we run on a
free loopback port, or an `ExternalRegistry` named by `OCIBRIDGE_TEST_REGISTRY`.
"""

from __future__ import annotations

import http.client
import os
import secrets
import shutil
import socket
import ssl
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from .certs import TLSFiles

REGISTRY_BINARY = "docker-registry"
INSTALL_HINT = (
    "the distribution registry binary `docker-registry` is not on PATH; install it with "
    "`apt-get install -y docker-registry` (Debian/Ubuntu), or point the tests at a running "
    "registry with OCIBRIDGE_TEST_REGISTRY=host:port"
)
ENV_EXTERNAL = "OCIBRIDGE_TEST_REGISTRY"
ENV_EXTERNAL2 = "OCIBRIDGE_TEST_REGISTRY2"


class RegistryUnavailable(RuntimeError):
    """No registry can be provided; the message says how to get one."""


def registry_binary() -> str:
    """Path of `docker-registry`, or RegistryUnavailable with the install hint."""
    path = shutil.which(REGISTRY_BINARY)
    if path is None:
        raise RegistryUnavailable(INSTALL_HINT)
    return path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bcrypt_htpasswd_line(username: str, password: str) -> str:
    """One htpasswd line; distribution accepts only bcrypt hashes."""
    import bcrypt  # test dependency, imported here so plain registries don't need it

    hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=4)).decode()
    return f"{username}:{hashed}\n"


@dataclass(frozen=True)
class TokenAuth:
    """What the registry needs to trust a token server."""

    realm: str
    service: str
    issuer: str
    rootcertbundle: Path


@dataclass
class ExternalRegistry:
    """A registry somebody else runs (OCIBRIDGE_TEST_REGISTRY=host:port or a URL)."""

    host: str
    url: str
    username: str | None = None
    password: str | None = None
    ca_file: Path | None = None

    @classmethod
    def from_env_value(cls, value: str) -> ExternalRegistry:
        value = value.strip().rstrip("/")
        if "://" in value:
            scheme, _, host = value.partition("://")
        else:
            scheme, host = "http", value
        return cls(host=host, url=f"{scheme}://{host}")

    @property
    def tls(self) -> bool:
        return self.url.startswith("https://")

    def stop(self) -> None:
        """Nothing to stop: we don't own it."""


class RegistryProcess:
    """A `docker-registry serve` child process with its own storage dir, config and log file."""

    def __init__(
        self,
        workdir: Path,
        *,
        htpasswd: tuple[str, str] | None = None,
        token: TokenAuth | None = None,
        tls: TLSFiles | None = None,
        require_client_cert: bool = False,
        log_level: str = "info",
        startup_timeout: float = 15.0,
        proxy_remote: str | None = None,
        redirect_to: str | None = None,
    ) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.storage = self.workdir / "storage"
        self.storage.mkdir(exist_ok=True)
        self.config_file = self.workdir / "config.yml"
        self.log_file = self.workdir / "registry.log"
        self.username, self.password = htpasswd if htpasswd else (None, None)
        self.token = token
        self.tls_files = tls
        self.require_client_cert = require_client_cert
        self.ca_file: Path | None = tls.ca_file if tls else None
        self.cert_dir: Path | None = tls.cert_dir if tls else None
        self._log_level = log_level
        self.proxy_remote = proxy_remote  # a pull-through cache of that registry's URL
        self.redirect_to = redirect_to  # blob GETs answered with a 307 to this base URL + the storage path
        self._proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self._start(startup_timeout)

    # -- public ---------------------------------------------------------------------------
    @property
    def tls(self) -> bool:
        return self.tls_files is not None

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_file.read_text(errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)

    def __enter__(self) -> RegistryProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"RegistryProcess({self.url}, workdir={str(self.workdir)!r})"

    # -- start-up -------------------------------------------------------------------------
    def _config(self) -> dict[str, object]:
        http_cfg: dict[str, object] = {
            "addr": f"127.0.0.1:{self.port}",
            "secret": secrets.token_hex(16),
            "headers": {"X-Content-Type-Options": ["nosniff"]},
        }
        if self.tls_files:
            tls_cfg: dict[str, object] = {
                "certificate": str(self.tls_files.cert_file),
                "key": str(self.tls_files.key_file),
            }
            if self.require_client_cert:
                tls_cfg["clientcas"] = [str(self.tls_files.ca_file)]
            http_cfg["tls"] = tls_cfg
        config: dict[str, object] = {
            "version": 0.1,
            "log": {"level": self._log_level, "fields": {"service": "registry"}},
            "storage": {
                "filesystem": {"rootdirectory": str(self.storage)},
                "delete": {"enabled": True},
                "maintenance": {"uploadpurging": {"enabled": False}},
            },
            "http": http_cfg,
            "health": {"storagedriver": {"enabled": False}},
        }
        if self.proxy_remote is not None:  # distribution as a pull-through cache (read-only)
            config["proxy"] = {"remoteurl": self.proxy_remote}
        if self.redirect_to is not None:  # distribution's redirect middleware, as in front of object storage
            config["middleware"] = {"storage": [{"name": "redirect", "options": {"baseurl": self.redirect_to}}]}
        if self.username is not None and self.password is not None:
            htpasswd_file = self.workdir / "htpasswd"
            htpasswd_file.write_text(bcrypt_htpasswd_line(self.username, self.password))
            config["auth"] = {
                "htpasswd": {"realm": "ocibridge-test", "path": str(htpasswd_file)}
            }
        elif self.token is not None:
            config["auth"] = {
                "token": {
                    "realm": self.token.realm,
                    "service": self.token.service,
                    "issuer": self.token.issuer,
                    "rootcertbundle": str(self.token.rootcertbundle),
                }
            }
        return config

    def _start(self, timeout: float) -> None:
        binary = registry_binary()
        last_error = ""
        for _attempt in range(3):  # a free port can be taken between probe and bind
            self.port = free_port()
            self.config_file.write_text(yaml.safe_dump(self._config(), sort_keys=False))
            with self.log_file.open("ab") as log:
                self._proc = subprocess.Popen(
                    [binary, "serve", str(self.config_file)],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    cwd=self.workdir,
                )
            if self._wait_ready(timeout):
                return
            last_error = self.log_tail()
            self.stop()
        raise RegistryUnavailable(
            f"docker-registry did not become ready (log {self.log_file}):\n{last_error}"
        )

    def _wait_ready(self, timeout: float) -> bool:
        """Poll GET /v2/ until the registry answers anything HTTP (200, or 401 with auth)."""
        deadline = time.monotonic() + timeout
        context = None
        if self.tls_files:
            context = ssl.create_default_context(cafile=str(self.tls_files.ca_file))
            if self.require_client_cert:
                context.load_cert_chain(str(self.tls_files.client_cert), str(self.tls_files.client_key))
        while time.monotonic() < deadline:
            if self._proc is None or self._proc.poll() is not None:
                return False
            conn: http.client.HTTPConnection
            if context is not None:
                conn = http.client.HTTPSConnection("127.0.0.1", self.port, timeout=2,
                                                   context=context)
            else:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
            try:
                conn.request("GET", "/v2/")
                status = conn.getresponse().status
                if status in (200, 401):
                    return True
            except (OSError, http.client.HTTPException):
                pass
            finally:
                conn.close()
            time.sleep(0.02)
        return False


def external_registry(env: str = ENV_EXTERNAL) -> ExternalRegistry | None:
    """The registry named by the environment variable `env`, if set."""
    value = os.environ.get(env, "").strip()
    return ExternalRegistry.from_env_value(value) if value else None


def garbage_collect(registry: RegistryProcess) -> str:
    """Stop ``registry`` and run its own ``garbage-collect --delete-untagged`` on its storage, as an
    operator's maintenance does; what it printed (the caller starts it again: the same port or not)."""
    registry.stop()
    done = subprocess.run([registry_binary(), "garbage-collect", "--delete-untagged", str(registry.config_file)],
                          capture_output=True, text=True, timeout=300)
    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    return said
