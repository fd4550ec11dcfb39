"""Failures no retry can mend end the command at once, as one line with the flag that fixes
them; Retry-After is honoured on upload requests too (real registry, fault proxy)."""

from __future__ import annotations

import io
import socket
import time

import pytest
from support.certs import make_tls_files
from support.faultproxy import too_many_requests

from ocibridge.cli import main
from ocibridge.oci.models import Descriptor
from ocibridge.stores.registry import open_repository
from ocibridge.stores.registry.unreachable import RegistryUnreachable


def _one_error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("ocibridge: error: "), err
    return err


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_connection_refused_is_not_retried(capsys):
    host = f"127.0.0.1:{_closed_port()}"
    store = open_repository(host=host, repository="x/y")
    with store, pytest.raises(RegistryUnreachable, match="connection refused"):
        store.tags()
    assert store.stats.retries == 0 and store.stats.requests == 1
    assert main(["tags", f"{host}/x/y"]) == 1
    assert "connection refused" in _one_error(capsys)


def test_unresolvable_host_is_not_retried(capsys):
    assert main(["tags", "no-such-registry.invalid:5000/x/y"]) == 1
    assert "cannot resolve the host name" in _one_error(capsys)


def test_unknown_ca_hints_at_ca_file(tls_registry, tmp_path, capsys):
    other = make_tls_files(tmp_path / "other-pki")  # a CA that did not sign the registry
    store = open_repository(host=tls_registry.host, repository="x/y", ca_file=str(other.ca_file))
    with store, pytest.raises(RegistryUnreachable):
        store.tags()
    assert store.stats.retries == 0
    assert main(["tags", f"{tls_registry.host}/x/y", "--ca-file", str(other.ca_file)]) == 1
    err = _one_error(capsys)
    assert "certificate not trusted" in err and "--ca-file" in err


def test_https_to_a_plain_registry_hints_at_plain_http(registry, tls_registry, capsys):
    # a CA file turns TLS on for a loopback registry; this one speaks plain HTTP
    assert main(["tags", f"{registry.host}/x/y", "--ca-file", str(tls_registry.ca_file)]) == 1
    assert "--plain-http" in _one_error(capsys)


def test_retry_after_is_honoured_on_upload_put(registry, fault_proxy, unique_repo):
    data = b"upload body" * 1000
    desc = Descriptor.for_bytes("application/octet-stream", data)
    fault_proxy.add("PUT", r"/blobs/uploads/", too_many_requests(retry_after=1), times=1)
    store = open_repository(host=fault_proxy.host, repository=unique_repo)
    with store:
        start = time.monotonic()
        store.push_blob(desc, io.BytesIO(data))
        elapsed = time.monotonic() - start
        assert store.exists(desc)
    puts = fault_proxy.requests_matching("PUT", r"/blobs/uploads/")
    assert [p.status for p in puts] == [429, 201]
    assert elapsed >= 1.0  # the registry asked for one second; backoff alone waits ~0.25 s
