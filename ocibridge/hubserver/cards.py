"""A model card's metadata as the Hub reads and checks it: one reading of a README for
``POST /api/validate-yaml`` (what huggingface_hub's ``ModelCard.validate``, ``metadata_update``
and a ``create_commit`` that adds a README.md ask before they upload) and for the model page
(web/card.py), so the page shows what the check says.

The Hub's rules kept here, with its words (huggingface_hub's tests match them; its client puts
"Invalid metadata in README.md." before each error when a commit's README fails):

- no metadata block, or an empty mapping: a warning, the card is accepted;
- a block YAML cannot parse: "Invalid YAML in README.md: ..."; an empty block, or one that is
  no mapping: refused;
- ``license``: one of the Hub's license identifiers (or a list of them), else
  ``"license" must be one of [...]``;
- ``model-index`` (model cards): a list of models, each with ``name`` and ``results``, each
  result with ``task.type``, ``dataset.type`` and ``dataset.name``, and ``metrics`` that each
  have a ``type`` and a ``value`` (huggingface_hub's model card spec, modelcard.md of
  huggingface/hub-docs), else the path of what is wrong: ``"model-index[0].results" is required``.

Other fields are not checked: a card the Hub refuses for another reason passes here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from ocibridge.model.cardmeta import front_block

#: the Hub's license identifiers, in its order: huggingface/hub-docs docs/hub/repositories-licenses.md
#: (commit fd6cf1f, 2026-06-06), the list the Hub's own refusal of ``license: asdf`` names too
LICENSES = (
    "apache-2.0", "mit", "openrail", "bigscience-openrail-m", "creativeml-openrail-m", "bigscience-bloom-rail-1.0",
    "bigcode-openrail-m", "afl-3.0", "artistic-2.0", "bsl-1.0", "bsd", "bsd-2-clause", "bsd-3-clause",
    "bsd-3-clause-clear", "c-uda", "cc", "cc0-1.0", "cc-by-2.0", "cc-by-2.5", "cc-by-3.0", "cc-by-4.0",
    "cc-by-sa-3.0", "cc-by-sa-4.0", "cc-by-nc-2.0", "cc-by-nc-3.0", "cc-by-nc-4.0", "cc-by-nd-4.0",
    "cc-by-nc-nd-3.0", "cc-by-nc-nd-4.0", "cc-by-nc-sa-2.0", "cc-by-nc-sa-3.0", "cc-by-nc-sa-4.0",
    "cdla-sharing-1.0", "cdla-permissive-1.0", "cdla-permissive-2.0", "wtfpl", "ecl-2.0", "epl-1.0", "epl-2.0",
    "etalab-2.0", "eupl-1.1", "eupl-1.2", "agpl-3.0", "gfdl", "gpl", "gpl-2.0", "gpl-3.0", "lgpl", "lgpl-2.1",
    "lgpl-3.0", "isc", "h-research", "intel-research", "lppl-1.3c", "ms-pl", "apple-ascl", "apple-amlr",
    "mpl-2.0", "odc-by", "odbl", "openmdw-1.0", "openmdw-1.1", "openrail++", "osl-3.0", "postgresql", "ofl-1.1",
    "ncsa", "unlicense", "zlib", "pddl", "lgpl-lr", "deepfloyd-if-license", "fair-noncommercial-research-license",
    "llama2", "llama3", "llama3.1", "llama3.2", "llama3.3", "llama4", "grok2-community", "gemma", "unknown",
    "other",
)
_LICENSES = frozenset(LICENSES)
#: the Hub's warning for a card without metadata
NO_METADATA = "empty or missing yaml metadata in repo card"
#: the Hub's refusal of an empty block, or of one that holds a single value
INVALID_BLOCK = "The YAML metadata of your README.md is invalid."


@dataclass(frozen=True)
class CardRead:
    """A README as the Hub reads it: its metadata (``{}`` when it has none it can use), the
    Markdown after the block, and what the Hub's check says of it."""

    front: dict[Any, Any]
    body: str
    errors: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


