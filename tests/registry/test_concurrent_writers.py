"""Concurrent writers (issue 34, item 8): a failing writer's undo never removes what another
writer relies on, and two pulls into one new directory cannot both win.

The races are made deterministic with events: hooks on the store hold one writer at the point
where the other must act (the interleaving that lost data before the fix).
"""

from __future__ import annotations

import json
import random
import threading
from pathlib import Path

import pytest

from ocibridge.cli import main
from ocibridge.stores.layout import LayoutStore
from ocibridge.stores.leases import LEASE_DIR
from tests.kinds.test_carton import TOML, make_carton, noise, sha
from tests.modelgen import make_model, tree

WAIT = 30.0


def _run(argv: list[str], codes: dict[str, int], name: str) -> None:
    codes[name] = main(argv)


def test_failed_push_does_not_take_a_blob_another_push_found_present(tmp_path: Path, monkeypatch, capsys) -> None:
    """A (a carton whose last file fails its MANIFEST check) writes the shared file's blob; B,
    pushing a carton with the same file, finds it present and skips it; A fails and undoes its
    new blobs; B then tags. B's artifact must be whole: validate and pull pass."""
    from ocibridge.kinds.carton import reader

    monkeypatch.setattr(reader, "EAGER_VERIFY_BYTES", 0)  # the streamed check, as for a big carton
    shared = noise(50_000, 7)
    big_good = random.Random(1).randbytes(9 << 20)
    manifest = {p: sha(d) for p, d in {"carton.toml": TOML, "tensor_data/index.toml": b"tensor = []\n",
                                       "model/shared.bin": shared, "model/z.bin": big_good}.items()}
    bad = tmp_path / "bad.carton"
    make_carton(bad, {"model/shared.bin": shared, "model/z.bin": big_good[:-1] + b"!"}, manifest=manifest)
    good = tmp_path / "good.carton"
    make_carton(good, {"model/shared.bin": shared, "model/other.bin": noise(3000, 9)})
    layout = tmp_path / "layout"
    shared_digest = "sha256:" + sha(shared)

    a_wrote, b_found, a_undone = threading.Event(), threading.Event(), threading.Event()
    push_blob, exists, undo = LayoutStore.push_blob, LayoutStore.exists, LayoutStore._remove_unreferenced

    def held_push_blob(self, desc, reader, **kw):  # type: ignore[no-untyped-def]
        push_blob(self, desc, reader, **kw)
        if desc.digest == shared_digest:
            a_wrote.set()  # only A writes it: B starts once it is there

    def held_exists(self, desc):  # type: ignore[no-untyped-def]
        found = exists(self, desc)
        if found and desc.digest == shared_digest and a_wrote.is_set() and not b_found.is_set():
            b_found.set()  # B found it present, and skips it: it waits there for A's undo
            assert a_undone.wait(WAIT), "A never undid its blobs"
        return found

    def held_undo(self, digests):  # type: ignore[no-untyped-def]
        assert b_found.wait(WAIT), "B never looked for the shared blob"
        try:
            undo(self, digests)
        finally:
            a_undone.set()

    monkeypatch.setattr(LayoutStore, "push_blob", held_push_blob)
    monkeypatch.setattr(LayoutStore, "exists", held_exists)
    monkeypatch.setattr(LayoutStore, "_remove_unreferenced", held_undo)
    codes: dict[str, int] = {}
    a = threading.Thread(target=_run, args=(
        ["push", str(bad), f"oci:{layout}:bad", "--concurrency", "1", "-q"], codes, "A"))
    a.start()
    assert a_wrote.wait(WAIT), "A never wrote the shared blob"
    b = threading.Thread(target=_run, args=(["push", str(good), f"oci:{layout}:good", "-q"], codes, "B"))
    b.start()
    a.join(WAIT * 2)
    b.join(WAIT * 2)
    assert codes == {"A": 1, "B": 0}
    assert b_found.is_set() and a_undone.is_set(), "the race was not played as scripted"
    capsys.readouterr()
    monkeypatch.undo()
    assert (layout / "blobs" / "sha256" / sha(shared)).is_file(), "A's undo removed the blob B relies on"
    assert main(["validate", f"oci:{layout}:good"]) == 0
    out = tmp_path / "out"
    assert main(["pull", f"oci:{layout}:good", str(out), "-q"]) == 0
    assert (out / "model" / "shared.bin").read_bytes() == shared or any(
        p.read_bytes() == shared for p in out.rglob("shared.bin"))
    assert LayoutStore(layout).tags() == ["good"]
    assert not (layout / LEASE_DIR).exists(), "a finished writer left its lease behind"


