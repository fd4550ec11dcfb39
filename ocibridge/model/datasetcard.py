"""A dataset card's metadata: the YAML front matter of a dataset's top ``README.md``, mapped into
the ModelPack config and manifest annotations as a model card's is (:mod:`.cardmeta`), with the
fields the Hub reads on a dataset card, and read back as its ``cardData``.

==================  ==============================================================
front matter        artifact
==================  ==============================================================
``license``         ``descriptor.licenses`` (as a model card's)
``language``        ``config.capabilities.languages`` (as a model card's)
``tags``            annotation ``io.ocibridge.card.tags`` (as a model card's)
``task_categories`` annotation ``io.ocibridge.card.task_categories`` (comma-joined)
``pretty_name``     annotation ``io.ocibridge.card.pretty_name``
``configs``         annotation ``io.ocibridge.card.configs``: the list as compact JSON, keys
                    sorted (``datasets`` reads its configs, splits and data files there)
==================  ==============================================================

The card is untrusted and bounded as a model card's is; ``configs`` is kept only as a list of
mappings of strings, booleans, numbers and lists of them, of at most :data:`MAX_CONFIGS_JSON`
characters, else left out (never a reason to fail a push).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ocibridge.core import boundedjson
from ocibridge.model.cardmeta import ANNOTATION_TAGS, _values, card_fields, read_front_matter
from ocibridge.model.package import ModelPackage

ANNOTATION_TASK_CATEGORIES = "io.ocibridge.card.task_categories"
ANNOTATION_PRETTY_NAME = "io.ocibridge.card.pretty_name"
ANNOTATION_CONFIGS = "io.ocibridge.card.configs"
#: characters of the configs' JSON kept in its annotation (a card's configs take a few hundred)
MAX_CONFIGS_JSON = 16 * 1024
#: how deep the configs nest (a list of configs, each a mapping, data_files a list of mappings of lists)
MAX_DEPTH = 5


def _plain(value: Any, depth: int = 0) -> bool:
    """JSON-able data of the kinds a card's configs hold, nesting at most MAX_DEPTH."""
    if depth > MAX_DEPTH:
        return False
    if value is None or isinstance(value, (str, bool, int, float)):
        return True
    if isinstance(value, list):
        return all(_plain(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v, depth + 1) for k, v in value.items())
    return False


def configs_text(configs: Any) -> str | None:
    """The card's ``configs`` as the annotation keeps them, or None when they are not a bounded
    list of mappings of plain values."""
    if not isinstance(configs, list) or not configs or not all(isinstance(c, dict) for c in configs):
        return None
    if not _plain(configs):
        return None
    try:
        text = json.dumps(configs, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except ValueError:
        return None
    return text if len(text) <= MAX_CONFIGS_JSON else None


def dataset_card_fields(front: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    """(descriptor fields, config fields, manifest annotations) a dataset card's front matter says."""
    descriptor, config, model_annotations = card_fields(front)
    annotations = {k: v for k, v in model_annotations.items() if k == ANNOTATION_TAGS}
    tasks = _values(front.get("task_categories"))
    if tasks:
        annotations[ANNOTATION_TASK_CATEGORIES] = ",".join(tasks)
    pretty = _values(front.get("pretty_name"))
    if pretty:
        annotations[ANNOTATION_PRETTY_NAME] = pretty[0]
    configs = configs_text(front.get("configs"))
    if configs is not None:
        annotations[ANNOTATION_CONFIGS] = configs
    return descriptor, config, annotations


def fill_dataset(package: ModelPackage) -> None:
    """Set the descriptor, config and annotations a dataset's card says and the package does not."""
    descriptor, config, annotations = dataset_card_fields(read_front_matter(package.files))
    for key, value in descriptor.items():
        package.descriptor.setdefault(key, value)
    for key, value in config.items():
        package.config.setdefault(key, value)
    for key, text in annotations.items():
        package.annotations.setdefault(key, text)


def dataset_card_data(config_doc: Mapping[str, Any], annotations: Mapping[str, str]) -> dict[str, Any]:
    """The Hub's ``cardData`` of a dataset artifact: the mapped fields read back."""
    from ocibridge.model.cardmeta import card_data

    data = {k: v for k, v in card_data(config_doc, annotations).items() if k in ("license", "language", "tags")}
    tasks = _values(annotations.get(ANNOTATION_TASK_CATEGORIES, "").split(","))
    if tasks:
        data["task_categories"] = tasks
    pretty = annotations.get(ANNOTATION_PRETTY_NAME)
    if pretty:
        data["pretty_name"] = pretty
    configs = annotations.get(ANNOTATION_CONFIGS, "")
    if configs and len(configs) <= MAX_CONFIGS_JSON:  # a registry's annotation: bounded before it is parsed
        try:
            parsed = boundedjson.loads(configs.encode())
        except ValueError:  # not JSON, or nested too deep (boundedjson.JsonTooDeep)
            parsed = None
        if configs_text(parsed) is not None:
            data["configs"] = parsed
    return data
