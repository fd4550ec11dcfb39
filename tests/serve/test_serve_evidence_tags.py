"""Signature and evidence tags are serve's (issue 85): a writer holding a write token cannot
delete, create, branch as, commit to or super-squash cosign's tags beside a commit
(``sha256-<hex>``, ``.sig``, ``.att``, ``.sbom``) through the Hub's API, so a commit serve signed
stays signed: ``ocibridge verify`` still passes after every try (writes/reserved.py)."""

from __future__ import annotations

import json

import pytest
from huggingface_hub.errors import HfHubHTTPError
from support.publishing import evidence_serve, tag_digest

from ocibridge.cli import main

pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning")


def _tags(base: str, capsys: pytest.CaptureFixture[str]) -> list[str]:
    capsys.readouterr()
    assert main(["tags", base, "--all", "--json"]) == 0
    return sorted(t.rpartition(":")[2] for t in json.loads(capsys.readouterr().out))


def test_a_writer_cannot_unsign_or_forge_a_signed_commit(tmp_path, registry, unique_repo, monkeypatch, capsys):
    prefix = f"{registry.host}/{unique_repo}"
    base, ref = f"{prefix}/acme/guarded", f"{prefix}/acme/guarded:latest"
    with evidence_serve(tmp_path, monkeypatch, prefix, "acme/guarded") as (api, key):
        api.upload_file(path_or_fileobj=b"{}", path_in_repo="config.json", repo_id="acme/guarded")
        head = str(tag_digest(ref)).split(":")[1]
        before = _tags(base, capsys)
        evidence = [t for t in before if t.startswith(f"sha256-{head}")]
        assert f"sha256-{head}.sig" in evidence, before  # cosign's classic signature of the head
        signature = f"sha256-{head}.sig"  # first: today's hole, delete_tag of it unsigned the commit
        for name in [signature, *(t for t in evidence if t != signature), f"sha256-{head}.sbom",
                     f"sha256-{'0' * 64}.sig"]:
            tries = {"delete_tag": lambda n=name: api.delete_tag("acme/guarded", tag=n),
                     "create_tag": lambda n=name: api.create_tag("acme/guarded", tag=n),
                     "create_branch": lambda n=name: api.create_branch("acme/guarded", branch=n),
                     "delete_branch": lambda n=name: api.delete_branch("acme/guarded", branch=n),
                     "commit": lambda n=name: api.upload_file(path_or_fileobj=b"x", path_in_repo="x.txt",
                                                              repo_id="acme/guarded", revision=n),
                     "super_squash": lambda n=name: api.super_squash_history("acme/guarded", branch=n)}
            for what, attempt in tries.items():
                with pytest.raises(HfHubHTTPError) as refused:
                    attempt()
                answer = refused.value.response
                assert answer.status_code == 400, (what, name, answer.text)
                assert "cosign's signature and evidence tags" in answer.json()["error"], (what, answer.text)
        assert _tags(base, capsys) == before  # nothing deleted, nothing planted
    capsys.readouterr()
    assert main(["verify", ref, "--key", str(key.public_key)]) == 0, capsys.readouterr().err
