"""A dataset card's front matter into the artifact and back (model/datasetcard.py): the fields the Hub
reads on a dataset card kept, anything unbounded or not plain data left out, never an error."""

from __future__ import annotations

import json

import yaml

from ocibridge.model.datasetcard import (
    ANNOTATION_CONFIGS,
    MAX_CONFIGS_JSON,
    configs_text,
    dataset_card_data,
    dataset_card_fields,
)

FRONT = yaml.safe_load("""
license: apache-2.0
language: [en, fr, not-a-code]
tags: [legal]
task_categories: [summarization, translation]
pretty_name: Court rulings
base_model: someone/model
configs:
- config_name: en
  data_files:
  - split: train
    path: en/train-*.parquet
  default: true
- config_name: fr
  data_files: fr/*.parquet
""")


def test_the_fields_go_into_the_config_and_annotations_and_come_back_as_card_data():
    descriptor, config, annotations = dataset_card_fields(FRONT)
    assert descriptor == {"licenses": ["apache-2.0"]} and config == {"capabilities": {"languages": ["en", "fr"]}}
    assert annotations["io.ocibridge.card.task_categories"] == "summarization,translation"
    assert annotations["io.ocibridge.card.pretty_name"] == "Court rulings"
    assert "io.ocibridge.card.base_model" not in annotations  # a model card's field, not a dataset's
    assert json.loads(annotations[ANNOTATION_CONFIGS]) == FRONT["configs"]
    back = dataset_card_data({"descriptor": descriptor, "config": config}, annotations)
    assert back == {"license": "apache-2.0", "language": ["en", "fr"], "tags": ["legal"],
                    "task_categories": ["summarization", "translation"], "pretty_name": "Court rulings",
                    "configs": FRONT["configs"]}


def test_configs_that_are_not_plain_bounded_data_are_left_out():
    assert configs_text(yaml.safe_load("- config_name: x\n  since: 2024-01-01\n")) is None  # a date: not JSON
    assert configs_text({"config_name": "x"}) is None  # a mapping, not a list of them
    assert configs_text([{"data_files": "a" * MAX_CONFIGS_JSON}]) is None
    deep: object = "x"
    for _ in range(10):
        deep = [deep]
    assert configs_text([{"data_files": deep}]) is None
    assert dataset_card_fields({"configs": "default"})[2] == {}


def test_a_registry_s_configs_annotation_is_read_bounded():
    assert "configs" not in dataset_card_data({}, {ANNOTATION_CONFIGS: "[" * 100_000})
    assert "configs" not in dataset_card_data({}, {ANNOTATION_CONFIGS: "[" * 5000 + "]" * 5000})
    assert "configs" not in dataset_card_data({}, {ANNOTATION_CONFIGS: '{"not": "a list"}'})
    assert dataset_card_data({}, {ANNOTATION_CONFIGS: '[{"config_name":"a"}]'}) == {"configs": [{"config_name": "a"}]}