def read_card(text: str, repo_type: str = "model") -> CardRead:
    """``text`` (a README) read and checked as the Hub checks a card of a ``repo_type`` repository."""
    block = front_block(text)
    if block is None:
        return CardRead({}, text, warnings=(NO_METADATA,))
    source, body = block
    try:
        data = yaml.safe_load(source)
    except yaml.YAMLError as e:
        return CardRead({}, body, (f"Invalid YAML in README.md: {_problem(e)}",))
    except RecursionError:
        return CardRead({}, body, ("Invalid YAML in README.md: nested too deep",))
    if isinstance(data, list):
        return CardRead({}, body, ('"value" must be of type object',))
    if not isinstance(data, dict):  # nothing, or a single value
        return CardRead({}, body, (INVALID_BLOCK,))
    if not data:
        return CardRead(data, body, warnings=(NO_METADATA,))
    errors = [e for e in (_license(data), _model_index(data) if repo_type == "model" else None) if e]
    return CardRead(data, body, tuple(errors))


def _problem(e: yaml.YAMLError) -> str:
    """What YAML found wrong and where (line:column of the block, from 1)."""
    if isinstance(e, yaml.MarkedYAMLError) and e.problem_mark is not None:
        return f"{e.problem} ({e.problem_mark.line + 1}:{e.problem_mark.column + 1})"
    return str(e).replace("\n", " ")


def _license(data: dict[Any, Any]) -> str | None:
    if "license" not in data:
        return None
    value = data["license"]
    allowed = f"must be one of [{', '.join(LICENSES)}]"
    if isinstance(value, list):
        wrong = next((i for i, v in enumerate(value) if not (isinstance(v, str) and v in _LICENSES)), None)
        return None if wrong is None else f'"license[{wrong}]" {allowed}'
    return None if isinstance(value, str) and value in _LICENSES else f'"license" {allowed}'


#: what each part of a model-index result holds: field -> required (all strings)
_TASK = {"type": True, "name": False}
_DATASET = {"type": True, "name": True, "config": False, "split": False, "revision": False}
_METRIC = {"type": True, "name": False, "config": False, "verifyToken": False}
_SOURCE = {"url": True, "name": False}


def _model_index(data: dict[Any, Any]) -> str | None:
    if "model-index" not in data:
        return None
    models = data["model-index"]
    if not isinstance(models, list):
        return '"model-index" must be an array'
    for i, model in enumerate(models):
        at = f"model-index[{i}]"
        wrong = _fields(model, at, {"name": True}) or _array(model, at, "results")
        if wrong:
            return wrong
        for j, result in enumerate(model["results"]):
            wrong = _result(result, f"{at}.results[{j}]")
            if wrong:
                return wrong
    return None


def _result(result: Any, at: str) -> str | None:
    if not isinstance(result, dict):
        return f'"{at}" must be of type object'
    for part, fields, required in (("task", _TASK, True), ("dataset", _DATASET, True), ("source", _SOURCE, False)):
        if part not in result and not required:
            continue
        if part not in result:
            return f'"{at}.{part}" is required'
        wrong = _fields(result[part], f"{at}.{part}", fields)
        if wrong:
            return wrong
    wrong = _array(result, at, "metrics")
    if wrong:
        return wrong
    for k, metric in enumerate(result["metrics"]):
        where = f"{at}.metrics[{k}]"
        wrong = _fields(metric, where, _METRIC)
        if wrong:
            return wrong
        if metric.get("value") is None:
            return f'"{where}.value" is required'
        if "verified" in metric and not isinstance(metric["verified"], bool):
            return f'"{where}.verified" must be a boolean'
    return None


def _fields(value: Any, at: str, fields: dict[str, bool]) -> str | None:
    """Whether ``value`` is a mapping whose ``fields`` are strings (those marked True present)."""
    if not isinstance(value, dict):
        return f'"{at}" must be of type object'
    for name, required in fields.items():
        if name not in value:
            if required:
                return f'"{at}.{name}" is required'
        elif not isinstance(value[name], str):
            return f'"{at}.{name}" must be a string'
    return None


def _array(value: dict[Any, Any], at: str, name: str) -> str | None:
    if name not in value:
        return f'"{at}.{name}" is required'
    return None if isinstance(value[name], list) else f'"{at}.{name}" must be an array'
