"""The config model must accept and reject exactly as the model-spec's 27 vectors say,
and the committed JSON Schemas must match the models."""

import json
from pathlib import Path

import pytest

from ocibridge.api import schemas
from ocibridge.errors import ValidationError
from ocibridge.model.config import parse_config
from tests.support.data import data

VECTORS = json.loads(data("model-spec", "schema-config_test.go.vectors.json").read_text())
REPO = Path(__file__).resolve().parents[2]


def test_there_are_27_vectors():
    assert len(VECTORS) == 27


@pytest.mark.parametrize("vector", VECTORS, ids=[v["description"] for v in VECTORS])
def test_config_vectors(vector):
    if vector["expectValid"]:
        parsed = parse_config(vector["config"])
        # Round trip: serialising again gives the same document.
        assert json.loads(parsed.to_json_bytes()) == vector["config"]
    else:
        with pytest.raises(ValidationError) as info:
            parse_config(vector["config"])
        assert info.value.reasons, "a rejection must name at least one reason"


def test_spec_example_config_is_valid():
    example = json.loads(data("model-spec", "docs-config.md.example.json").read_text())
    assert json.loads(parse_config(example).to_json_bytes()) == example


def test_errors_name_field_and_rule():
    with pytest.raises(ValidationError) as info:
        parse_config({"descriptor": {"version": 3}, "config": {}, "modelfs": {"type": "x", "diffIds": []}})
    text = "\n".join(info.value.reasons)
    assert "descriptor.version" in text and "string" in text
    assert "modelfs.type" in text
    assert "modelfs.diffIds" in text


def test_committed_schemas_are_current():
    for name, schema in schemas.generate().items():
        path = REPO / "schemas" / f"{name}.schema.json"
        assert path.exists(), f"{path} missing: run python -m ocibridge.api.schemas schemas"
        assert path.read_text() == schemas.render(schema), (
            f"{path} is stale: run python -m ocibridge.api.schemas schemas"
        )
