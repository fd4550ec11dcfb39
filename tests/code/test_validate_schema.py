"""``validate`` as model-spec's and image-spec's JSON Schemas check (issue 53 item 10), the CLI
as a process: ``null`` for a field and impossible dates are refused, and ``--strict`` checks
the syntax of every media type."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hostile_run import run_cli

from ocibridge.model.config import is_rfc3339
from tests.modelgen import make_bert_model
from tests.support.data import data

SCHEMA = json.loads(data("model-spec", "config-schema.json").read_text())


def _blob(layout: Path, body: bytes) -> dict[str, Any]:
    digest = hashlib.sha256(body).hexdigest()
    (layout / "blobs" / "sha256" / digest).write_bytes(body)
    return {"digest": f"sha256:{digest}", "size": len(body)}


def rewrite(layout: Path, config: Callable[[dict[str, Any]], None] = lambda c: None,
            manifest: Callable[[dict[str, Any]], None] = lambda m: None) -> None:
    """Change the config and the manifest of the layout's one model, names and index kept right."""
    index = json.loads((layout / "index.json").read_text())
    entry = index["manifests"][0]
    doc = json.loads((layout / "blobs" / "sha256" / entry["digest"].split(":")[1]).read_bytes())
    cfg = json.loads((layout / "blobs" / "sha256" / doc["config"]["digest"].split(":")[1]).read_bytes())
    config(cfg)
    doc["config"].update(_blob(layout, json.dumps(cfg).encode()))
    manifest(doc)
    entry.update(_blob(layout, json.dumps(doc).encode()))
    (layout / "index.json").write_text(json.dumps(index))


@pytest.fixture
def layout(tmp_path) -> Path:
    ran = run_cli("push", str(make_bert_model(tmp_path / "tiny", weights=4)), f"oci:{tmp_path / 'layout'}:v1", "-q")
    assert ran.code == 0, ran.err
    assert run_cli("validate", f"oci:{tmp_path / 'layout'}:v1").code == 0
    return tmp_path / "layout"


def test_null_is_no_value_and_impossible_dates_are_refused(layout):
    nulls = [("descriptor", "name"), ("descriptor", "authors"), ("config", "capabilities"), ("config", "paramSize")]

    def set_nulls(config: dict[str, Any]) -> None:
        for where, field in nulls:
            config[where][field] = None

    rewrite(layout, config=set_nulls)
    ran = run_cli("validate", f"oci:{layout}:v1")
    assert ran.code == 1
    for where, field in nulls:
        assert f"config: {where}.{field}: Value error, null is not allowed" in ran.err, ran.err
    import jsonschema  # not at collection, where every worker paid for it (its format checkers build grammars)

    checker = jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker())
    for moment in ("2025-13-01T00:00:00Z", "2025-01-01T25:00:00Z", "2025-02-30T00:00:00Z", "2025-01-01T00:61:00Z",
                   "2025-01-01T00:00:00+24:00"):
        assert not checker.is_valid({"descriptor": {"createdAt": moment}, "config": {},
                                     "modelfs": {"type": "layers", "diffIds": ["x"]}})
        rewrite(layout, config=lambda c, moment=moment: c.update(descriptor={"createdAt": moment}, config={}))
        ran = run_cli("validate", f"oci:{layout}:v1")
        assert ran.code == 1 and "config: descriptor.createdAt: Value error, must be an RFC 3339" in ran.err, ran.err
        assert ran.err.count("  - ") == 1, ran.err  # the date, nothing else


def test_possible_dates_pass():
    for moment in ("2024-02-29T23:59:60Z", "2025-12-31T00:00:00.5+05:30", "2025-06-01t12:00:00z"):
        assert is_rfc3339(moment), moment


def test_strict_checks_media_type_syntax(layout):
    subject = {"mediaType": "not a type", "digest": "sha256:" + "0" * 64, "size": 2}
    rewrite(layout, manifest=lambda m: m.__setitem__("subject", subject))
    ran = run_cli("validate", f"oci:{layout}:v1")
    assert ran.code == 0 and "warning: subject.mediaType: 'not a type' is not a media type (RFC 6838" in ran.out
    ran = run_cli("validate", f"oci:{layout}:v1", "--strict")
    assert ran.code == 1 and "(strict) subject.mediaType: 'not a type' is not a media type" in ran.err, ran.err
