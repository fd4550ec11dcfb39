"""Issue 32 C: one name rule for every command. A bare ``NAME[:TAG]`` that names a model in the
local store means that model in every command that takes a reference; the commands are
enumerated from the parser, so a new one without a case here fails."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from ocibridge.cli import main
from ocibridge.cli.parser import build_parser
from tests.signing_keys import key_pair

#: commands that take no model reference (hosts, a job file, a layout path)
NO_REFERENCE = {("login",), ("logout",), ("mirror",), ("list",), ("ls",), ("prune",), ("k8s",),
                ("load",),  # load: a bundle file and a registry prefix or oci:DIR
                ("verify-dir",), ("check-registry",), ("cache",),  # a directory, a host, the cache
                ("serve",), ("k8s", "serve"),  # sources: registry prefixes, oci:DIR, the local store as a whole
                ("serve-usage",),  # serve's first source, a registry prefix
                ("k8s", "policy"),  # scopes as policy.json writes them (host, host/repo), keys
                ("keygen",), ("completion",),  # a file prefix; a shell's name
                ("repo",),  # repo ls REGISTRY[/PREFIX]: a registry's catalog
                ("umount",),  # umount DIR: a directory mount mounted
                ("warm",)}  # the group: its commands below each take one

#: argv per command, with {name} (the local model), {tmp} and {key}/{pub}; "ok" when it must
#: succeed, else it must fail for a reason other than the name (a registry-only operation)
CASES: dict[tuple[str, ...], tuple[list[str], bool]] = {
    ("push",): (["push", "{name}", "oci:{tmp}/pushed:v1"], True),  # a store as source: copied
    ("pull",): (["pull", "{name}", "{tmp}/out"], True),
    ("copy",): (["copy", "{name}", "oci:{tmp}/copied:v1"], True),
    ("cp",): (["cp", "{name}:latest", "oci:{tmp}/cp:v1"], True),
    ("convert",): (["convert", "{name}", "--to", "modelcar", "oci:{tmp}/car:v1"], True),
    ("inspect",): (["inspect", "{name}"], True),
    ("validate",): (["validate", "{name}"], True),
    ("tags",): (["tags", "{name}"], True),
    ("k8s", "check"): (["k8s", "check", "{name}", "--runtime", "cri-o"], False),
    ("k8s", "modelcar"): (["k8s", "modelcar", "{name}"], False),
    ("k8s", "volume"): (["k8s", "volume", "{name}"], False),
    ("k8s", "mount"): (["k8s", "mount", "{name}", "{tmp}/mounted"], True),
    ("k8s", "prewarm"): (["k8s", "prewarm", "{name}"], False),  # a node pulls from a registry
    ("k8s", "mount-daemon"): (["k8s", "mount-daemon", "{name}"], False),  # a node mounts from a registry
    ("mount",): (["mount", "{name}", "{tmp}/mounted"], False),  # lazy reads are of registry models
    ("sign",): (["sign", "{name}", "--key", "{key}"], True),
    ("attest",): (["attest", "{name}", "--key", "{key}", "--sbom"], True),
    ("verify",): (["verify", "{name}", "--key", "{pub}"], True),
    ("tag",): (["tag", "{name}:latest", "v2"], True),
    ("resolve",): (["resolve", "{name}"], True),
    ("attach",): (["attach", "{name}", "{tmp}/note.txt", "--artifact-type", "application/x-note"], True),
    ("discover",): (["discover", "{name}"], True),
    ("delete",): (["delete", "{name}"], False),
    ("save",): (["save", "{name}", "-o", "{tmp}/bundle.tar"], True),
    ("path",): (["path", "{name}"], True),
    ("cat",): (["cat", "{name}", "config.json"], False),  # lazy reads are of registry models
    ("chunks",): (["chunks", "{name}"], False),
    ("rm",): (["rm", "{name}"], True),
    ("manifest",): (["manifest", "fetch", "{name}"], True),
    ("diff",): (["diff", "{name}", "{name}"], False),  # diff compares registry models
    ("scan",): (["scan", "{name}", "--no-attach"], False),  # the test model's weights are no safetensors
    ("warm", "ls"): (["warm", "ls", "{name}"], False),
    ("warm", "save"): (["warm", "save", "{name}", "{tmp}"], False),  # this process's key needs torch's
    ("warm", "load"): (["warm", "load", "{name}", "{tmp}/warm"], False),
}
#: what a name taken for something else shows
WRONG_READINGS = ("docker.io", "local path, not a store", "not an OCI image layout", "tag not found")


def _commands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    found: set[tuple[str, ...]] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.add((*prefix, name))
                found |= _commands(sub, (*prefix, name))
    return found


def test_every_command_is_covered():
    commands = _commands(build_parser())
    missing = commands - NO_REFERENCE - set(CASES)
    assert not missing, f"commands without a local-name case: {sorted(missing)}"


@pytest.fixture()
def local_model(tmp_path, monkeypatch):
    monkeypatch.setenv("OCIBRIDGE_STORE", str(tmp_path / "store"))
    monkeypatch.setenv("OCIBRIDGE_CACHE", str(tmp_path / "cache"))
    model = tmp_path / "tiny-llama"
    model.mkdir()
    (model / "model.safetensors").write_bytes(bytes(range(256)) * 400)
    (model / "config.json").write_text('{"hidden": 4}\n')
    assert main(["push", str(model), "-q"]) == 0  # into the local store as tiny-llama:latest
    (tmp_path / "note.txt").write_text("a note\n")
    return "tiny-llama"


@pytest.mark.parametrize("command", sorted(CASES), ids=" ".join)
def test_a_local_name_means_the_local_model(command, local_model, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path / "store")  # nowhere the name is a path
    key, pub = key_pair(tmp_path)
    argv, ok = CASES[command]
    args = [a.format(name=local_model, tmp=tmp_path, key=key, pub=pub) for a in argv]
    if command == ("verify",):
        assert main(["sign", local_model, "--key", str(key)]) == 0
    code = main(args)
    err = capsys.readouterr().err
    assert not any(w in err for w in WRONG_READINGS), err
    if ok:
        assert code == 0, err
    if command == ("tag",):
        assert main(["inspect", f"{local_model}:v2"]) == 0  # the new local name: a TAG of NAME
    assert Path(tmp_path / "store").is_dir()


@pytest.mark.parametrize("argv", [["mount", "{name}", "{tmp}/mounted"], ["k8s", "mount-daemon", "{name}"]],
                         ids=" ".join)
def test_a_mount_of_a_local_name_is_refused_as_such(argv, local_model, tmp_path, capsys, monkeypatch):
    """Lazy mounts read registries: a local name is refused here, in one line, and nothing is left
    behind (the DaemonSet would have a node run 'ocibridge mount NAME' with no such store)."""
    monkeypatch.chdir(tmp_path / "store")
    assert main([a.format(name=local_model, tmp=tmp_path) for a in argv]) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and f"{local_model} is a model of the local store" in err, err
    assert out == "" and not (tmp_path / "mounted").exists()


def test_tags_of_a_name_held_only_under_other_tags_lists_them(local_model, capsys, monkeypatch, tmp_path):
    """``push tiny tiny:v1`` (docs/tasks.md), then ``tags tiny``: the store holds tiny:v1 and no
    tiny:latest. That went to docker.io, and its error added "tiny is not in the local store
    either; nearest there: … tiny:v1". NAME's TAGs are listed, as they are with a latest."""
    monkeypatch.chdir(tmp_path / "store")
    assert main(["tag", f"{local_model}:latest", "v1", "v2"]) == 0
    assert main(["rm", f"{local_model}:latest"]) == 0
    capsys.readouterr()
    assert main(["tags", local_model]) == 0
    out, err = capsys.readouterr()
    assert out == "v1\nv2\n" and err == "", err


