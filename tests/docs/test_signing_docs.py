"""Every example of docs/signing.md, run in order against a real registry: each `$` line of a
console block is a shell command (lines marked `# refused` must fail, saying so; `# fails`: another
tool's failure), the TOML block is the job file the mirror lines use, the YAML blocks must parse.
The keys the lines use are made here, but for the P-384 one: the page makes it (issue 78)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from cryptography.hazmat.primitives.asymmetric import ec

from ocibridge.signing import keys
from tests.modelgen import make_model
from tests.signing_keys import key_pair
from tests.support.data import data

DOC = Path(__file__).resolve().parents[2] / "docs" / "signing.md"
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.S)


def _blocks(kind: str) -> list[str]:
    return [body for lang, body in BLOCK.findall(DOC.read_text()) if lang == kind]


def _workdir(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    make_model(work / "model")
    key_pair(work, "cosign")
    key_pair(work, "other")
    secret = ec.generate_private_key(ec.SECP256R1())
    (work / "encrypted-cosign.key").write_bytes(keys.encrypt_cosign_key(secret, b"s3cret", n=4096))
    (work / "encrypted-cosign.pub").write_bytes(keys.public_pem(secret))
    for name in ("artifact", "artifact.tampered", "bundle.sigstore.json"):
        shutil.copy(data("signing", "bundle", name), work / name)
    shutil.copy(data("signing", "bundle", "public-good.trusted_root.json"), work / "trusted_root.json")
    return work


def test_every_example_in_signing_md_runs(tmp_path, registry):
    work = _workdir(tmp_path)
    (toml,) = _blocks("toml")
    name, _, body = toml.partition("\n")
    (work / name.lstrip("# ").strip()).write_text(body.replace("$REGISTRY", registry.host))
    for body in _blocks("json"):  # the policy file of "The containers policy file"
        (work / "policy.json").write_text(body.replace("$REGISTRY", registry.host))
    env = {**os.environ, "REGISTRY": registry.host,
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("COSIGN_PASSWORD", None)
    ran = 0
    for block in _blocks("console"):
        for line in block.splitlines():
            if not line.startswith("$ "):
                continue
            command = line[2:]
            refused = command.rstrip().endswith("# refused")
            fails = re.search(r"# fails\b", command) is not None  # another tool's failure, in its words
            done = subprocess.run(["bash", "-c", command], cwd=work, env=env, capture_output=True, text=True,
                                  timeout=120)
            said = done.stdout + done.stderr
            if refused:
                assert done.returncode != 0 and "refused" in said, f"{command}\n{said}"
                assert "Traceback" not in said
            elif fails:
                assert done.returncode != 0, f"{command}\n{said}"
            else:
                assert done.returncode == 0, f"{command}\n{said}"
            ran += 1
    assert ran >= 25
    assert (work / "out").is_dir() and (work / "mirror" / "index.json").is_file()
    for block in _blocks("yaml"):
        doc = yaml.safe_load(block)
        assert doc["kind"] in ("ClusterImagePolicy", "ClusterPolicy")


def test_oms_pages_say_which_signatures_the_openssf_tools_verify():
    """Issue 78: signing.md said an OMS signature "verifies, with ocibridge or with the OpenSSF
    tools"; model_signing 1.1.1 cannot verify a sharded one (no shard option; the `# fails` line
    above runs it). The sentence says so, and the page says how to make a P-384 key with
    ocibridge (the `$` line above makes the one the examples use)."""
    text = DOC.read_text()
    claim = next(p for p in text.split("\n\n") if "with the OpenSSF tools" in p)
    assert "shard" in claim and "model_signing` 1.1.1" in claim, claim
    assert "$ COSIGN_PASSWORD= ocibridge keygen p384 --curve p384" in text
    assert "--curve p384" in text[text.index("## Keys"):text.index("## Commands")]
