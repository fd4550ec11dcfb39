"""References are parsed once, at the edge (issue 27): a registry → registry copy and a
directory → registry push turn each reference the user typed into a typed ``Reference`` one
time, pass that value down, and close every registry client they open.

The probe runs the CLI in a fresh interpreter with ``ResourceWarning`` as an error and a
counter on every function that parses or classifies a reference text, wherever a module
bound it (``from ... import name``) and in modules imported later."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.client_probe import CLIENT_COUNTER, run_probe, small_model

PROBE = CLIENT_COUNTER + """
import collections, json

import ocibridge.cli.transfer, ocibridge.api.model_ops, ocibridge.api.copy, ocibridge.kinds.door
import ocibridge.kinds.targets as targets, ocibridge.oci.reference as refs, ocibridge.kinds.door as door
calls = collections.Counter()
def counted(label, fn):
    def run(text, *a, **k):
        calls[label + " " + str(text)] += 1
        return fn(text, *a, **k)
    return run
originals = {{}}
for label, module, name in (("parse", refs, "parse_reference"),
                            ("registry", refs, "parse_registry_reference"),
                            ("layout", refs, "parse_layout_reference"),
                            ("ollama", refs, "parse_ollama_reference"),
                            ("classify", refs, "is_store_reference"),
                            ("classify-door", door, "is_store_reference"),
                            ("local", targets, "local_store_reference"),
                            ("is-layout", refs, "is_layout_reference"),
                            ("is-ollama", refs, "is_ollama_reference"),
                            ("on-registry", refs, "on_registry")):
    fn = getattr(module, name)
    originals[fn] = counted(label, fn)
for mod in list(sys.modules.values()):
    if getattr(mod, "__name__", "").startswith("ocibridge"):
        for attr, value in list(vars(mod).items()):
            if callable(value) and value in originals:
                setattr(mod, attr, originals[value])
from ocibridge.cli import main
code = main({args!r})
gc.collect()
print("RESULT", json.dumps({{"made": len(made), "closed": len(closed & set(made)), "exit": code,
                             "calls": dict(calls)}}))
"""


def _run(args: list[str], cwd: Path) -> tuple[dict[str, object], str]:
    done = run_probe(PROBE.format(args=args), cwd)
    assert "RESULT" in done.stdout, (args, done.stdout, done.stderr)
    return json.loads(done.stdout.split("RESULT", 1)[1]), done.stderr


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    return small_model(tmp_path)


def _assert_parsed_once(result: dict[str, object], texts: list[str], scheme: str,
                        paths: tuple[str, ...] = ()) -> None:
    calls = result["calls"]
    assert isinstance(calls, dict)
    for text in texts:
        assert calls.get(f"parse {text}") == 1, (text, calls)  # the edge: one parse per reference
        assert calls.get(f"{scheme} {text}") == 1, (text, calls)  # its scheme's parser, once
    over = {key: n for key, n in calls.items() if n > 1}
    assert not over, over  # nothing classified twice
    parsed = {key.split(" ", 1)[1] for key in calls if key.startswith("parse ")}
    assert parsed == {*texts, *paths}, calls  # and nothing derived from them parsed again


def _assert_closed(result: dict[str, object], err: str) -> None:
    assert result["exit"] == 0, (result, err)
    assert isinstance(result["made"], int) and result["made"] >= 1
    assert result["closed"] == result["made"], result
    assert "ResourceWarning" not in err, err


def test_a_registry_copy_parses_each_reference_once(registry, unique_repo, model_dir, tmp_path):
    src, dst = f"{registry.host}/{unique_repo}:v1", f"{registry.host}/{unique_repo}-copy:v1"
    pushed, err = _run(["push", "-q", str(model_dir), src], tmp_path)
    _assert_closed(pushed, err)
    copied, err = _run(["copy", "-q", src, dst], tmp_path)
    _assert_closed(copied, err)
    _assert_parsed_once(copied, [src, dst], "registry")


def test_a_directory_push_parses_each_reference_once(registry, unique_repo, model_dir, tmp_path):
    dst = f"{registry.host}/{unique_repo}:v1"
    pushed, err = _run(["push", "-q", str(model_dir), dst], tmp_path)
    _assert_closed(pushed, err)
    _assert_parsed_once(pushed, [dst], "registry", paths=(str(model_dir),))
    calls = pushed["calls"]
    assert isinstance(calls, dict)
    assert calls.get(f"parse {model_dir}") == 1, calls  # the source: a path, known as one once


def test_typed_references_are_used_as_they_are(model_dir, tmp_path, monkeypatch):
    """The API takes a parsed ``Reference`` as well as a text (compatibility) and parses it no
    further: a copy between two layouts named by typed values calls no parser."""
    import ocibridge.oci.reference as refs
    from ocibridge.api.copy import copy_reference
    from ocibridge.api.model_ops import push

    pushed = push(str(model_dir), f"oci:{tmp_path / 'a'}:v1")

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"parsed again: {args}")

    for name in ("parse_reference", "parse_layout_reference", "parse_registry_reference"):
        monkeypatch.setattr(refs, name, refuse)
    copied = copy_reference(refs.LayoutReference(str(tmp_path / "a"), "v1"),
                            refs.LayoutReference(str(tmp_path / "b"), "v2"))
    assert copied.descriptor.digest == pushed.descriptor.digest
    assert copied.reference == f"oci:{tmp_path / 'b'}:v2@{pushed.descriptor.digest}"
