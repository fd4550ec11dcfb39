"""The messages of issue 53 item 11, as a user reads them (the CLI as a process)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from hostile_run import run_cli
from signing_keys import key_pair

from tests.modelgen import make_bert_model
from tests.support.data import data


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("OCIBRIDGE_STORE", str(tmp_path / "store"))
    return tmp_path / "store"


def test_warnings_of_k8s_commands_name_ocibridge(tmp_path):
    policy = tmp_path / "policy.json"
    key = data("containers-policy", "cosign.pub")
    policy.write_text(json.dumps({"default": [{"type": "reject"}], "transports": {"docker": {
        "reg.example.com/ml": [{"type": "sigstoreSigned", "keyPath": str(key)}]}}}))
    ran = run_cli("k8s", "policy", "--from-policy", str(policy))
    assert ran.code == 0, ran.err
    assert ran.err.startswith("ocibridge: warning: 1 part(s) of the policy are not translated"), ran.err
    assert all(line.startswith("ocibridge: ") for line in ran.err.splitlines())


def test_ls_names_the_family_of_a_modelkit(tmp_path, store):
    model = make_bert_model(tmp_path / "m", weights=4)
    assert run_cli("push", str(model), "kit:v1", "--to", "modelkit", "-q").code == 0
    listed = run_cli("ls", "--json")
    assert [e["family"] for e in json.loads(listed.out)] == ["modelkit"]
    assert "modelkit" in run_cli("ls").out


def test_pull_help_says_what_src_and_format_are_and_offers_no_upload_flag():
    ran = run_cli("pull", "--help")
    assert ran.code == 0
    assert "the model: host/repo[:tag|@digest]" in ran.out and "what to write at DEST" in ran.out
    assert "--upload-part-size" not in ran.out and "--chunk-size" not in ran.out


def test_attestations_are_not_counted_as_signatures(tmp_path, store):
    private, public = key_pair(tmp_path / "keys")
    layout = f"oci:{tmp_path / 'layout'}:v1"
    ran = run_cli("push", str(make_bert_model(tmp_path / "m", weights=4)), layout, "-q", "--sbom",
                  "--attest-key", str(private))
    assert ran.code == 0, ran.err
    line = run_cli("pull", layout, str(tmp_path / "out"), "--verify-key", str(public)).one_error_line()
    assert "is not signed" in line and "attestation(s), which are no signatures" in line, line
    assert "signature(s), none verifies" not in line


def test_a_resumed_pull_says_so(tmp_path, registry, unique_repo):
    model = make_bert_model(tmp_path / "m", weights=4)
    weights = bytes(range(256)) * 8192  # 2 MiB
    (model / "model.safetensors").write_bytes(weights)
    ref = f"{registry.host}/{unique_repo}/resumed:v1"
    assert run_cli("push", str(model), ref, "-q", "--no-chunks").code == 0
    # what an interrupted run left in the pull cache: the first half of the weights
    digest = hashlib.sha256(weights).hexdigest()
    partial = Path(os.environ["OCIBRIDGE_CACHE"]) / "pulls" / "blobs" / "sha256" / f".ocibridge-partial-{digest}"
    partial.parent.mkdir(parents=True, exist_ok=True)
    partial.write_bytes(weights[: len(weights) // 2])
    ran = run_cli("pull", ref, str(tmp_path / "out"), "-q")
    assert ran.code == 0, ran.err
    assert f"ocibridge: resumed sha256:{digest} at 50% (1.0 MiB kept from an earlier run)" in ran.err, ran.err
    assert (tmp_path / "out" / "model.safetensors").read_bytes() == weights


def test_a_bare_name_missing_here_and_on_docker_io_lists_the_nearest_local_names(tmp_path, store):
    for name in ("tiny:v1", "tiny:v2", "other:v1", "big:v1"):
        assert run_cli("push", str(make_bert_model(tmp_path / name.replace(":", "-"), weights=4)), name, "-q").code == 0
    # docker.io is made unreachable the way a sandbox or an air gap makes it (a proxy that refuses)
    offline = {"HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9", "NO_PROXY": ""}
    line = run_cli("pull", "tiyn:v1", str(tmp_path / "out"), env=offline).one_error_line()
    assert "docker.io" in line and "(tiyn:v1 is not in the local store either; nearest there: tiny:v1" in line, line
    line = run_cli("inspect", "tiny:v1", env=offline)
    assert line.code == 0  # a name the store holds is never looked for elsewhere