def test_ls_shows_name_and_tag_as_they_are_typed(local_model, capsys):
    capsys.readouterr()
    assert main(["ls"]) == 0
    row = capsys.readouterr().out.splitlines()[1].split()
    assert row[:2] == ["tiny-llama", "latest"], row  # not the name again in the TAG column
    assert main(["inspect", f"{row[0]}:{row[1]}"]) == 0


# -- issue 39: the store's names are NAME:TAG, as Docker, kit and modctl users type them --------
import io  # noqa: E402
import itertools  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402

from ocibridge.api.store_ops import list_models  # noqa: E402
from ocibridge.oci.mediatypes import ANNOTATION_REF_NAME, OCI_MANIFEST, Family  # noqa: E402
from ocibridge.oci.models import Descriptor, Manifest  # noqa: E402
from ocibridge.oci.reference import parse_layout_reference  # noqa: E402
from ocibridge.stores.layout import LayoutStore  # noqa: E402
from ocibridge.stores.local_names import (  # noqa: E402
    find_local,
    rewrite_legacy,
    shown_name,
    split_local_name,
    stored_name,
)
from tests.modelgen import make_model  # noqa: E402

NAMES = ["m", "mymodel", "my-model", "qwen2.5", "myorg/model", "a/b/c", "x_y"]
TAGS = ["latest", "v2", "2.0", "big-v1", "V_3", "1.0-rc.1"]
NOT_NAMES = ["", "M", "MyModel:v1", "oci:m", "ollama:m", "hf:m", "ghcr.io/org/m:v1", "localhost/m",
             "localhost:5000/m", "my.host/m", "./m", "/m", "~/m", "m:", "m:v:2", "m@sha256:" + "0" * 64,
             "m:.v", "m:-v", "-m", "x__y", "m:_v", "m:v..2",  # no ref.name: a run of separators
              "m-", "m..n", "a//b", "m/", "m:" + "v" * 129, "with space"]


