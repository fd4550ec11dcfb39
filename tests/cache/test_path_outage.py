"""``ocibridge path`` through a registry outage (issue 42): a registry that cannot be reached
while the model cache holds the complete snapshot the reference last resolved to gives that
snapshot with one warning line dating the resolution; an answer (401, 403, 404), an
incomplete snapshot or ``--verify-key`` still fail; ``--offline`` is unchanged."""

from __future__ import annotations

import socket
import ssl

import pytest
from support.entry_probe import run_entry
from support.faultproxy import FaultProxy, status
from test_model_cache import push_version

import ocibridge
from ocibridge.cache.modelcache import ModelCache, remove_tree
from ocibridge.errors import NotFound, RegistryError
from ocibridge.stores.registry.unreachable import classify, is_outage


def cli(*args: str) -> tuple[int, str, str]:
    code, out, err, _ = run_entry(args, ())
    return code, out, err


@pytest.fixture
def warm(tmp_path, capsys, registry, unique_repo):
    """A model pushed, and ``path`` resolved once through a proxy of our own (the registry as
    this reference knows it): (proxy, ref, snapshot)."""
    push_version(tmp_path, f"{registry.host}/{unique_repo}:v1", "one")
    proxy = FaultProxy(registry)
    ref = f"{proxy.host}/{unique_repo}:v1"
    snapshot = ocibridge.path(ref)
    capsys.readouterr()
    try:
        yield proxy, ref, snapshot
    finally:
        proxy.stop()


def test_a_stopped_registry_leaves_a_warm_path_answered_with_one_warning(warm, caplog):
    proxy, ref, snapshot = warm
    assert cli("path", ref) == (0, str(snapshot), "")  # up: answered, no warning
    proxy.stop()  # the registry this reference names is gone: its port refuses connections
    code, out, err = cli("path", ref)
    assert (code, out) == (0, str(snapshot))
    assert err.count("\n") == 0 and err.startswith("ocibridge: warning: registry ")
    assert "connection refused" in err and "as last resolved at " in err and " UTC " in err
    code, out, err = cli("path", ref, "--json")
    assert code == 0 and str(snapshot) in out and err.startswith("ocibridge: warning: ")
    from ocibridge.core import notices

    heard: list[str] = []
    with notices.heard_by(heard.append):  # the API: the same answer, the warning a notice (a caller's sink;
        assert ocibridge.path(ref) == snapshot  # the logger's handlers are whatever earlier tests left)
    assert any("as last resolved" in text for text in heard), heard
    assert cli("path", ref, "--offline") == (0, str(snapshot), "")  # unchanged: no warning


@pytest.mark.parametrize("code", [401, 403, 404])
def test_a_registry_that_answers_is_believed(warm, code):
    proxy, ref, _ = warm
    proxy.add(None, r"/manifests/", status(code), times=None)
    exit_code, out, err = cli("path", ref)
    assert (exit_code, out) == (1, "") and err.startswith("ocibridge: error: ") and "warning" not in err
    with pytest.raises(NotFound if code == 404 else RegistryError):
        ocibridge.path(ref)


def test_an_incomplete_snapshot_is_no_answer(warm):
    proxy, ref, snapshot = warm
    proxy.stop()
    code, out, err = cli("path", ref, "--include", "w1.bin")  # a selection never built
    assert (code, out) == (1, "") and "connection refused" in err and "warning" not in err
    remove_tree(snapshot)  # as a prune leaves it: the record is there, its snapshot is not
    code, out, err = cli("path", ref)
    assert (code, out) == (1, "") and err.startswith("ocibridge: error: ") and "warning" not in err
    assert ModelCache().snapshot_dirs() == []


def test_verify_key_is_never_answered_through_an_outage(warm, tmp_path):
    from signing_keys import key_pair

    proxy, ref, _ = warm
    _, public = key_pair(tmp_path / "k")
    proxy.stop()
    code, out, err = cli("path", ref, "--verify-key", str(public))
    assert (code, out) == (1, "") and "warning" not in err


def test_what_counts_as_an_outage():
    def chained(error: BaseException) -> BaseException:
        wrapper = OSError("connect failed")
        wrapper.__cause__ = error
        return wrapper

    url = "https://r.example/v2/"
    refused = classify("r.example", url, chained(ConnectionRefusedError(111, "refused")))
    no_name = classify("r.example", url, chained(socket.gaierror(-2, "Name or service not known")))
    cert = ssl.SSLCertVerificationError("certificate verify failed")
    cert.verify_message = "self-signed certificate"
    untrusted = classify("r.example", url, chained(cert))
    assert refused is not None and is_outage(refused)
    assert no_name is not None and is_outage(no_name)
    assert untrusted is not None and not is_outage(untrusted)  # reached, not trusted: a setting to fix
    from ocibridge.stores.registry.retry import TransportFailure

    assert is_outage(TransportFailure("registry r.example: GET /v2/ failed: timed out"))
    assert not is_outage(RegistryError("manifest unknown", status=404))
