"""A warm ``ocibridge path`` (issue 28): a model the cache holds is answered from the cache's
records before the registry client, pydantic, httpx or the model modules are imported (the
``path`` command's own module loads, as every command's does: no argv parsed by hand); a tag costs
one HEAD, a digest or ``--offline`` none; whatever the warm path cannot be sure of (a moved
tag, ``--verify-key``) goes the full way."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.entry_probe import run_entry

import ocibridge
from ocibridge.cli.modelcache import _only_warm_flags
from ocibridge.cli.parser import build_parser
from tests.cache.test_model_cache import push_version, same_files

HEAVY = ("pydantic", "httpx", "httpcore", "ocibridge.cli.transfer", "ocibridge.api.model_ops", "ocibridge.api.copy",
         "ocibridge.cache.modelcache", "ocibridge.model.extract", "ocibridge.stores.registry.client")


def cli(*args: str) -> tuple[int, str, str, list[str]]:
    """Run the console entry point as a command: (exit code, stdout, stderr, heavy modules)."""
    return run_entry(args, HEAVY)


@pytest.fixture
def warm(tmp_path, capsys, registry, unique_repo, fault_proxy):
    """A model pushed, and resolved once through the counting proxy: (ref, snapshot, source)."""
    src = push_version(tmp_path, f"{registry.host}/{unique_repo}:v1", "one")
    ref = f"{fault_proxy.host}/{unique_repo}:v1"
    snapshot = ocibridge.path(ref)
    capsys.readouterr()
    fault_proxy.clear()
    return ref, snapshot, src


def test_warm_tag_is_one_head_and_loads_no_client(warm, fault_proxy):
    ref, snapshot, _ = warm
    code, out, err, heavy = cli("path", ref)
    assert (code, out, err, heavy) == (0, str(snapshot), "", [])
    asked = [(r.method, r.path.rsplit("/", 2)[-2]) for r in fault_proxy.requests_matching()]
    assert asked == [("HEAD", "manifests")]
    code, out, _, heavy = cli("path", ref, "--json")
    assert code == 0 and '"path": ' in out and str(snapshot) in out and heavy == []


def test_warm_offline_and_digest_send_nothing(warm, fault_proxy, monkeypatch):
    ref, snapshot, _ = warm
    assert cli("path", ref, "--offline")[:2] == (0, str(snapshot))
    monkeypatch.setenv("OCIBRIDGE_OFFLINE", "1")
    assert cli("path", ref) == (0, str(snapshot), "", [])
    monkeypatch.delenv("OCIBRIDGE_OFFLINE")
    pinned = f"{ref.rsplit(':', 1)[0]}@{ocibridge.resolve(ref).digest}"
    assert ocibridge.path(pinned) == snapshot
    fault_proxy.clear()
    assert cli("path", pinned) == (0, str(snapshot), "", [])
    assert fault_proxy.requests_matching() == []


def test_a_moved_tag_is_resolved_again_the_full_way(warm, tmp_path, registry, unique_repo):
    ref, snapshot, _ = warm
    two = push_version(tmp_path, f"{registry.host}/{unique_repo}:v1", "two")  # v1 now names another model
    code, out, _, heavy = cli("path", ref)
    assert code == 0 and out != str(snapshot) and same_files(Path(out), two)
    assert "ocibridge.cache.modelcache" in heavy  # built by the full resolution
    assert cli("path", ref) == (0, out, "", [])  # and warm again from then on


def test_an_include_selection_is_its_own_warm_snapshot(warm):
    ref, snapshot, _ = warm
    code, partial, _, heavy = cli("path", ref, "--include", "w1.bin")
    assert code == 0 and partial != str(snapshot) and heavy  # first time: built
    assert sorted(p.name for p in Path(partial).iterdir()) == ["w1.bin"]
    assert cli("path", ref, "--include=w1.bin") == (0, partial, "", [])


def test_verify_key_is_never_answered_warm(warm, tmp_path):
    """The signature is checked on every call with --verify-key: an unsigned model the cache
    holds is still refused (this costs the full client's start-up)."""
    from signing_keys import key_pair

    ref, _, _ = warm
    _, public = key_pair(tmp_path / "k")
    code, out, err, _ = cli("path", ref, "--verify-key", str(public))
    assert code == 1 and out == "" and err.count("\n") == 0 and "is not signed" in err


@pytest.mark.parametrize(("argv", "warm"), [
    (["path", "r"], True), (["path", "--offline", "r", "--json", "--exclude=a", "--include", "b"], True),
    (["path", "r", "--concurrency", "4"], True),  # the default, said aloud
    (["path", "r", "--hf", "o/n"], False), (["path", "r", "--verify-key", "k"], False),
    (["path", "r", "--plain-http"], False), (["path", "r", "--concurrency", "2"], False),
    (["path", "r", "--authfile", "a.json"], False),
])
def test_only_the_flags_the_warm_answer_heeds_let_it_answer(argv, warm):
    args = build_parser(lazy=True).parse_args(argv)
    args.debug = False
    assert _only_warm_flags(args) is warm
    args.debug = True  # --debug: the full way, whose requests are logged
    assert _only_warm_flags(args) is False


def test_a_registry_asking_for_credentials_is_answered_the_full_way(tmp_path, capsys, auth_registry, monkeypatch):
    """The one anonymous HEAD meets a challenge: the full client (with the login) answers."""
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "docker"))
    ocibridge.login(auth_registry.host, auth_registry.username, auth_registry.password)
    src = push_version(tmp_path, f"{auth_registry.host}/warm/auth:v1", "one")
    snapshot = ocibridge.path(f"{auth_registry.host}/warm/auth:v1")
    capsys.readouterr()
    code, out, err, heavy = cli("path", f"{auth_registry.host}/warm/auth:v1")
    assert (code, out, err) == (0, str(snapshot), "") and same_files(snapshot, src)
    assert "ocibridge.stores.registry.client" in heavy  # the full client answered