def test_split_local_name_reads_every_name_and_tag_and_refuses_the_rest():
    for name, tag in itertools.product(NAMES, TAGS):
        assert split_local_name(f"{name}:{tag}") == (name, tag)
        assert stored_name(*split_local_name(f"{name}:{tag}")) == f"{name}:{tag}"
    for name in NAMES:
        assert split_local_name(name) == (name, "latest")
    for text in NOT_NAMES:
        assert split_local_name(text) is None, text


def _model(store: LayoutStore, ref: str, config_name: str | None, seed: int) -> str:
    """A small ModelPack manifest named ``ref`` whose config names it ``config_name`` (none: an
    artifact of no model), as a layout written by any release holds it."""
    config_doc: dict[str, object] = {"seed": seed}
    if config_name is not None:
        config_doc["descriptor"] = {"name": config_name}
    data = json.dumps(config_doc).encode()
    family = Family.CNAI if config_name is not None else None
    config = Descriptor.for_bytes(family.config_media_type if family else "application/vnd.oci.empty.v1+json", data)
    store.push_blob(config, io.BytesIO(data))
    layer_data = f"layer {seed}".encode()
    layer = Descriptor.for_bytes("application/vnd.cnai.model.weight.v1.raw", layer_data)
    store.push_blob(layer, io.BytesIO(layer_data))
    body = Manifest(mediaType=OCI_MANIFEST, artifactType=family.artifact_type if family else "application/x-note",
                    config=config, layers=[layer]).to_json_bytes()
    desc = Descriptor.for_bytes(OCI_MANIFEST, body)
    store.push_manifest(desc, body, ref)
    return desc.digest


#: what the release before wrote: (ref.name, config name) -> the NAME:TAG it means
LEGACY = {("mymodel", "mymodel"): ("mymodel", "latest"), ("mymodel-2.0", "mymodel"): ("mymodel", "2.0"),
          ("v2", "mymodel"): ("mymodel", "v2"), ("big-v1", "bigmodel"): ("bigmodel", "big-v1"),
          ("qwen2.5-7b", "qwen2.5"): ("qwen2.5", "7b"), ("stable", "my model"): ("my-model", "stable"),
          ("notes", None): ("notes", "latest")}


