"""README "Using it" (issue 42): a line for each capability the last waves brought, every
command line there parses as written, and the registry config the repository ships starts
Debian's docker-registry, which ocibridge then pushes to, lists and deletes from."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from ocibridge.cli import main
from ocibridge.cli.parser import build_parser
from tests.modelgen import make_model

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
USING = README[README.index("## Using it"):README.index("## Documentation")]


def command_lines() -> list[list[str]]:
    lines = []
    for block in re.findall(r"```sh\n(.*?)```", USING, re.S):
        for line in block.splitlines():
            if line.startswith("ocibridge "):
                lines.append(shlex.split(line.split("  #")[0])[1:])
    return lines


def test_using_it_names_each_capability():
    commands = {argv[0] for argv in command_lines()}
    assert {"path", "cat", "save", "sign", "verify-dir", "check-registry", "serve"} <= commands
    assert any("hf:" in word for argv in command_lines() for word in argv)
    assert any(argv[:1] == ["sign"] and "oms" in argv for argv in command_lines())
    assert any("--image-pull-secret" in argv for argv in command_lines())  # pull secrets
    assert "load models.tar" in USING and "lazy reads" in USING
    for extra in ("[fsspec]", "[tensors]", "[signing]", "[serve]"):
        assert f"'ocibridge{extra}'" in USING, extra
    assert "docker-registry serve examples/registry-config.yml" in USING


def test_a_newcomer_is_told_how_to_run_it_and_every_extra():
    """Issue 53 item 17: the venv's command named, every extra of pyproject.toml listed, serve
    with a token and a default tag, the task page before the reference."""
    import tomllib

    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]) - {"test"}
    assert extras >= {"evidence", "hub", "k8s", "serve", "signing"}
    assert {extra for extra in extras if f"'ocibridge[{extra}]'" not in USING} == set()
    fresh = README[README.index("## Two commands on a fresh machine"):README.index("## Using it")]
    assert "source .venv/bin/activate" in fresh and ".venv/bin/ocibridge" in fresh
    serve = [argv for argv in command_lines() if argv[0] == "serve"]
    assert any("--token-file" in argv and "--default-tag" in argv for argv in serve)
    docs = README[README.index("## Documentation"):]
    assert docs.index("docs/tasks.md") < docs.index("docs/cli.md")
    cli = (ROOT / "docs" / "cli.md").read_text()
    assert cli.index("(tasks.md)") < cli.index("| command")
    assert {"keygen", "repo", "manifest", "diff"} <= {argv[0] for argv in command_lines()}


@pytest.mark.parametrize("argv", command_lines(), ids=lambda a: " ".join(a)[:50])
def test_every_using_it_line_parses(argv):
    build_parser().parse_args(argv)  # an unknown flag or a missing argument exits 2


def test_the_shipped_registry_config_runs_a_registry(tmp_path, capsys):
    from support.registry import free_port, registry_binary

    port = free_port()
    env = {**os.environ, "REGISTRY_HTTP_ADDR": f"127.0.0.1:{port}",
           "REGISTRY_STORAGE_FILESYSTEM_ROOTDIRECTORY": str(tmp_path / "storage")}
    with (tmp_path / "registry.log").open("wb") as log:
        proc = subprocess.Popen([registry_binary(), "serve", str(ROOT / "examples" / "registry-config.yml")],
                                env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=2) as answer:
                    assert answer.status == 200
                    break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "registry.log").read_text()
                time.sleep(0.1)
        ref = f"localhost:{port}/ml/my-model"
        assert main(["push", str(make_model(tmp_path / "m")), f"{ref}:v1", "-q"]) == 0
        capsys.readouterr()
        assert main(["tags", ref, "--json"]) == 0 and json.loads(capsys.readouterr().out) == ["v1"]
        assert main(["delete", f"{ref}:v1"]) == 0  # deletes are on
        assert (tmp_path / "storage" / "docker").is_dir()  # the storage the environment chose
    finally:
        proc.terminate()
        proc.wait(timeout=10)
