"""TLS trust as Docker, podman and skopeo have it (issue 18): the system trust store,
certs.d per host (CA and client certificate), on a real TLS docker-registry with a CA made here."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path


def ocibridge(*args: str, env: dict[str, str]) -> tuple[int, str, str]:
    proc = subprocess.run([sys.executable, "-m", "ocibridge", *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **env})
    return proc.returncode, proc.stdout, proc.stderr


def _model(tmp_path: Path) -> Path:
    model = tmp_path / "model"
    if model.is_dir():
        return model
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "tiny"}')
    (model / "weights.bin").write_bytes(os.urandom(4096))
    return model


def _isolated(tmp_path: Path, **extra: str) -> dict[str, str]:
    """No certs.d, no docker config, nothing from this machine but what the test sets."""
    return {"OCIBRIDGE_CERTS_DIRS": str(tmp_path / "no-certs.d"), "DOCKER_CONFIG": str(tmp_path / "docker"),
            "HOME": str(tmp_path / "home"), **extra}


def test_a_ca_in_certs_d_is_trusted_without_flags(tls_registry, tmp_path) -> None:
    certs_d = tmp_path / "certs.d"
    (certs_d / tls_registry.host).mkdir(parents=True)
    shutil.copy(tls_registry.ca_file, certs_d / tls_registry.host / "ca.crt")
    ref = f"{tls_registry.host}/trust/{uuid.uuid4().hex[:8]}:v1"
    env = _isolated(tmp_path, OCIBRIDGE_CERTS_DIRS=f"{tmp_path / 'elsewhere'}{os.pathsep}{certs_d}")
    code, out, err = ocibridge("push", str(_model(tmp_path)), ref, "-q", env=env)
    assert code == 0, err
    code, out, err = ocibridge("resolve", ref, env=env)
    assert code == 0 and out.startswith("sha256:"), err


def test_the_system_trust_store_is_used(tls_registry, tmp_path) -> None:
    """OpenSSL's default bundle is what update-ca-certificates writes; SSL_CERT_FILE points the
    system store at the test CA, which certifi alone would refuse. The settings file says the
    loopback registry speaks TLS (plain_http = false), as no CA flag is given."""
    ref = f"{tls_registry.host}/trust/{uuid.uuid4().hex[:8]}:v1"
    conf = tmp_path / "registries.toml"
    conf.write_text(f'[registry."{tls_registry.host}"]\nplain_http = false\n')
    env = _isolated(tmp_path, OCIBRIDGE_REGISTRIES_CONF=str(conf))
    code, _, err = ocibridge("push", str(_model(tmp_path)), ref, "-q", env=env)
    assert code == 1 and "certificate" in err.lower(), err  # certifi and the real system store: no
    code, _, err = ocibridge("push", str(_model(tmp_path)), ref, "-q",
                             env={**env, "SSL_CERT_FILE": str(tls_registry.ca_file)})
    assert code == 0, err


def test_login_remembers_the_ca_file(tls_registry, tmp_path) -> None:
    """`login --ca-file` writes the host's settings: later commands reach it without the flag."""
    conf = tmp_path / "registries.toml"
    env = _isolated(tmp_path, OCIBRIDGE_REGISTRIES_CONF=str(conf))
    ref = f"{tls_registry.host}/trust/{uuid.uuid4().hex[:8]}:v1"
    code, _, err = ocibridge("push", str(_model(tmp_path)), ref, "-q", env=env)
    assert code == 1
    code, out, err = ocibridge("login", tls_registry.host, "-u", "anyone", "-p", "x",
                               "--ca-file", str(tls_registry.ca_file), "--json", env=env)
    assert code == 0, err  # an open registry accepts any credentials at /v2/
    assert str(tls_registry.ca_file) in conf.read_text()
    code, _, err = ocibridge("push", str(_model(tmp_path)), ref, "-q", env=env)
    assert code == 0, err


