"""What the Hub says of a model beyond its files: ``model_info``'s
``cardData`` (the card's whole front matter), ``library_name``, ``pipeline_tag``, ``tags`` and
``config`` (``architectures`` and ``model_type`` of its ``config.json``), which Hub clients read
(``hf models info``, ``ModelInfo.library_name``, ``ModelCard``) and model-hub UIs show.

They are read from the revision's own ``README.md`` and ``config.json`` (each at most
:data:`READ_MAX` bytes, verified as every read, parsed bounded), not from what push mapped into the
artifact: a commit made through serve and a model pushed before either say the same, and no
artifact's digest depends on what serve shows. Read once per manifest digest (its files never
change), through serve's blob cache, kept for :data:`KEPT` manifests.

The tags are the Hub's: the card's own, then the ones the Hub derives from the files (the
library, ``safetensors`` or ``gguf`` when such a file is there, the config's ``model_type``,
the pipeline tag), each once, in that order; a dataset's also its card's task categories,
languages, license and size (``task_categories:text-classification``) and its data formats.
"""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ocibridge.core import boundedjson
from ocibridge.hubserver.repo.catalog import Resolved
from ocibridge.hubserver.repo.files import HubFile, ModelFiles
from ocibridge.hubserver.repo.reponames import type_of
from ocibridge.kinds.hf.repotype import DATASET
from ocibridge.model.cardmeta import split_front_matter

#: bytes of README.md and config.json read (the Hub's own cards and configs are far smaller)
READ_MAX = 256 * 1024
#: manifests whose facts are kept
KEPT = 512
#: nesting of config.json read at most (deeper: no config shown)
DEPTH_MAX = 64


#: how the facts read a small file: its bytes (None when it is too large or cannot be read)
Reader = Callable[[HubFile], Awaitable["bytes | None"]]


class ModelFacts:
    """The facts of each manifest, read once: concurrent first askers wait for one reading, and
    the files are read through serve's shared blob cache (``read``), so a model's card and
    config come from the registry once, as every byte serve sends."""

    def __init__(self) -> None:
        self._kept: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._reading: dict[str, asyncio.Future[dict[str, Any]]] = {}

    async def of(self, resolved: Resolved, files: ModelFiles, read: Reader) -> dict[str, Any]:
        key = resolved.model.digest
        found = self._kept.get(key)
        if found is not None:
            self._kept.move_to_end(key)
            return found
        pending = self._reading.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._reading[key] = future
        try:
            texts = {name: await read(f) for name in ("README.md", "config.json")
                     if (f := files.files.get(name)) is not None and f.size <= READ_MAX}
            made = read_facts(resolved, files, texts)
            future.set_result(made)
        except BaseException as e:
            future.set_exception(e)
            future.exception()  # (retrieved: a waiter that went away leaves no warning)
            raise
        finally:
            del self._reading[key]
        self._kept[key] = made
        while len(self._kept) > KEPT:
            self._kept.popitem(last=False)
        return made


def read_facts(resolved: Resolved, files: ModelFiles, texts: Mapping[str, bytes | None]) -> dict[str, Any]:
    """The model_info fields this revision's card and config say (absent ones left out);
    ``texts``: the bytes of its README.md and config.json, as read."""
    card = _card(resolved, texts.get("README.md"))
    config = _config(texts.get("config.json"))
    facts: dict[str, Any] = {}
    if card:
        facts["cardData"] = card
    library = card.get("library_name")
    if isinstance(library, str) and library:
        facts["library_name"] = library
    pipeline = card.get("pipeline_tag")
    if isinstance(pipeline, str) and pipeline:
        facts["pipeline_tag"] = pipeline
    if config:
        facts["config"] = config
    facts["tags"] = _tags(card, config, files, facts.get("library_name"), facts.get("pipeline_tag"))
    if type_of(resolved.repo_id) == DATASET:
        facts["tags"] = list(dict.fromkeys(facts["tags"] + _dataset_tags(card, files)))
    return facts


#: the card fields a dataset's tags name (``task_categories:text-classification``), as the Hub's
DATASET_TAG_FIELDS = ("task_categories", "task_ids", "language", "license", "size_categories", "modality")
#: the data formats a dataset's tags name by their files' endings (``format:parquet``)
DATASET_FORMATS = {".parquet": "parquet", ".csv": "csv", ".json": "json", ".jsonl": "json", ".arrow": "arrow"}


def _dataset_tags(card: dict[str, Any], files: ModelFiles) -> list[str]:
    tags = []
    for field in DATASET_TAG_FIELDS:
        value = card.get(field)
        tags += [f"{field}:{v}" for v in (value if isinstance(value, list) else [value]) if isinstance(v, str) and v]
    endings = {"." + p.rsplit(".", 1)[-1].lower() for p in files.files if "." in p}
    tags += sorted(f"format:{name}" for name in {DATASET_FORMATS[e] for e in endings if e in DATASET_FORMATS})
    return tags


def _card(resolved: Resolved, data: bytes | None) -> dict[str, Any]:
    """The front matter of the top README.md, as JSON can carry it (``{}``: none)."""
    if data is None:
        return dict(resolved.card or {})  # (a model whose card only the artifact's annotations keep)
    front, _ = split_front_matter(data.decode("utf-8", "replace"))
    try:  # dates and other YAML types as the Hub's JSON gives them: text
        card = json.loads(json.dumps(front, default=str))
    except (TypeError, ValueError, RecursionError):
        return {}
    return card if isinstance(card, dict) else {}


def _config(data: bytes | None) -> dict[str, Any]:
    """``architectures`` and ``model_type`` of the top config.json, when it says them."""
    if data is None:
        return {}
    try:
        doc = boundedjson.loads(data, limit=DEPTH_MAX)
    except ValueError:
        return {}
    if not isinstance(doc, dict):
        return {}
    config: dict[str, Any] = {}
    architectures = doc.get("architectures")
    if isinstance(architectures, list) and all(isinstance(a, str) for a in architectures):
        config["architectures"] = architectures
    if isinstance(doc.get("model_type"), str):
        config["model_type"] = doc["model_type"]
    return config


def _tags(card: dict[str, Any], config: dict[str, Any], files: ModelFiles, library: str | None,
          pipeline: str | None) -> list[str]:
    own = card.get("tags")
    tags = [t for t in (own if isinstance(own, list) else [own]) if isinstance(t, str) and t]
    if library:
        tags.append(library)
    if any(p.endswith(".safetensors") for p in files.files):
        tags.append("safetensors")
    if any(p.endswith(".gguf") for p in files.files):
        tags.append("gguf")
    if isinstance(config.get("model_type"), str):
        tags.append(config["model_type"])
    if pipeline:
        tags.append(pipeline)
    return list(dict.fromkeys(tags))
