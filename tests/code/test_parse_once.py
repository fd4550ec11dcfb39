"""What a text names is decided once, at the edge (issue 39): every command turns each reference
the user typed into a typed locator with one call of :func:`ocibridge.places.locate.locate`, passes
that value down, no reference grammar reads the same text twice, and every registry client it
opens is closed.

The probe runs the CLI with ``ResourceWarning`` as an error and a counter on ``locate`` (texts
only: a typed locator passing through is no parse) and on every grammar and name rule, wherever a
module bound it and in modules imported later: one interpreter sets the counters up, and each
command runs in a process forked from it, as fresh as an interpreter of its own."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.signing_keys import key_pair
from tests.support.client_probe import CLIENT_COUNTER, run_probe_each, small_model

SETUP = CLIENT_COUNTER + """
import collections, json

import ocibridge.places.locate as locate_module, ocibridge.oci.reference as refs
import ocibridge.kinds.hf.locator as hub, ocibridge.places.targets as targets
calls = collections.Counter()
def counted(label, fn, texts_only=False):
    def run(text, *a, **k):
        if isinstance(text, str) or not texts_only:
            calls[label + " " + str(text)] += 1
        return fn(text, *a, **k)
    return run
originals = {}
for label, module, name, texts_only in (("locate", locate_module, "locate", True),
                                        ("registry", refs, "parse_registry_reference", False),
                                        ("layout", refs, "parse_layout_reference", False),
                                        ("ollama", refs, "parse_ollama_reference", False),
                                        ("ollama-name", refs, "parse_ollama_name", False),
                                        ("hub", hub, "parse_hub_reference", False),
                                        ("local", targets, "local_store_reference", False)):
    fn = getattr(module, name)
    originals[fn] = counted(label, fn, texts_only)
for mod in list(sys.modules.values()):
    if getattr(mod, "__name__", "").startswith("ocibridge"):
        for attr, value in list(vars(mod).items()):
            if callable(value) and value in originals:
                setattr(mod, attr, originals[value])
from ocibridge.cli import main
"""
TAIL = """
code = main(args)
gc.collect()
print("RESULT", json.dumps({"made": len(made), "closed": len(closed & set(made)), "exit": code,
                           "calls": dict(calls)}))