def test_mtls_client_certificate_from_certs_d(mtls_registry, tmp_path) -> None:
    tls = mtls_registry.tls_files
    host_dir = tmp_path / "certs.d" / mtls_registry.host
    host_dir.mkdir(parents=True)
    shutil.copy(tls.ca_file, host_dir / "ca.crt")
    ref = f"{mtls_registry.host}/mtls/{uuid.uuid4().hex[:8]}:v1"
    env = _isolated(tmp_path, OCIBRIDGE_CERTS_DIRS=str(tmp_path / "certs.d"))
    code, _, err = ocibridge("push", str(_model(tmp_path)), ref, "-q", env=env)
    assert code == 1  # the CA alone is not enough: the registry wants a client certificate
    shutil.copy(tls.client_cert, host_dir / "client.cert")
    shutil.copy(tls.client_key, host_dir / "client.key")
    code, _, err = ocibridge("push", str(_model(tmp_path)), ref, "-q", env=env)
    assert code == 0, err
    (host_dir / "client.key").unlink()
    code, _, err = ocibridge("resolve", ref, env=env)
    assert code == 1 and "client certificate without its key client.key" in err


def test_debug_logs_each_request_with_secrets_redacted(registry, tmp_path) -> None:
    from ocibridge.stores.registry.debuglog import redact

    ref = f"{registry.host}/debug/{uuid.uuid4().hex[:8]}:v1"
    code, _, err = ocibridge("--debug", "push", str(_model(tmp_path)), ref, "-q", env=_isolated(tmp_path))
    assert code == 0, err
    requests = [line for line in err.splitlines() if line.startswith("ocibridge: debug: HTTP Request: ")]
    assert any(" PUT " in line and "/manifests/v1" in line for line in requests), err
    url = "https://s3.example/b?X-Amz-Credential=AKIA%2F1&X-Amz-Signature=abc123&partNumber=2"
    assert redact(url) == ("https://s3.example/b?X-Amz-Credential=REDACTED&X-Amz-Signature=REDACTED"
                           "&partNumber=2")
    assert redact("https://user:pass@host/v2/") == "https://REDACTED@host/v2/"


def test_reads_come_from_a_mirror_listed_in_the_settings_file(registry, registry2, tmp_path) -> None:
    """registries.toml lists registry2 as a mirror of registry: a pull of a repository only the
    mirror holds is served by it; one only the registry holds falls back to the registry; a
    push goes to the registry itself."""
    conf = tmp_path / "registries.toml"
    conf.write_text(f'[registry."{registry.host}"]\nmirrors = ["{registry2.host}"]\n')
    env = _isolated(tmp_path, OCIBRIDGE_REGISTRIES_CONF=str(conf))
    repo = f"mirrored/{uuid.uuid4().hex[:8]}"
    model = _model(tmp_path)
    assert ocibridge("push", str(model), f"{registry2.host}/{repo}:v1", "-q", env=env)[0] == 0
    code, _, err = ocibridge("pull", f"{registry.host}/{repo}:v1", str(tmp_path / "from-mirror"), "-q", env=env)
    assert code == 0, err
    assert (tmp_path / "from-mirror" / "weights.bin").read_bytes() == (model / "weights.bin").read_bytes()
    code, _, err = ocibridge("push", str(model), f"{registry.host}/{repo}:only-here", "-q", env=env)
    assert code == 0, err
    code, out, err = ocibridge("resolve", f"{registry2.host}/{repo}:only-here", env=env)
    assert code == 1  # the push went to the registry, not to its mirror
    code, _, err = ocibridge("pull", f"{registry.host}/{repo}:only-here", str(tmp_path / "fallback"), "-q", env=env)
    assert code == 0, err


def test_debug_never_prints_basic_or_bearer_credentials(auth_registry, token_registry, tmp_path) -> None:
    """The request log against registries that want credentials: the password, the Basic
    header's base64 and the bearer flow's secrets never reach stderr."""
    import base64

    user, pw = auth_registry.username, auth_registry.password
    env = _isolated(tmp_path)
    ref = f"{auth_registry.host}/debug/{uuid.uuid4().hex[:8]}:v1"
    code, _, err = ocibridge("--debug", "push", str(_model(tmp_path)), ref, "-q", "-u", user, "-p", pw, env=env)
    assert code == 0, err
    assert "ocibridge: debug: HTTP Request: " in err and '401 Unauthorized' in err
    assert pw not in err and base64.b64encode(f"{user}:{pw}".encode()).decode() not in err
    ref = f"{token_registry.host}/team/debug-{uuid.uuid4().hex[:8]}:v1"
    code, _, err = ocibridge("--debug", "push", str(_model(tmp_path)), ref, "-q", "-u", "alice",
                             "-p", token_registry.password, env=env)
    assert code == 0, err
    assert "scope=repository" in err  # the token server request is in the log
    assert token_registry.password not in err and "Bearer ey" not in err
