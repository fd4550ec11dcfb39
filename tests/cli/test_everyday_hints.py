"""Hints where people guess (issue 78 item 3): a tag typed wrong is told with the repository's
nearest tags and its tag list, as a repository typed wrong is told with the nearest names; a name
without a registry host that fails on Docker Hub says it was read as Docker Hub's, and how to name
another registry's model."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from tests.docrun import EXAMPLE_MODEL
from tests.signing_keys import key_pair


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ocibridge", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})}, check=False)


def test_a_tag_typed_wrong_lists_the_nearest_tags_and_the_tags(tmp_path, registry, unique_repo):
    repo = f"{registry.host}/{unique_repo}/tiny"
    model = shutil.copytree(EXAMPLE_MODEL, tmp_path / "tiny")
    for tag in ("latest", "v1", "v2", "v10"):
        assert run("push", str(model), f"{repo}:{tag}", "-q").returncode == 0
    key, _ = key_pair(tmp_path / "keys")
    assert run("sign", f"{repo}:v1", "--key", str(key)).returncode == 0  # cosign's sha256-HEX.sig tag
    for argv in (["pull", f"{repo}:lates", str(tmp_path / "out")], ["inspect", f"{repo}:lates"],
                 ["copy", f"{repo}:lates", f"oci:{tmp_path / 'lay'}:x"]):
        done = run(*argv)
        assert done.returncode == 1, done
        [line] = done.stderr.splitlines()
        assert f"{repo}:lates: no such tag lates" in line and "nearest: latest;" in line, line
        assert line.endswith("its tags: v10, v2, v1, latest"), line  # newest version first, no cosign tag
        assert "manifest not found" not in line and "sha256-" not in line
    assert not (tmp_path / "out").exists()
    # a digest that is not there is no tag typo: told as before
    gone = run("inspect", f"{repo}@sha256:{'0' * 64}")
    assert gone.returncode == 1 and "no such tag" not in gone.stderr


def test_a_name_without_a_host_says_it_was_read_as_docker_hubs(tmp_path):
    offline = {"HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9", "NO_PROXY": "",
               "OCIBRIDGE_STORE": str(tmp_path / "store")}
    done = run("inspect", "acme/tiny:latest", env=offline)
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert "docker.io" in line, line
    assert "read as Docker Hub's docker.io/acme/tiny:latest, having no registry host" in line, line
    assert "REGISTRY/acme/tiny:latest, such as localhost:5000/acme/tiny:latest" in line, line
    assert "the local store has no acme/tiny:latest" in line, line
    # a name that says docker.io is taken as said: no such hint
    said = run("inspect", "docker.io/acme/tiny:latest", env=offline)
    assert said.returncode == 1 and "read as Docker Hub's" not in said.stderr
