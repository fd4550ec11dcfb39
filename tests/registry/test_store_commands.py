"""list/ls, rm, prune, tag, delete, resolve, attach, discover and the cp alias (issue 18), on a
layout, the default store and a real registry."""

from __future__ import annotations

import json
import os
import time

import pytest

from ocibridge.cli import main
from tests.modelgen import make_model
from tests.signing_keys import key_pair


def cli_json(capsys, *args: str):
    code = main([*args, "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out)


@pytest.fixture
def store(tmp_path, monkeypatch):
    path = tmp_path / "default-store"
    monkeypatch.setenv("OCIBRIDGE_STORE", str(path))
    return path


def test_list_and_prune_of_an_empty_default_store_create_nothing(store, capsys):
    assert cli_json(capsys, "ls") == []
    assert cli_json(capsys, "prune")["blobs"] == []
    assert not store.exists()


def test_list_counts_signatures_on_their_model_and_all_shows_them(tmp_path, store, capsys):
    """A signed model is one row, with its classic .sig and its bundle referrer counted under
    ATTACHED (as modctl/ollama list models only); --all lists them, each pointing at its model."""
    make_model(tmp_path / "alpha")
    key, _ = key_pair(tmp_path / "keys")
    assert main(["push", str(tmp_path / "alpha"), "-q"]) == 0
    assert main(["sign", f"oci:{store}:alpha:latest", "--key", str(key)]) == 0
    capsys.readouterr()
    models = cli_json(capsys, "ls")
    assert [(e["name"], e["attached"], e["subject"]) for e in models] == [("alpha", 2, None)]
    everything = cli_json(capsys, "ls", "--all")
    attached = [e for e in everything if e["subject"]]
    assert len(everything) == 3 and len(attached) == 2
    assert {e["subject"] for e in attached} == {models[0]["digest"]}
    assert any((e["tag"] or "").endswith(".sig") for e in attached)


def test_list_rm_prune_on_the_default_store(tmp_path, store, capsys):
    make_model(tmp_path / "alpha")
    make_model(tmp_path / "beta", seed=1)
    assert main(["push", str(tmp_path / "alpha"), "-q", "--created", "2025-01-02T03:04:05Z"]) == 0
    assert main(["push", str(tmp_path / "beta"), "-q"]) == 0
    capsys.readouterr()
    listed = cli_json(capsys, "ls")
    assert [(e["name"], e["tag"], e["family"]) for e in listed] == [
        ("alpha", "latest", "cnai"), ("beta", "latest", "cnai")]
    assert [e["ref"] for e in listed] == ["alpha:latest", "beta:latest"]  # the store's names: NAME:TAG
    assert listed[0]["created"] == "2025-01-02T03:04:05Z" and listed[0]["size"] > 400_000
    assert main(["list"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["NAME", "TAG", "TOTAL", "CREATED", "FAMILY", "ATTACHED", "DIGEST"]
    # the local store shows NAME and TAG as they are typed: alpha:latest (issue 32)
    assert table[1].split()[:2] == ["alpha", "latest"] and "2025-01-02T03:04:05Z" in table[1]

    blobs = sorted((store / "blobs" / "sha256").iterdir())
    removed = cli_json(capsys, "rm", "beta")
    assert removed[0]["tags"] == ["beta:latest"]
    assert [e["name"] for e in cli_json(capsys, "ls")] == ["alpha"]
    # blobs of a just-written push are inside the grace period: kept, and said so
    kept = cli_json(capsys, "prune", "--dry-run")
    assert kept["blobs"] == [] and kept["keptRecent"] > 0
    old = time.time() - 3600
    for blob in blobs:
        os.utime(blob, (old, old))
    dry = cli_json(capsys, "prune", "--dry-run")
    assert dry["dryRun"] and len(dry["blobs"]) >= 3 and dry["bytes"] > 0
    assert sorted((store / "blobs" / "sha256").iterdir()) == blobs  # dry run: nothing removed
    done = cli_json(capsys, "prune")
    assert done["blobs"] == dry["blobs"]
    left = {f"sha256:{p.name}" for p in (store / "blobs" / "sha256").iterdir()}
    assert not left & set(done["blobs"])
    # alpha is whole still: it pulls and validates
    assert main(["validate", f"oci:{store}:alpha:latest"]) == 0
    assert main(["pull", f"oci:{store}:alpha:latest", str(tmp_path / "out"), "-q"]) == 0


def test_prune_spares_what_a_push_found_present_and_is_about_to_tag(tmp_path, capsys):
    model = make_model(tmp_path / "m")
    layout = f"oci:{tmp_path}/layout"
    assert main(["push", str(model), f"{layout}:a", "-q"]) == 0
    capsys.readouterr()
    manifest = cli_json(capsys, "resolve", f"{layout}:a")["digest"]
    assert main(["rm", f"{layout}:a"]) == 0
    blobs_dir = tmp_path / "layout" / "blobs" / "sha256"
    old = time.time() - 3600
    for blob in blobs_dir.iterdir():
        os.utime(blob, (old, old))
    # a push of the same model finds its manifest present (and skips everything under it); as
    # a writer, the layout touches what it finds: the manifest is recent again
    from ocibridge.oci.models import Descriptor
    from ocibridge.stores.layout import LayoutStore

    writer = LayoutStore(tmp_path / "layout", create=True)
    size = (blobs_dir / manifest.split(":")[1]).stat().st_size
    assert writer.exists(Descriptor(mediaType="application/vnd.oci.image.manifest.v1+json",
                                    digest=manifest, size=size))
    capsys.readouterr()
    # prune (default grace) meanwhile: the manifest and every blob it names stay
    kept = cli_json(capsys, "prune", layout)
    assert kept["blobs"] == [] and kept["keptRecent"] == 9
    # with no grace they all go
    assert len(cli_json(capsys, "prune", layout, "--grace", "0")["blobs"]) == 9


def test_rm_by_digest_removes_every_tag_and_unknown_names_fail(tmp_path, capsys):
    model = make_model(tmp_path / "m")
    layout = f"oci:{tmp_path}/layout"
    assert main(["push", str(model), f"{layout}:a", "-q"]) == 0
    capsys.readouterr()
    digest = cli_json(capsys, "tag", f"{layout}:a", "b", "c")["digest"]
    assert [e["tag"] for e in cli_json(capsys, "list", layout)] == ["a", "b", "c"]
    assert cli_json(capsys, "resolve", f"{layout}:c")["digest"] == digest
    assert sorted(cli_json(capsys, "rm", f"{layout}@{digest}")[0]["tags"]) == ["a", "b", "c"]
    assert cli_json(capsys, "list", layout) == []
    assert main(["rm", f"{layout}:a"]) == 1
    assert "tag not found" in capsys.readouterr().err


def test_cp_is_copy(tmp_path, capsys):
    model = make_model(tmp_path / "m")
    assert main(["push", str(model), f"oci:{tmp_path}/a:v1", "-q"]) == 0
    capsys.readouterr()
    copied = cli_json(capsys, "cp", f"oci:{tmp_path}/a:v1", f"oci:{tmp_path}/b:v1")
    assert copied["blobsCopied"] >= 8


def test_tag_resolve_attach_discover_delete_on_a_registry(tmp_path, capsys, registry, unique_repo):
    model = make_model(tmp_path / "m")
    ref = f"{registry.host}/{unique_repo}"
    assert main(["push", str(model), f"{ref}:v1", "-q"]) == 0
    capsys.readouterr()
    digest = cli_json(capsys, "resolve", f"{ref}:v1")["digest"]
    assert main(["resolve", f"{ref}:v1"]) == 0 and capsys.readouterr().out.strip() == digest
    assert cli_json(capsys, "tag", f"{ref}:v1", "stable")["tags"] == ["stable"]
    assert cli_json(capsys, "resolve", f"{ref}:stable")["digest"] == digest

    card = tmp_path / "card.md"
    card.write_text("# model card\n")
    attached = cli_json(capsys, "attach", f"{ref}:v1", str(card), "--artifact-type",
                        "application/vnd.example.card", "-a", "org.example.k=v")
    assert attached["subject"] == digest and attached["reference"] == f"{ref}@{attached['digest']}"
    sbom = tmp_path / "sbom.json"
    sbom.write_text("{}\n")
    cli_json(capsys, "attach", f"{ref}:v1", str(sbom), "--artifact-type", "application/spdx+json")

    found = cli_json(capsys, "discover", f"{ref}:v1")
    assert found["subject"] == digest
    assert sorted(r["artifactType"] for r in found["referrers"]) == [
        "application/spdx+json", "application/vnd.example.card"]
    only = cli_json(capsys, "discover", f"{ref}:v1", "--artifact-type", "application/spdx+json")
    assert [r["artifactType"] for r in only["referrers"]] == ["application/spdx+json"]
    assert main(["discover", f"{ref}:v1"]) == 0
    tree = capsys.readouterr().out
    assert tree.startswith(digest) and "application/vnd.example.card" in tree and attached["digest"] in tree

    # distribution 2.8 has no referrers API: the referrers live in the sha256-<hex> fallback tag,
    # each under its own tag too (what keeps it from garbage collection); `tags` shows them with --all
    assert main(["tags", ref, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == ["stable", "v1"]
    assert main(["tags", ref, "--json", "--all"]) == 0
    every = json.loads(capsys.readouterr().out)
    assert "sha256-" + digest.split(":")[1] in every and f"ocibridge-ref-{attached['digest'][7:]}" in every

    fallback = "sha256-" + digest.split(":")[1]
    # v1 and the referrers fallback tag go with `stable`: refused without --force (issue 32)
    assert main(["delete", f"{ref}:stable"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "v1" in err and fallback in err and "--force" in err
    assert cli_json(capsys, "resolve", f"{ref}:stable")["digest"] == digest  # nothing deleted
    deleted = cli_json(capsys, "delete", f"{ref}:stable", "--force")
    assert deleted["digest"] == digest and deleted["tags"] == ["stable", "v1", fallback]
    assert main(["resolve", f"{ref}:v1"]) == 1
    assert "manifest not found" in capsys.readouterr().err


def test_attach_and_discover_in_a_layout(tmp_path, capsys):
    model = make_model(tmp_path / "m")
    layout = f"oci:{tmp_path}/layout"
    assert main(["push", str(model), f"{layout}:v1", "-q"]) == 0
    capsys.readouterr()
    note = tmp_path / "note.txt"
    note.write_text("hello\n")
    attached = cli_json(capsys, "attach", f"{layout}:v1", str(note), "--artifact-type", "text/plain")
    found = cli_json(capsys, "discover", f"{layout}:v1")
    assert [r["digest"] for r in found["referrers"]] == [attached["digest"]]
    assert attached["reference"] == f"{layout}@{attached['digest']}"
    # a signature of the note: discover shows the chain
    sig = tmp_path / "note.sig"
    sig.write_text("signed\n")
    signed = cli_json(capsys, "attach", attached["reference"], str(sig), "--artifact-type", "application/x.sig")
    assert main(["discover", f"{layout}:v1"]) == 0
    tree = capsys.readouterr().out
    assert "text/plain" in tree and f"application/x.sig {signed['digest']}" in tree
    # rm of the model takes its attached artifacts (and theirs) along
    removed = cli_json(capsys, "rm", f"{layout}:v1")[0]
    assert sorted(removed["referrers"]) == sorted([attached["digest"], signed["digest"]])
    assert cli_json(capsys, "list", layout) == []


@pytest.mark.parametrize("args, message", [
    (["attach", "oci:{tmp}/l:v1", "{tmp}/missing.txt", "--artifact-type", "t/x"], "missing.txt: no such file"),
    (["attach", "oci:{tmp}/l:v1"], "--artifact-type"),
    (["tag", "oci:{tmp}/l:v1"], "TAG"),
    (["rm"], "REF"),
    (["prune", "--grace", "-1"], "--grace"),
])
def test_usage_mistakes_of_store_commands_exit_2(tmp_path, capsys, args, message):
    model = make_model(tmp_path / "m")
    assert main(["push", str(model), f"oci:{tmp_path}/l:v1", "-q"]) == 0
    capsys.readouterr()
    try:
        code = main([a.format(tmp=tmp_path) for a in args])
    except SystemExit as e:
        code = e.code
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("ocibridge: error:") and message in err and err.count("\n") == 1


def _signed_twice_tagged(ref: str, tmp_path, capsys) -> str:
    """A model tagged `tmp` and `keep`, with a cosign-style `sha256-<hex>.sig` tag beside it."""
    model = make_model(tmp_path / "m")
    assert main(["push", str(model), f"{ref}:tmp", "-q"]) == 0
    capsys.readouterr()
    digest = cli_json(capsys, "tag", f"{ref}:tmp", "keep")["digest"]
    note = tmp_path / "other"
    make_model(note, seed=3)
    assert main(["push", str(note), f"{ref}:sha256-{digest.split(':')[1]}.sig", "-q"]) == 0
    capsys.readouterr()
    return digest


@pytest.mark.parametrize("where", ["registry", "layout"])
def test_delete_lists_every_tag_that_goes_and_refuses_without_force(where, tmp_path, capsys, request):
    """`delete REG/ml/m:tmp` also removed `keep` and the cosign `.sig` tag, printing only `tmp`
    (issue 32): it now lists them, refuses without --force, and --dry-run deletes nothing."""
    if where == "registry":
        registry = request.getfixturevalue("registry")
        ref = f"{registry.host}/{request.getfixturevalue('unique_repo')}"
    else:
        ref = f"oci:{tmp_path}/layout"
    digest = _signed_twice_tagged(ref, tmp_path, capsys)
    sig_tag = f"sha256-{digest.split(':')[1]}.sig"
    assert main(["delete", f"{ref}:tmp"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "keep" in err and sig_tag in err and "Traceback" not in err
    dry = cli_json(capsys, "delete", f"{ref}:tmp", "--dry-run")
    assert dry["tags"] == ["tmp", "keep", sig_tag] and dry["dryRun"] is True
    assert main(["delete", f"{ref}:tmp", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"would delete {digest}") and "  tag keep" in out and f"  tag {sig_tag}" in out
    assert sorted(cli_json(capsys, "tags", ref, "--all")) == sorted(["tmp", "keep", sig_tag])  # all still there
    assert sorted(cli_json(capsys, "tags", ref)) == ["keep", "tmp"]  # cosign's hidden
    assert main(["delete", f"{ref}:tmp", "-f"]) == 0
    out = capsys.readouterr().out
    assert "  tag tmp" in out and "  tag keep" in out and f"  tag {sig_tag}" in out
    main(["tags", ref, "--json", "--all"])
    assert json.loads(capsys.readouterr().out) == []


def test_delete_of_the_only_tag_needs_no_force(tmp_path, capsys):
    model = make_model(tmp_path / "m")
    layout = f"oci:{tmp_path}/layout"
    assert main(["push", str(model), f"{layout}:only", "-q"]) == 0
    capsys.readouterr()
    assert cli_json(capsys, "delete", f"{layout}:only")["tags"] == ["only"]