"""


def _counts(done: subprocess.CompletedProcess[str]) -> tuple[dict[str, object], str]:
    """What one command of a probe counted, and its stderr."""
    assert "RESULT" in done.stdout, (done.args, done.stdout, done.stderr)
    return json.loads(done.stdout.split("RESULT", 1)[1]), done.stderr


@pytest.fixture(scope="module")
def world(registry, tmp_path_factory):
    """A model in the registry (signed, with a chunk table), one in the local store, a mirror
    job: what every command below reads; and what each command of COMMANDS did, run in order."""
    home = tmp_path_factory.mktemp("parse-once")
    model = small_model(home)
    repo = f"{registry.host}/parse-once/m"
    key, pub = key_pair(home)
    (home / "job.toml").write_text(f'[[sync]]\nsource = "{repo}:v1"\ntarget = "oci:{home}/mirrored"\n')
    names = {"home": home, "model": str(model), "repo": repo, "key": str(key), "pub": str(pub)}
    pushes = [["push", "-q", str(model), f"{repo}:v1"], ["push", "-q", str(model), "mym:v1"]]
    commands = [[a.format(**names) for a in argv] for argv, _ in COMMANDS]
    runs = run_probe_each(SETUP, TAIL, pushes + commands, home, tmp_path_factory.mktemp("parse-once-runs"))
    for done in runs[:len(pushes)]:
        result, err = _counts(done)
        assert result["exit"] == 0, err
    return {**names, "runs": runs[len(pushes):]}


#: every command that takes a reference: (argv, the texts in it that are references)
COMMANDS: list[tuple[list[str], list[str]]] = [
    (["push", "-q", "{model}", "{repo}:v2"], ["{model}", "{repo}:v2"]),
    (["push", "-q", "{model}", "other:v1"], ["{model}", "other:v1"]),
    (["copy", "-q", "{repo}:v1", "{repo}-copy:v1"], ["{repo}:v1", "{repo}-copy:v1"]),
    (["copy", "-q", "mym:v1", "oci:{home}/copied:v1"], ["mym:v1", "oci:{home}/copied:v1"]),
    (["pull", "-q", "{repo}:v1", "{home}/out-reg"], ["{repo}:v1", "{home}/out-reg"]),
    (["pull", "-q", "mym:v1", "{home}/out-local"], ["mym:v1", "{home}/out-local"]),
    (["path", "{repo}:v1"], ["{repo}:v1"]),
    (["path", "mym:v1"], ["mym:v1"]),
    (["inspect", "{repo}:v1"], ["{repo}:v1"]),
    (["validate", "mym:v1"], ["mym:v1"]),
    (["tags", "{repo}:v1"], ["{repo}:v1"]),
    (["resolve", "mym:v1"], ["mym:v1"]),
    (["tag", "mym:v1", "v9"], ["mym:v1"]),
    (["discover", "{repo}:v1"], ["{repo}:v1"]),
    (["delete", "--dry-run", "{repo}:v1"], ["{repo}:v1"]),
    (["sign", "{repo}:v1", "--key", "{key}"], ["{repo}:v1"]),
    (["verify", "{repo}:v1", "--key", "{pub}"], ["{repo}:v1"]),
    (["convert", "-q", "{repo}:v1", "oci:{home}/kit:v1", "--to", "modelkit"], ["{repo}:v1", "oci:{home}/kit:v1"]),
    (["save", "-q", "{repo}:v1", "mym:v1", "-o", "{home}/bundle.tar"], ["{repo}:v1", "mym:v1"]),
    (["chunks", "{repo}:v1"], ["{repo}:v1"]),
    (["cat", "{repo}:v1", "config.json"], ["{repo}:v1"]),
    (["k8s", "check", "{repo}:v1"], ["{repo}:v1"]),
    (["k8s", "volume", "{repo}:v1"], ["{repo}:v1"]),
    (["k8s", "prewarm", "{repo}:v1"], ["{repo}:v1"]),
    (["attest", "{repo}:v1", "--key", "{key}", "--sbom"], ["{repo}:v1"]),
    (["mirror", "{home}/job.toml"], ["{repo}:v1", "oci:{home}/mirrored"]),
    (["rm", "mym:v9"], ["mym:v9"]),
]


@pytest.mark.parametrize("index", range(len(COMMANDS)), ids=[" ".join(c[0][:2]) for c in COMMANDS])
def test_every_command_locates_each_reference_once(world, index):
    argv, texts = COMMANDS[index]
    args = [a.format(**world) for a in argv]
    result, err = _counts(world["runs"][index])
    assert result["exit"] == 0, (args, err)
    calls = result["calls"]
    assert isinstance(calls, dict)
    for text in (t.format(**world) for t in texts):
        assert calls.get(f"locate {text}") == 1, (text, calls)  # the edge: one locate per reference
    over = {key: n for key, n in calls.items() if n > 1}
    assert not over, over  # no grammar or name rule reads a text twice
    located = {key.split(" ", 1)[1] for key in calls if key.startswith("locate ")}
    assert located == {t.format(**world) for t in texts}, calls  # and nothing derived from them again
    assert result["closed"] == result["made"], result  # every registry client closed
    assert "ResourceWarning" not in err, err


def test_typed_references_are_used_as_they_are(tmp_path, monkeypatch):
    """The API takes a locator as well as a text and parses it no further: a copy between two
    layouts named by typed values calls no grammar."""
    import ocibridge.oci.reference as refs
    from ocibridge.api.copy import copy_reference
    from ocibridge.api.model_ops import push

    model_dir = small_model(tmp_path)
    pushed = push(str(model_dir), f"oci:{tmp_path / 'a'}:v1")

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"parsed again: {args}")

    for name in ("parse_layout_reference", "parse_registry_reference", "parse_ollama_reference"):
        monkeypatch.setattr(refs, name, refuse)
    copied = copy_reference(refs.LayoutReference(str(tmp_path / "a"), "v1"),
                            refs.LayoutReference(str(tmp_path / "b"), "v2"))
    assert copied.descriptor.digest == pushed.descriptor.digest
    assert copied.reference == f"oci:{tmp_path / 'b'}:v2@{pushed.descriptor.digest}"
