"""A Hub entry's chunk table keys (``no_chunks``, ``chunk_threshold``, ``chunk_hash``): push's
``--no-chunks``, ``--chunk-threshold`` and ``--chunk-hash`` for the artifact each revision is
built into, checked as push checks its flags; an entry without them mirrors push's default."""

from __future__ import annotations

import json

import pytest
from serving import point_hub_at, serving
from support.mirror_jobs import mirror_job
from test_mirror_hub import digest_of, hub_cache, hub_repo, mirror_provenance  # noqa: F401 - fixtures

from ocibridge.chunks.choice import ChunkChoice
from ocibridge.chunks.chunktable import ARTIFACT_TYPE
from ocibridge.cli import main
from ocibridge.errors import OcibridgeError
from ocibridge.mirror import load_job, parse_job, run_job
from ocibridge.oci.reference import parse_registry_reference
from ocibridge.stores.registry import open_repository


def test_an_entry_s_chunk_threshold_gives_a_small_file_its_table(tmp_path, capsys, hub_repo, hub_cache,  # noqa: F811
                                                                registry2, unique_repo, monkeypatch):
    """512 KiB of weights, under push's 64 MiB: with ``chunk_threshold = "256K"`` the revision is
    what ``push hf:…@COMMIT --chunk-threshold 256K`` stores (a table, its referrer); the entry
    beside it, without the key, is push's default (no table)."""
    commit = hub_repo.push("tiny-a", "latest")
    small, plain = (f"{registry2.host}/{unique_repo}/mirror/{name}" for name in ("small", "plain"))
    with serving([hub_repo.prefix]) as served:
        point_hub_at(monkeypatch, served.url, hub_cache)
        job = mirror_job(tmp_path / "job.toml",
                         {"source": "hf://acme/tiny", "target": small, "chunk_threshold": "256K"},
                         {"source": "hf://acme/tiny", "target": plain}, defaults={"endpoint": served.url})
        summary = run_job(load_job(job))
    assert summary.exit_code == 0, summary.format_text()
    assert sorted(a.referrers for a in summary.with_status("copied")) == [0, 1]
    pinned = f"main-{commit[:12]}"
    capsys.readouterr()
    check = f"{registry2.host}/{unique_repo}/check"
    assert main(["push", f"hf:acme/tiny@{commit}", f"{check}:small", "--chunk-threshold", "256K", "--json", "-q"]) == 0
    pushed = json.loads(capsys.readouterr().out)
    assert pushed["chunks"]["layers"] == 1
    assert digest_of(capsys, f"{small}:{pinned}") == pushed["digest"]
    store = open_repository(parse_registry_reference(small))
    desc = store.resolve(pinned)
    assert [r.digest for r in store.referrers(desc, ARTIFACT_TYPE)] == [pushed["chunks"]["referrer"]]
    assert main(["push", f"hf:acme/tiny@{commit}", f"{check}:plain", "-q"]) == 0
    assert digest_of(capsys, f"{plain}:{pinned}") == digest_of(capsys, f"{check}:plain") != pushed["digest"]


def hub_entry(**keys: object) -> dict[str, object]:
    return {"source": "hf://acme/tiny", "target": "registry.example/m", **keys}


@pytest.mark.parametrize("doc, said", [
    ({"sync": [hub_entry(no_chunks=True, chunk_threshold="1M")]},
     "job.toml: sync.0: chunk_threshold says which files get a chunk table: leave it out with no_chunks"),
    ({"defaults": {"no_chunks": True}, "sync": [hub_entry(chunk_hash="sha256")]},
     "job.toml: (top): sync.0 (hf://acme/tiny): chunk_hash says how a chunk table is hashed: leave it out with "
     "no_chunks (true in defaults: write no_chunks = false in the entry)"),
    ({"sync": [hub_entry(chunk_threshold="8Q")]},
     "job.toml: sync.0.chunk_threshold: '8Q' is not a byte count (use e.g. 500K, 20M, 1G)"),
    ({"sync": [hub_entry(chunk_threshold=0)]}, "job.toml: sync.0.chunk_threshold: 0 is under one byte"),
    ({"sync": [hub_entry(chunk_hash="md5")]}, "job.toml: sync.0.chunk_hash: Input should be 'blake3' or 'sha256'"),
    ({"sync": [{"source": "registry.example/a", "target": "registry.example/b", "chunk_threshold": "1M"}]},
     "job.toml: sync.0: chunk_threshold: only for hf:// sources"),
], ids=["no-and-threshold", "defaults-no-entry-hash", "not-a-size", "zero", "unknown-hash", "registry-source"])
def test_chunk_keys_are_checked_as_push_checks_its_flags(doc, said):
    with pytest.raises(OcibridgeError) as raised:
        parse_job(doc, where="job.toml")
    assert str(raised.value).startswith(said) and "\n" not in str(raised.value)


def test_chunk_keys_come_from_the_entry_then_the_defaults():
    job = parse_job({"defaults": {"chunk_threshold": "1M"},
                     "sync": [hub_entry(chunk_hash="sha256"), hub_entry(chunk_threshold=4096),
                              hub_entry(), hub_entry(no_chunks=True)]})
    assert job.chunks(job.sync[0]) == ChunkChoice(True, 1 << 20, "sha256")
    assert job.chunks(job.sync[1]) == ChunkChoice(True, 4096, None)
    assert job.chunks(job.sync[2]) == ChunkChoice(True, 1 << 20, None)
    assert job.chunks(job.sync[3]) == ChunkChoice(False)  # the defaults' threshold is not the entry's
    plain = parse_job({"sync": [hub_entry()]})
    assert plain.chunks(plain.sync[0]) == ChunkChoice()  # push's default: the digest a job had before
    # a job without the keys keeps the digest its shard reports carry (the keys are left out of it)
    assert plain.digest() == "sha256:19966e6ab44799f56ad72e804f1f2ed88e0b8910c422b398ae524d97eab449be"


def test_the_provenance_records_the_chunk_keys_an_entry_sets(tmp_path, capsys, hub_repo, hub_cache,  # noqa: F811
                                                             monkeypatch):
    """They change the artifact built, so the statement names them (the job's spelling, the
    threshold in bytes); an entry without them records what it recorded before the keys."""
    hub_repo.push("tiny-a", "latest")
    targets = {name: f"oci:{tmp_path / name}" for name in ("tabled", "untabled", "plain")}
    with serving([hub_repo.prefix]) as served:
        point_hub_at(monkeypatch, served.url, hub_cache)
        keys = {"tabled": {"chunk_threshold": "256K", "chunk_hash": "sha256"}, "untabled": {"no_chunks": True},
                "plain": {}}
        job = mirror_job(tmp_path / "job.toml", *({"source": "hf://acme/tiny", "target": targets[name],
                                                   "revisions": {"allow": ["main"]}, **keys[name]} for name in targets),
                         defaults={"endpoint": served.url, "provenance": True})
        summary = run_job(load_job(job))
    assert summary.exit_code == 0, summary.format_text()
    provenance = {name: mirror_provenance(capsys, f"{target}:main", tmp_path / f"out-{name}")
                  for name, target in targets.items()}
    flags = {name: definition["externalParameters"]["flags"] for name, definition in provenance.items()}
    assert flags == {"tabled": {"referrers": True, "chunk_threshold": 256 * 1024, "chunk_hash": "sha256"},
                     "untabled": {"referrers": True, "no_chunks": True},
                     "plain": {"referrers": True}}