def test_undo_keeps_what_a_live_lease_claims_and_drops_dead_leases(tmp_path: Path) -> None:
    """Store level: a blob claimed by another live writer survives an undo; once that writer
    is gone (its lease no longer locked), the next undo may remove it."""
    from ocibridge.oci.models import Descriptor

    layout = tmp_path / "layout"
    data = b"shared bytes"
    desc = Descriptor(mediaType="application/octet-stream", digest="sha256:" + sha(data), size=len(data))
    a, b = LayoutStore(layout, create=True), LayoutStore(layout, create=True)
    import io

    with pytest.raises(RuntimeError), a.removing_new_blobs_on_failure():
        a.push_blob(desc, io.BytesIO(data))
        assert b.exists(desc)  # B relies on it from now on
        raise RuntimeError("A fails")
    assert a.blob_path(desc.digest).is_file()
    b.close()  # B is done (or died): its lease is over
    with pytest.raises(RuntimeError), a.removing_new_blobs_on_failure():
        a._note_created(desc.digest)
        raise RuntimeError("A fails again")
    assert not a.blob_path(desc.digest).exists()


def _documents(text: str) -> list[dict[str, object]]:
    """The JSON documents printed one after another (two commands, one stdout)."""
    decoder, found, at = json.JSONDecoder(), [], 0
    while (at := text.find("{", at)) >= 0:
        doc, at = decoder.raw_decode(text, at)
        found.append(doc)
    return found


@pytest.mark.parametrize("flags", [[], ["--keep-old-files"]], ids=["refuse", "keep"])
def test_two_pulls_into_one_new_directory_cannot_both_win(tmp_path: Path, monkeypatch, capsys, registry,
                                                          unique_repo, flags) -> None:
    """Two pulls of different artifacts (same paths, other contents) into one new directory,
    without --overwrite: the first to commit wins, the other sees its files and fails with one
    line (or, with -k, keeps them); DIR holds the winner's tree exactly. The hook makes the first
    pull wait, before it looks at DIR, until the second has looked too (or 3 s, when a lock
    keeps the second out): without the lock both looked at an empty directory and both won."""
    from ocibridge.model import extract

    models = {name: make_model(tmp_path / name, seed=seed) for name, seed in (("a", 1), ("b", 2))}
    for name, model in models.items():
        assert main(["push", str(model), f"{registry.host}/{unique_repo}:{name}", "-q"]) == 0
    capsys.readouterr()
    out = tmp_path / "out"
    plan_commit = extract.plan_commit
    arrived: list[str] = []
    second = threading.Event()

    def held_plan(staging, dest, files, policy):  # type: ignore[no-untyped-def]
        arrived.append(threading.current_thread().name)
        if len(arrived) == 1:
            second.wait(3.0)  # the other pull, if nothing keeps it out
        else:
            second.set()
        return plan_commit(staging, dest, files, policy)

    monkeypatch.setattr(extract, "plan_commit", held_plan)
    codes: dict[str, int] = {}
    threads = [threading.Thread(target=_run, name=name, args=(
        ["pull", f"{registry.host}/{unique_repo}:{name}", str(out), "-q", "--json", *flags], codes, name))
        for name in models]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT * 2)
    captured = capsys.readouterr()
    assert len(arrived) == 2
    winner = arrived[0]
    if flags:  # -k: both succeed, and the later one kept the files the first wrote
        assert codes == {"a": 0, "b": 0}, captured.err
        kept = [doc.get("kept") for doc in _documents(captured.out)]
        assert len(kept) == 2 and sorted(map(bool, kept)) == [False, True], kept
    else:
        assert sorted(codes.values()) == [0, 1] and codes[winner] == 0, (codes, arrived, captured.err)
        errors = [line for line in captured.err.splitlines() if line.strip()]
        assert len(errors) == 1 and errors[0].startswith("ocibridge: error:") and "Traceback" not in captured.err
    assert tree(out) == tree(models[winner]), "DIR is not the winner's tree"


