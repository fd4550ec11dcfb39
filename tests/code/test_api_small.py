"""The smaller commands from Python (issue 51): save and load, check_registry, the model cache's
bounds and directory, discover's tree, inspect's text, chunks, login: each a function with a
typed, frozen result whose ``as_dict()`` is the command's ``--json``."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

import ocibridge
from ocibridge.cli import main
from tests.modelgen import make_model


def _layout_with_two_models(tmp_path):
    layout = f"oci:{tmp_path / 'site-a'}"
    for n, name in enumerate(("first", "second")):
        ocibridge.push(str(make_model(tmp_path / name, seed=n)), f"{layout}:{name}")
    return layout


def test_save_two_models_of_a_layout_and_load_them_into_another(tmp_path, capsys):
    layout = _layout_with_two_models(tmp_path)
    refs = [f"{layout}:first", f"{layout}:second"]
    saved = ocibridge.save(refs, tmp_path / "models.tar")
    assert isinstance(saved, ocibridge.BundleResult) and saved.path == str(tmp_path / "models.tar")
    assert [e.reference for e in saved.entries] == refs
    with pytest.raises(dataclasses.FrozenInstanceError):
        saved.path = "elsewhere"  # type: ignore[misc]

    listed = ocibridge.list_bundle(tmp_path / "models.tar")
    assert listed.entries == saved.entries

    other = f"oci:{tmp_path / 'site-b'}"
    loaded = ocibridge.load(tmp_path / "models.tar", other)
    assert loaded.destinations == (f"{other}:first@{saved.entries[0].digest}",
                                   f"{other}:second@{saved.entries[1].digest}")
    for entry, name in zip(saved.entries, ("first", "second"), strict=True):
        assert ocibridge.resolve(f"{other}:{name}").digest == entry.digest == ocibridge.resolve(entry.reference).digest

    # the command prints the same as_dict() for --json
    capsys.readouterr()
    assert main(["load", "--list", str(tmp_path / "models.tar"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == listed.as_dict()


def test_check_registry_returns_a_frozen_report(registry, unique_repo, capsys):
    bare = ocibridge.check_registry(registry.host)
    assert isinstance(bare, ocibridge.RegistryReport)
    assert (bare.host, bare.repository, bare.chunked_uploads) == (registry.host, None, None)
    assert bare.notes and "HOST/REPO" in bare.notes[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        bare.mount = True  # type: ignore[misc]

    tried = ocibridge.check_registry(f"{registry.host}/{unique_repo}")
    assert tried.repository == unique_repo
    assert tried.monolithic_uploads is True and tried.chunked_uploads is True and tried.mount is True
    capsys.readouterr()
    assert main(["check-registry", registry.host, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == bare.as_dict()


def test_cache_dir_and_prune(registry, unique_repo, tmp_path, monkeypatch):
    monkeypatch.setenv("OCIBRIDGE_CACHE", str(tmp_path / "cache"))
    ref = f"{registry.host}/{unique_repo}:v1"
    ocibridge.push(str(make_model(tmp_path / "m")), ref)
    snapshot = ocibridge.path(ref)
    assert (snapshot / "config.json").read_text() == '{"hidden": 4}\n'
    assert ocibridge.cache_dir() == tmp_path / "cache" / "models"
    assert snapshot.is_relative_to(ocibridge.cache_dir())

    kept = ocibridge.prune_cache(older_than=3600)  # used just now: stays
    assert kept.snapshots == () and (snapshot / "config.json").is_file()
    done = ocibridge.prune_cache(max_size=0)  # nothing fits: everything goes
    assert isinstance(done, ocibridge.CachePruneResult)
    assert len(done.snapshots) == 1 and done.blobs >= 3 and done.freed > 200_000 and not snapshot.exists()
    assert done.as_dict()["snapshots"] == list(done.snapshots)
    with pytest.raises(ocibridge.OcibridgeError):
        ocibridge.prune_cache()


def test_discover_gives_the_tree_of_referrers(tmp_path, capsys):
    layout = f"oci:{tmp_path / 'layout'}"
    ocibridge.push(str(make_model(tmp_path / "m")), f"{layout}:v1")
    (tmp_path / "card.md").write_text("# card\n")
    (tmp_path / "sig.txt").write_text("signed\n")
    card = ocibridge.attach(f"{layout}:v1", [str(tmp_path / "card.md")], artifact_type="application/vnd.example.card")
    sig = ocibridge.attach(card.reference, [str(tmp_path / "sig.txt")], artifact_type="application/vnd.example.sig")

    flat = ocibridge.discover(f"{layout}:v1")
    assert [r.digest for r in flat.referrers] == [card.descriptor.digest] and flat.tree == ()
    found = ocibridge.discover(f"{layout}:v1", tree=True)
    assert found.as_dict() == flat.as_dict()  # the tree is not part of --json
    (node,) = found.tree
    assert isinstance(node, ocibridge.ReferrerNode)
    assert node.descriptor.digest == card.descriptor.digest
    assert [n.descriptor.digest for n in node.referrers] == [sig.descriptor.digest]
    assert node.referrers[0].referrers == ()

    capsys.readouterr()
    assert main(["discover", f"{layout}:v1"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        found.subject.digest, "└── application/vnd.example.card", f"    └── {card.descriptor.digest}",
        f"        └── application/vnd.example.sig {sig.descriptor.digest}"]


def test_inspect_text_is_what_the_command_prints(tmp_path, capsys):
    layout = f"oci:{tmp_path / 'layout'}"
    ocibridge.push(str(make_model(tmp_path / "m")), f"{layout}:v1")
    text = ocibridge.inspect_text(ocibridge.inspect(f"{layout}:v1"))
    assert "model.safetensors" in text
    capsys.readouterr()
    assert main(["inspect", f"{layout}:v1"]) == 0
    assert capsys.readouterr().out == text + "\n"


def test_chunks_result_names_where_to_sign(registry, unique_repo, tmp_path):
    ref = f"{registry.host}/{unique_repo}:v1"
    ocibridge.push(str(make_model(tmp_path / "m")), ref, options=ocibridge.PushOptions(chunks=False))
    result = ocibridge.attach_chunks(ref, threshold=1)
    assert isinstance(result, ocibridge.ChunksResult) and not result.bound
    assert result.repository == f"{registry.host}/{unique_repo}" and "repository" not in result.as_dict()
    assert result.layers >= 1
    assert [r.digest for r in ocibridge.discover(ref).referrers] == [result.referrer]


def test_login_remembers_how_the_host_was_reached(auth_registry, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "docker"))
    plain = ocibridge.login(auth_registry.host, auth_registry.username, auth_registry.password)
    assert plain.settings is None and plain.as_dict()["settings"] is None
    result = ocibridge.login(auth_registry.host, auth_registry.username, auth_registry.password,
                             transfer=ocibridge.TransferOptions(plain_http=True))
    assert result.settings is not None and auth_registry.host in Path(result.settings).read_text()
    capsys.readouterr()
    assert main(["login", auth_registry.host, "-u", auth_registry.username, "-p", auth_registry.password,
                 "--plain-http", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == result.as_dict()
    assert ocibridge.logout(auth_registry.host) is True and ocibridge.logout(auth_registry.host) is False


def test_push_options_build_cannot_be_changed_after_construction(tmp_path):
    """BuildOptions sits inside the frozen PushOptions: neither its fields nor the mappings and
    set it holds change after construction (not even through the dict the caller passed in);
    a change is a new value, and a push reads what was given."""
    annotations = {"org.example.team": "vision"}
    build = ocibridge.BuildOptions(variants={ocibridge.Kind.DOC: ocibridge.Variant.TAR},
                                   group={ocibridge.Kind.CODE}, annotations=annotations)
    options = ocibridge.PushOptions(build=build)
    assert options.build is not None
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.build.annotations = {}  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.build.family = ocibridge.Family.CNCF  # type: ignore[misc]
    with pytest.raises(TypeError):
        options.build.annotations["org.example.team"] = "audio"  # type: ignore[index]
    with pytest.raises(TypeError):
        options.build.variants[ocibridge.Kind.DOC] = ocibridge.Variant.RAW  # type: ignore[index]
    with pytest.raises(AttributeError):
        options.build.group.add(ocibridge.Kind.DOC)  # type: ignore[attr-defined]
    annotations["org.example.team"] = "audio"  # the caller's own dict is not the options'
    assert options.build.annotations == {"org.example.team": "vision"}

    changed = dataclasses.replace(build, annotations={**build.annotations, "org.example.owner": "me"})
    assert dict(changed.annotations) == {"org.example.team": "vision", "org.example.owner": "me"}
    assert dict(build.annotations) == {"org.example.team": "vision"}
    layout = f"oci:{tmp_path / 'out'}"
    ocibridge.push(str(make_model(tmp_path / "m")), f"{layout}:v1", options=options)
    manifest = json.loads(ocibridge.fetch_manifest(f"{layout}:v1").content)
    assert manifest["annotations"]["org.example.team"] == "vision"  # what was given, not the later edit


def test_one_text_where_a_list_goes_is_one_item_not_its_letters(tmp_path):
    """``ocibridge.tag(ref, "v3")`` tagged the model 'v' and '3'; ``save("oci:…", out)`` looked
    each letter up on docker.io; ``attach(ref, "note.txt", …)`` said "/: no such file" and
    ``verification("cosign.pub")`` "public key /: Is a directory" (a str is a Sequence[str], so
    mypy let them all through). One text is one tag, model, file or key, as k8s's calls read it."""
    from tests.signing_keys import key_pair

    layout = _layout_with_two_models(tmp_path)
    assert ocibridge.tag(f"{layout}:first", "v3").tags == ("v3",)
    assert ocibridge.tags(layout) == ["first", "second", "v3"]
    assert [e.reference for e in ocibridge.save(f"{layout}:first", tmp_path / "one.tar").entries] == [f"{layout}:first"]
    (tmp_path / "note.txt").write_text("a note\n")
    attached = ocibridge.attach(f"{layout}:first", str(tmp_path / "note.txt"), artifact_type="application/x-note")
    assert attached.subject.digest == ocibridge.resolve(f"{layout}:first").digest
    _, pub = key_pair(tmp_path)
    assert ocibridge.verification(str(pub)) is not None
    kept = ocibridge.path(f"{layout}:first", include="config.json")
    assert sorted(p.name for p in kept.iterdir()) == ["config.json"]
