"""Issue 63's everyday edges on the command line, each run as a user runs it (``python -m
ocibridge`` as a process): what ``ls`` shows of a layout another tool wrote (item 7)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from support.data import data


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ocibridge", *args], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ), check=False)


def _rows(out: str) -> list[dict[str, str]]:
    head, *rows = out.splitlines()
    names = head.split()
    return [dict(zip(names, re.split(r"\s{2,}", row), strict=True)) for row in rows]


def test_ls_of_a_modelkit_layout_shows_its_name_and_its_tag():
    """kit names a layout's entry ``tiny-llama:latest-tar`` (REPOSITORY:TAG): ``ls oci:DIR``
    showed NAME ``-`` and that whole text as the TAG. It now shows the name and the tag apart,
    as the local store's NAME:TAG are (and ``--json`` keeps the stored name and the Kitfile's)."""
    layout = data("kitops", "kit-latest-tar")
    done = run("ls", f"oci:{layout}")
    assert done.returncode == 0, done.stderr
    [row] = _rows(done.stdout)
    assert (row["NAME"], row["TAG"], row["FAMILY"]) == ("tiny-llama", "latest-tar", "modelkit"), done.stdout
    [entry] = json.loads(run("ls", f"oci:{layout}", "--json").stdout)
    assert entry["ref"] == "tiny-llama:latest-tar"  # what oci:DIR:REF takes, as skopeo reads it
    assert entry["model"] == "tiny-llama-fixture"  # the Kitfile's package name
    assert run("inspect", f"oci:{layout}:{entry['ref']}").returncode == 0

    docker = run("ls", f"oci:{data('docker-model', 'gguf-dummy-v0.1')}")
    [row] = _rows(docker.stdout)
    assert (row["NAME"], row["TAG"], row["FAMILY"]) == ("docker.io/ai/dummy", "fixture", "docker-model")