@pytest.mark.parametrize(("ref", "config"), sorted(LEGACY, key=str))
def test_each_legacy_name_is_shown_as_what_finds_it(tmp_path, ref, config):
    store = LayoutStore(tmp_path / "s", create=True)
    _model(store, ref, config, 0)
    assert shown_name(ref, config) == LEGACY[(ref, config)]
    assert find_local(store, *shown_name(ref, config)) == ref


def test_new_names_are_shown_split_and_found(tmp_path):
    store = LayoutStore(tmp_path / "s", create=True)
    for n, (name, tag) in enumerate(itertools.product(NAMES, TAGS)):
        _model(store, f"{name}:{tag}", "whatever", n)
        assert shown_name(f"{name}:{tag}", "whatever") == (name, tag)
        assert find_local(store, name, tag) == f"{name}:{tag}"
    assert find_local(store, "m", "v9") is None and find_local(store, "nothing", "latest") is None


def _history(store: LayoutStore, rnd: random.Random) -> None:
    """What the release before (and a new one) may have written: pushes by name and version,
    ``tag NAME TAG``, loads, signatures, an artifact of no model, and new NAME:TAG names."""
    seed = itertools.count()
    for _ in range(rnd.randint(1, 8)):
        name, tag = rnd.choice(NAMES[:4]), rnd.choice(["v2", "2.0", "big-v1", "1.0-rc.1"])
        kind = rnd.choice(["push", "version", "tag", "load", "new", "sig", "note"])
        if kind == "push":
            _model(store, name, name, next(seed))
        elif kind == "version":
            _model(store, f"{name}-{tag}", name, next(seed))
        elif kind == "tag":
            _model(store, tag, name, next(seed))
        elif kind == "load":
            _model(store, f"{rnd.choice(['big', 'small'])}-{tag}", name, next(seed))
        elif kind == "new":
            _model(store, f"{name}:{tag}", name, next(seed))
        elif kind == "sig":
            _model(store, f"sha256-{'ab' * 32}.sig", None, next(seed))
        else:
            _model(store, "notes", None, next(seed))


@pytest.mark.parametrize("seed", range(40))
def test_every_pair_ls_prints_finds_its_entry_before_and_after_the_rewrite(tmp_path, monkeypatch, seed):
    """The invariant, over generated stores: every NAME:TAG ``ls`` prints is found by
    ``find_local`` as that entry, before the rewrite and after it; the rewrite keeps each entry's
    digest and the pairs ls prints; what is no model keeps its name."""
    monkeypatch.setenv("OCIBRIDGE_STORE", str(tmp_path / "store"))
    store = LayoutStore(tmp_path / "store", create=True)
    _history(store, random.Random(seed))

    def listed() -> set[tuple[str, str, str]]:
        entries = list_models(include_attached=True)
        for e in (e for e in entries if e.subject is None):
            assert find_local(store, e.name, e.tag) == e.ref, e
            assert e.ref is None or split_local_name(f"{e.name}:{e.tag}") == (e.name, e.tag), e
        return {(e.name, e.tag, e.digest) for e in entries}

    before = listed()
    digests = {e.digest for e in store.read_index().manifests}
    rewrite_legacy(store)
    assert listed() == before  # the same pairs name the same models
    assert {e.digest for e in store.read_index().manifests} == digests
    for entry in store.read_index().manifests:
        ref = (entry.annotations or {}).get(ANNOTATION_REF_NAME)
        assert ref is None or ":" in ref or ref == "notes" or ref.startswith("sha256-"), ref


def test_a_legacy_name_no_grammar_takes_is_found_then_rewritten_to_fit(tmp_path):
    store = LayoutStore(tmp_path / "s", create=True)
    digest = _model(store, "TinyLlama-V2", "TinyLlama", 1)  # the release before kept case
    assert shown_name("TinyLlama-V2", "TinyLlama") == ("TinyLlama", "V2")
    assert find_local(store, "TinyLlama", "V2") == "TinyLlama-V2"
    assert rewrite_legacy(store) == {"TinyLlama-V2": "tinyllama:V2"}
    assert find_local(store, *split_local_name("tinyllama:V2")) == "tinyllama:V2"
    assert store.resolve("tinyllama:V2").digest == digest


