"""Output that tells things apart (issue 78 item 4): ``diff`` and the compare page list no
``modelfs.diffIds`` (the layers' digests: a wall of hashes repeating the files), and ``discover``
names what each sigstore bundle is (they all share one artifact type)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

from tests.docrun import EXAMPLE_MODEL
from tests.signing_keys import key_pair


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ocibridge", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COSIGN_PASSWORD": ""}, check=False)


def test_diff_and_the_compare_page_leave_out_the_layers_digests(tmp_path, registry, unique_repo):
    prefix = f"{registry.host}/{unique_repo}"
    model = shutil.copytree(EXAMPLE_MODEL, tmp_path / "tiny")
    assert run("push", str(model), f"{prefix}/acme/tiny:v1", "-q").returncode == 0
    (model / "README.md").write_text("# changed\n")
    assert run("push", str(model), f"{prefix}/acme/tiny:v2", "-q").returncode == 0
    old, new = f"{prefix}/acme/tiny:v1", f"{prefix}/acme/tiny:v2"
    result = json.loads(run("diff", old, new, "--json").stdout)
    assert [f["path"] for f in result["files"]] == ["README.md"]
    assert "modelfs.diffIds" not in [c["field"] for c in result["config"]], result["config"]
    text = run("diff", old, new).stdout
    assert "~ README.md" in text and "diffIds" not in text and "no difference" not in text, text
    from starlette.testclient import TestClient

    import ocibridge

    with TestClient(ocibridge.create_app([prefix])) as hub:  # serve's app, its diff included
        page = hub.get("/acme/tiny/compare/v1...v2")
    assert page.status_code == 200 and "README.md" in page.text and "diffIds" not in page.text


def test_discover_names_each_bundle(tmp_path, registry, unique_repo):
    ref = f"{registry.host}/{unique_repo}/tiny:v1"
    key, _ = key_pair(tmp_path / "keys")
    model = shutil.copytree(EXAMPLE_MODEL, tmp_path / "tiny")
    assert run("push", str(model), ref, "-q", "--sbom", "--provenance", "--attest-key", str(key)).returncode == 0
    assert run("sign", ref, "--key", str(key), "--form", "all").returncode == 0
    out = run("discover", ref).stdout
    bundles = [line for line in out.splitlines() if "application/vnd.dev.sigstore.bundle" in line]
    named = sorted(re.search(r"\((.*?): ", line)[1] for line in bundles)
    assert named == ["AI-BOM", "OMS signature", "provenance", "signature"], out
    assert len(set(bundles)) == len(bundles)  # no two lines alike
    assert "https://slsa.dev/provenance/v1" in out and "https://cyclonedx.org/bom" in out