def test_ollama_undo_keeps_blobs_claimed_or_named_by_a_manifest(tmp_path: Path) -> None:
    """The Ollama store's undo: a blob another export found present (live lease) stays, and so
    does one a manifest names once that export finished (its lease is over by then)."""
    import io

    from ocibridge.kinds.ollama import OllamaStore, parse_ollama_name
    from ocibridge.oci.models import Descriptor

    root = tmp_path / "models"
    data = b"GGUF shared weights"
    desc = Descriptor(mediaType="application/vnd.ollama.image.model", digest="sha256:" + sha(data),
                      size=len(data))
    a = OllamaStore(root, parse_ollama_name("a"), create=True)
    b = OllamaStore(root, parse_ollama_name("b"), create=True)
    b_writing = b.removing_new_blobs_on_failure()
    with pytest.raises(RuntimeError), a.removing_new_blobs_on_failure():
        a.push_blob(desc, io.BytesIO(data))
        b_writing.__enter__()
        assert b.exists(desc)  # B relies on it, and is still writing when A fails
        raise RuntimeError("A fails")
    assert a.blob_path(desc.digest).is_file(), "A's undo removed the blob B claimed"
    b_writing.__exit__(None, None, None)
    assert not (root / LEASE_DIR).exists()
    # B done and gone; a manifest of B's names the blob: A's next undo keeps it too
    manifest = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
                           "layers": [{"mediaType": desc.mediaType, "digest": desc.digest, "size": desc.size}]})
    (root / "manifests" / "registry.ollama.ai" / "library" / "b").mkdir(parents=True)
    (root / "manifests" / "registry.ollama.ai" / "library" / "b" / "latest").write_text(manifest)
    with pytest.raises(RuntimeError), a.removing_new_blobs_on_failure():
        a._created.append(a.blob_path(desc.digest))  # type: ignore[union-attr]
        raise RuntimeError("A fails again")
    assert a.blob_path(desc.digest).is_file(), "A's undo removed a blob a manifest names"


def test_a_writer_never_closed_or_killed_leaves_no_lease_that_counts(tmp_path: Path) -> None:
    """A store dropped without close() ends its lease; a writer killed (os._exit: no cleanup)
    leaves an unlocked lease, which the next undo removes without keeping its claims."""
    import gc
    import io
    import subprocess
    import sys

    from ocibridge.oci.models import Descriptor

    layout = tmp_path / "layout"
    data = b"claimed then dropped"
    desc = Descriptor(mediaType="application/octet-stream", digest="sha256:" + sha(data), size=len(data))
    dropped = LayoutStore(layout, create=True)
    dropped.push_blob(desc, io.BytesIO(data))
    assert (layout / LEASE_DIR).is_dir()
    del dropped
    gc.collect()
    assert not (layout / LEASE_DIR).exists()
    killed = subprocess.run([sys.executable, "-c", (
        "import os, sys\n"
        "from ocibridge.stores.layout import LayoutStore\n"
        "from ocibridge.oci.models import Descriptor\n"
        f"s = LayoutStore({str(layout)!r}, create=True)\n"
        f"s.exists(Descriptor(mediaType='application/octet-stream', digest={desc.digest!r}, size={desc.size}))\n"
        "os._exit(0)\n")], timeout=60)
    assert killed.returncode == 0 and len(list((layout / LEASE_DIR).iterdir())) == 1
    store = LayoutStore(layout, create=True)
    with pytest.raises(RuntimeError), store.removing_new_blobs_on_failure():
        store._note_created(desc.digest)
        raise RuntimeError("fails")
    assert not store.blob_path(desc.digest).exists(), "a dead writer's claim kept the blob"
    assert not (layout / LEASE_DIR).exists()
