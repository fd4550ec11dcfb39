"""A registry that wants credentials, and none given (issue 53 item 2): every command says so
with the same words ("no credentials were sent; log in …"), run as a user runs it (the CLI as a
process, against the htpasswd registry); the API raises ocibridge's RegistryError, never httpx's
StreamConsumed."""

from __future__ import annotations

import pytest
from hostile_run import run_cli
from support.ocilayout import write_tiny_image

import ocibridge
from ocibridge.errors import NO_CREDENTIALS, RegistryError


@pytest.fixture
def no_login(tmp_path, monkeypatch) -> dict[str, str]:
    """No docker config, no containers auth file: nothing to send."""
    env = {"DOCKER_CONFIG": str(tmp_path / "no-docker"), "HOME": str(tmp_path / "home"),
           "REGISTRY_AUTH_FILE": str(tmp_path / "no-auth.json")}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    return env


@pytest.fixture
def guarded(tmp_path, auth_registry, unique_repo) -> str:
    image = write_tiny_image(tmp_path / "tiny", {"hello.txt": b"hello"})
    ref = f"{auth_registry.host}/{unique_repo}/tiny:v1"
    ran = run_cli("copy", f"oci:{image.path}:{image.tag}", ref, "-q",
                  "-u", auth_registry.username, "-p", auth_registry.password)
    assert ran.code == 0, ran.err
    return ref


def test_every_command_says_no_credentials_were_sent(tmp_path, auth_registry, guarded, no_login):
    commands = {
        "pull": ["pull", guarded, str(tmp_path / "out")],
        "cat": ["cat", guarded, "hello.txt"],
        "convert": ["convert", guarded, f"oci:{tmp_path / 'kit'}:t", "--to", "modelkit"],
        "inspect": ["inspect", guarded],
        "check-registry": ["check-registry", auth_registry.host],
    }
    for command, args in commands.items():
        line = run_cli(*args).one_error_line()
        assert f"({command}: {NO_CREDENTIALS})" in line, line
        assert "StreamConsumed" not in line and "unexpected" not in line, line
    line = run_cli("check-registry", guarded.rsplit(":", 1)[0]).one_error_line()
    assert f"(check-registry: {NO_CREDENTIALS})" in line
    # credentials that are refused are told apart
    line = run_cli("pull", guarded, str(tmp_path / "out"), "-u", auth_registry.username, "-p", "wrong").one_error_line()
    assert "(pull: the registry refused the credentials that were sent)" in line
    assert not (tmp_path / "out").exists() and not (tmp_path / "kit").exists()

    job = tmp_path / "job.toml"
    job.write_text(f'[[sync]]\nsource = "{guarded}"\ntarget = "oci:{tmp_path / "mirror"}"\n')
    ran = run_cli("mirror", str(job))
    assert ran.code == 1
    failed = [line for line in ran.out.splitlines() if line.startswith("FAILED")]
    assert len(failed) == 1 and failed[0].endswith(f"({NO_CREDENTIALS})"), ran.out


def test_the_api_raises_the_registry_error(tmp_path, guarded, no_login):
    with pytest.raises(RegistryError) as refused:
        ocibridge.pull(guarded, str(tmp_path / "out"))
    assert refused.value.status == 401 and refused.value.credentials_hint == NO_CREDENTIALS
    with pytest.raises(RegistryError):
        ocibridge.cat(guarded, "hello.txt")