def test_rewrite_keeps_annotations_and_a_taken_name(tmp_path):
    store = LayoutStore(tmp_path / "s", create=True)
    old = _model(store, "mymodel", "mymodel", 1)
    index = store.read_index()
    index.manifests[0].annotations = {**(index.manifests[0].annotations or {}), "org.example": "kept"}
    (tmp_path / "s" / "index.json").write_bytes(index.to_json_bytes())
    _model(store, "v2", "mymodel", 2)
    taken = _model(store, "mymodel:v2", "mymodel", 3)  # shadows the legacy v2: ls shows that one v2:latest
    kept = _model(store, "m", "m", 4)
    _model(store, "m:latest", "m", 5)  # an old release wrote m beside it: m:latest is taken
    assert rewrite_legacy(store) == {"mymodel": "mymodel:latest", "v2": "v2:latest"}
    named = {(e.annotations or {}).get(ANNOTATION_REF_NAME): e for e in store.read_index().manifests}
    assert named["mymodel:latest"].digest == old and named["mymodel:latest"].annotations["org.example"] == "kept"
    assert named["mymodel:v2"].digest == taken and named["m"].digest == kept  # never overwritten


def test_layout_names_hold_colons_and_oci_references_split_as_containers_image_does(tmp_path):
    store = LayoutStore(tmp_path / "store", create=True)
    _model(store, "myorg/model:v1", "model", 1)
    ref = parse_layout_reference(f"oci:{tmp_path}/store:mymodel:v2")
    assert (ref.path, ref.tag) == (f"{tmp_path}/store", "mymodel:v2")
    ref = parse_layout_reference(f"oci:{tmp_path}/store:myorg/model:v1")  # the layout on disk decides
    assert (ref.path, ref.tag) == (f"{tmp_path}/store", "myorg/model:v1")
    ref = parse_layout_reference(f"oci:{tmp_path}/new:m:v1")  # no layout there yet: the last part's first ':'
    assert (ref.path, ref.tag) == (f"{tmp_path}/new", "m:v1")
    assert parse_layout_reference("oci:dir:tag").tag == "tag"
    assert parse_layout_reference("oci:dir@sha256:" + "a" * 64).digest == "sha256:" + "a" * 64
    assert parse_layout_reference("oci:dir").tag is None


# -- the CLI -----------------------------------------------------------------------------------
@pytest.fixture()
def local(tmp_path, monkeypatch):
    """An empty local store, the cache and XDG places in tmp; cwd: a folder holding ``m/``."""
    for var, sub in (("OCIBRIDGE_STORE", "store"), ("OCIBRIDGE_CACHE_DIR", "cache"), ("XDG_DATA_HOME", "data"),
                     ("XDG_CACHE_HOME", "xcache"), ("XDG_CONFIG_HOME", "config")):
        monkeypatch.setenv(var, str(tmp_path / sub))
    work = tmp_path / "work"
    make_model(work / "m")
    monkeypatch.chdir(work)
    return tmp_path


