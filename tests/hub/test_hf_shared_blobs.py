"""The Hugging Face cache as huggingface_hub 2.x writes it (issue 53 item 1): a file downloaded
over Xet sits in the cache-wide shared store (``<cache>/blobs/<2 hex>/<xet hash>``) and the
repository's ``blobs/<etag>`` links to it. ``push hf:``, ``copy hf:`` and a mirror job with an
``hf://`` source read it (the CLI as a process, the cache written by the installed
huggingface_hub through ``ocibridge serve`` over Xet); a link into the store's other files, or
out of the cache, stays refused."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from hostile_run import run_cli
from huggingface_hub import snapshot_download
from serving import files_of, point_hub_at, serving

from ocibridge.cli import main
from ocibridge.hubserver.xet import xorbs as xet
from tests.modelgen import make_bert_model

SIZE = xet.XORB_CHUNKS * xet.XET_CHUNK + 3 * xet.XET_CHUNK + 100  # over --xet-min-size 1M: goes over Xet


def test_push_copy_and_mirror_read_the_shared_store_of_huggingface_hub_2(tmp_path, capsys, registry, unique_repo,
                                                                         monkeypatch):
    src = make_bert_model(tmp_path / "big", weights=1)
    (src / "model.safetensors").write_bytes(os.urandom(SIZE))
    prefix = f"{registry.host}/{unique_repo}"
    assert main(["push", str(src), f"{prefix}/acme/big:latest", "-q", "--chunks", "--chunk-threshold", "1M"]) == 0
    capsys.readouterr()
    hub = tmp_path / "hf-home" / "hub"
    with serving([prefix], xet_min=1024 * 1024) as served:
        point_hub_at(monkeypatch, served.url, hub, xet=True)
        where = Path(snapshot_download("acme/big"))
        assert any("/xorbs/" in p for _, p in served.requests)  # the weights came over Xet
        weights = hashlib.sha256((src / "model.safetensors").read_bytes()).hexdigest()
        link = hub / "models--acme--big" / "blobs" / weights
        shared = Path(os.path.realpath(link))
        assert link.is_symlink() and shared.parent.parent == hub / "blobs"  # the layout of item 1
        env = {"HF_HUB_CACHE": str(hub), "HF_HUB_OFFLINE": "1"}

        pushed = run_cli("push", "hf:acme/big", f"{prefix}/pushed:v1", "--json", env=env)
        assert pushed.code == 0, pushed.err
        copied = run_cli("copy", "hf:acme/big", f"{prefix}/copied:v1", "--json", env=env)
        assert copied.code == 0, copied.err
        assert json.loads(pushed.out)["digest"] == json.loads(copied.out)["digest"]
        out = tmp_path / "back"
        assert run_cli("pull", f"{prefix}/pushed:v1", str(out), "-q").code == 0
        assert files_of(out) == files_of(src) == files_of(where)

        job = tmp_path / "job.toml"
        job.write_text(f'[defaults]\nendpoint = "{served.url}"\n\n[[sync]]\nsource = "hf://acme/big"\n'
                       f'target = "{prefix}/mirrored"\nrevisions = {{ allow = ["main"] }}\n')
        mirrored = run_cli("mirror", str(job), env={"HF_HUB_CACHE": str(hub), "HF_ENDPOINT": served.url})
        assert mirrored.code == 0, mirrored.err + mirrored.out
        assert "does not lead" not in mirrored.err + mirrored.out

    # a link to the store's own marker (not an entry of it), or out of the cache, is refused
    snapshot = where
    (snapshot / "marker").symlink_to(hub / "blobs" / ".huggingface-shared-blobs")
    refused = run_cli("push", "hf:acme/big", f"oci:{tmp_path / 'layout'}:t", env=env)
    assert "marker does not lead to a file of the cache" in refused.one_error_line()
    (snapshot / "marker").unlink()
    outside = tmp_path / "secret.bin"
    outside.write_bytes(b"not the model's")
    (snapshot / "stolen").symlink_to(outside)
    refused = run_cli("push", "hf:acme/big", f"oci:{tmp_path / 'layout'}:t", env=env)
    assert "stolen does not lead to a file of the cache" in refused.one_error_line()
    assert not (tmp_path / "layout").exists()


def _links(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): os.readlink(p) for p in sorted(root.rglob("*")) if p.is_symlink()}


def test_pull_hf_over_the_snapshot_huggingface_hub_wrote_leaves_it_as_it_is(tmp_path, capsys, registry,
                                                                            unique_repo, monkeypatch):
    """Issue 53 item 9: the same bytes, through serve then through ``pull hf:``, are one snapshot:
    no link re-pointed, no blob added or orphaned (the shared Xet blob included)."""
    src = make_bert_model(tmp_path / "big", weights=1)
    (src / "model.safetensors").write_bytes(os.urandom(SIZE))
    prefix = f"{registry.host}/{unique_repo}"
    ref = f"{prefix}/acme/big:latest"
    assert main(["push", str(src), ref, "-q", "--chunks", "--chunk-threshold", "1M"]) == 0
    capsys.readouterr()
    hub = tmp_path / "hf-home" / "hub"
    with serving([prefix], xet_min=1024 * 1024) as served:
        point_hub_at(monkeypatch, served.url, hub, xet=True)
        snapshot_download("acme/big")
    folder = hub / "models--acme--big"
    before = (_links(hub), sorted(p.name for p in (folder / "blobs").iterdir()), (folder / "refs" / "main").read_text())
    pulled = run_cli("pull", ref, "hf:acme/big", "--json", env={"HF_HUB_CACHE": str(hub)})
    assert pulled.code == 0, pulled.err
    after = (_links(hub), sorted(p.name for p in (folder / "blobs").iterdir()), (folder / "refs" / "main").read_text())
    assert after == before
    # both name every blob by its SHA-256, the ETag serve answers
    assert {p.name for p in (folder / "blobs").iterdir()} == {
        hashlib.sha256(p.read_bytes()).hexdigest() for p in src.rglob("*") if p.is_file()}
