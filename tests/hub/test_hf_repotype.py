"""The dataset naming contract (kinds/hf/repotype.py): a dataset's registry path can never be a model's."""

from __future__ import annotations

import pytest

from ocibridge.kinds.hf.repotype import (
    DATASET,
    MODEL,
    dataset_file_kind,
    model_id_allowed,
    registry_parts,
)
from ocibridge.oci.mediatypes import Kind


def test_a_dataset_lives_under_datasets_and_a_model_never_does() -> None:
    assert registry_parts(DATASET, ["acme", "x"]) == ["datasets", "acme", "x"]
    assert registry_parts(MODEL, ["acme", "x"]) == ["acme", "x"]
    assert registry_parts(DATASET, ["squad"]) == ["datasets", "squad"]
    assert not model_id_allowed(["datasets", "squad"])
    assert not model_id_allowed(["spaces"])
    assert model_id_allowed(["acme", "datasets"])


def test_an_unknown_type_is_refused() -> None:
    with pytest.raises(ValueError, match="space"):
        registry_parts("space", ["a", "b"])


def test_a_datasets_card_is_a_doc_and_every_other_file_is_data() -> None:
    assert dataset_file_kind("README.md") is Kind.DOC
    assert dataset_file_kind("data/README.md") is Kind.DATASET
    assert dataset_file_kind("data/train-00000-of-00001.parquet") is Kind.DATASET
    assert dataset_file_kind("default/test.jsonl") is Kind.DATASET