def _json(capsys, *argv: str):
    capsys.readouterr()
    code = main([*argv, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def _refs(tmp_path) -> dict[str, str]:
    index = json.loads((tmp_path / "store" / "index.json").read_text())
    return {m["annotations"][ANNOTATION_REF_NAME]: m["digest"] for m in index["manifests"]
            if ANNOTATION_REF_NAME in (m.get("annotations") or {})}


def test_push_names_the_model_dirname_latest_and_name_version(local, capsys):
    latest = _json(capsys, "push", "./m", "-q")["digest"]
    assert _refs(local) == {"m:latest": latest}
    two = _json(capsys, "push", "./m", "--version", "2.0", "-q")["digest"]
    assert _refs(local) == {"m:latest": latest, "m:2.0": two}  # the earlier one keeps its name
    assert [(e["name"], e["tag"]) for e in _json(capsys, "ls")] == [("m", "2.0"), ("m", "latest")]
    named = _json(capsys, "push", "./m", "--name", "Tiny Llama", "--version", "1.0 beta", "-q")["digest"]
    assert _refs(local)["tiny-llama:1.0-beta"] == named  # made to fit the grammars


def test_push_to_a_local_name_and_with_t(local, capsys):
    one = _json(capsys, "push", "./m", "mine:v1", "-q")["digest"]
    two = _json(capsys, "push", "./m", "-t", "myorg/other:v2", "--version", "9", "-q")["digest"]
    three = _json(capsys, "push", "./m", "ubuntu", "-q")["digest"]  # no host: a local name, as Docker reads it
    assert _refs(local) == {"mine:v1": one, "myorg/other:v2": two, "ubuntu:latest": three}
    assert main(["push", "./m", "a:v1", "-t", "b:v1"]) == 2
    assert "not both" in capsys.readouterr().err


def test_tag_gives_a_local_name_more_tags_or_other_names(local, capsys):
    digest = _json(capsys, "push", "./m", "-q")["digest"]
    assert _json(capsys, "tag", "m", "v2", "other:v3")["tags"] == ["m:v2", "other:v3"]
    assert _json(capsys, "resolve", "m:v2")["digest"] == digest
    assert _json(capsys, "resolve", "other:v3")["digest"] == digest
    assert _refs(local) == {"m:latest": digest, "m:v2": digest, "other:v3": digest}
    assert main(["tag", "m", "Bad:v1"]) == 2


@pytest.mark.parametrize("argv", [["rm", "m:v9"], ["tag", "m:v9", "v10"], ["resolve", "nothing"],
                                  ["delete", "m:v9"], ["discover", "m:v9"]])
def test_an_unknown_local_name_is_one_line(local, capsys, argv):
    assert main(["push", "./m", "-q"]) == 0
    capsys.readouterr()
    assert main(argv) == 1
    name = argv[1] if ":" in argv[1] else f"{argv[1]}:latest"
    line = f"ocibridge: error: no model {name} in the local store (ocibridge ls lists them)\n"
    assert capsys.readouterr().err == line


def test_a_push_says_when_the_path_shadows_a_stored_name(local, capsys):
    assert main(["push", "./m", "-q"]) == 0
    capsys.readouterr()
    assert main(["push", "m", "-q"]) == 0
    assert "pushing the directory m (the local store also holds m:latest)" in capsys.readouterr().err


def test_skopeo_reads_a_local_name_in_the_store(local, capsys):
    skopeo = shutil.which("skopeo")
    assert skopeo, "skopeo is installed by scripts/test"
    digest = _json(capsys, "push", "./m", "-q")["digest"]
    raw = subprocess.run([skopeo, "inspect", "--raw", f"oci:{local}/store:m:latest"],
                         capture_output=True, check=True).stdout
    assert Descriptor.for_bytes(OCI_MANIFEST, raw).digest == digest


def _legacy_store(local, capsys) -> dict[str, str]:
    """A store as the release before wrote it: mymodel, mymodel-2.0, v2 (``tag mymodel v2``),
    big-v1 (a load of big:v1 whose config says bigmodel), a signature's tag."""
    other = f"oci:{local}/legacy"
    digests = {}
    for n, (ref, name, version) in enumerate([("mymodel", "mymodel", None), ("mymodel-2.0", "mymodel", "2.0"),
                                              ("big-v1", "bigmodel", None)]):
        make_model(local / f"src{n}", seed=n)
        extra = ["--version", version] if version else []
        digests[ref] = _json(capsys, "push", str(local / f"src{n}"), f"{other}:{ref}", "--name", name, *extra,
                             "-q")["digest"]
    assert main(["tag", f"{other}:mymodel", "v2"]) == 0
    key, _ = key_pair(local / "keys")
    assert main(["sign", f"{other}:mymodel", "--key", str(key), "--form", "classic"]) == 0
    (local / "legacy").rename(local / "store")
    return digests


LEGACY_PAIRS = {("mymodel", "latest"): "mymodel", ("mymodel", "2.0"): "mymodel-2.0",
                ("mymodel", "v2"): "mymodel", ("bigmodel", "big-v1"): "big-v1"}


def test_a_store_of_the_release_before_is_read_then_rewritten_on_the_next_write(local, capsys):
    digests = _legacy_store(local, capsys)
    shown = {(e["name"], e["tag"]): e["digest"] for e in _json(capsys, "ls")}
    assert shown == {pair: digests[ref] for pair, ref in LEGACY_PAIRS.items()}
    for (name, tag), digest in shown.items():
        assert _json(capsys, "resolve", f"{name}:{tag}")["digest"] == digest
        assert main(["inspect", f"{name}:{tag}"]) == 0
    assert "big:v1" not in {f"{n}:{t}" for n, t in shown} and main(["resolve", "big:v1"]) == 0  # as before
    before = _refs(local)
    assert "mymodel" in before and "v2" in before  # a read wrote nothing
    assert main(["push", "./m", "-q"]) == 0  # a write: every name becomes NAME:TAG
    refs = _refs(local)
    sig = [r for r in refs if r.endswith(".sig")]
    assert sorted(refs) == sorted(["bigmodel:big-v1", "m:latest", "mymodel:2.0", "mymodel:latest", "mymodel:v2", *sig])
    assert len(sig) == 1 and sig[0] in before  # a signature keeps its name
    assert {(e["name"], e["tag"]): e["digest"] for e in _json(capsys, "ls") if e["name"] != "m"} == shown


def test_every_command_takes_every_pair_ls_prints_from_a_folder_holding_that_name(local, capsys):
    """THE test of issue 39: each NAME:TAG ``ls`` prints (new names, and those of a store the
    release before wrote) is accepted by every command that takes a model reference, run from a
    folder holding a directory of the same name, and acts on the stored model."""
    _legacy_store(local, capsys)
    assert main(["push", "./m", "-q", "--name", "othername", "--version", "3"]) == 0  # a write: rewritten
    assert main(["tag", "othername:3", "m"]) == 0  # othername:m, and a folder m holds another model
    entries = _json(capsys, "ls")
    assert len(entries) == 6
    for entry in entries:  # a directory of each NAME and NAME:TAG printed, holding another model
        for text in (entry["name"], f"{entry['name']}:{entry['tag']}"):
            make_model(local / "work" / text, seed=9)
    for n, entry in enumerate(entries):
        name = f"{entry['name']}:{entry['tag']}"
        digest = entry["digest"]
        for bare in ([name, entry["name"]] if entry["tag"] == "latest" else [name]):
            assert _json(capsys, "resolve", bare)["digest"] == digest, bare
        assert _json(capsys, "inspect", name)["digest"] == digest
        assert _json(capsys, "validate", name)["digest"] == digest
        out = local / f"pulled{n}"
        assert _json(capsys, "pull", name, str(out), "-q")["digest"] == digest
        assert (out / "model.safetensors").is_file()
        assert _json(capsys, "copy", name, f"oci:{local}/copied{n}:x", "-q")["digest"] == digest
        assert entry["tag"] in _json(capsys, "tags", name)
        assert _json(capsys, "discover", name)["subject"] == digest
        assert _json(capsys, "tag", name, f"t{n}")["digest"] == digest
        assert _json(capsys, "resolve", f"{entry['name']}:t{n}")["digest"] == digest
    for entry in entries:
        assert _json(capsys, "rm", f"{entry['name']}:{entry['tag']}")[0]["digest"] == entry["digest"]
    assert {(e["name"], e["tag"]) for e in _json(capsys, "ls")} == {(e["name"], f"t{n}") for n, e in enumerate(entries)}
