"""The model card's metadata: the YAML front matter of the model's top ``README.md``, as the
Hugging Face Hub reads it, mapped into the ModelPack config and manifest annotations (push and
serve's commits both build through :func:`ocibridge.model.metadata.fill`), and read back from an
artifact as the Hub's ``cardData`` (docs/formats/directory.md, "The model card's metadata").

=================  ==============================================================
front matter       artifact
=================  ==============================================================
``license``        ``descriptor.licenses`` (``other`` + ``license_name``: the name)
``language``       ``config.capabilities.languages`` (two-letter codes only)
``base_model``     annotation ``io.ocibridge.card.base_model`` (ids, comma-joined)
``tags``           annotation ``io.ocibridge.card.tags`` (comma-joined)
``pipeline_tag``   annotation ``io.ocibridge.card.pipeline_tag``
=================  ==============================================================

The card comes from whoever wrote the model: read bounded (:data:`FRONT_MAX` bytes), parsed
with YAML's safe loader, every value kept only when it is a short string (a list of at most
:data:`MAX_VALUES`); anything else is left out, never a reason to fail a push. A README without
front matter changes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from ocibridge.model.package import ModelFile

#: bytes of README.md read for its front matter (the Hub's cards keep it to a few KiB)
FRONT_MAX = 64 * 1024
#: values of one list field kept (tags, languages, base models)
MAX_VALUES = 100
#: characters of one value kept (an id, a tag, an SPDX expression)
MAX_VALUE = 256
ANNOTATION_BASE_MODEL = "io.ocibridge.card.base_model"
ANNOTATION_TAGS = "io.ocibridge.card.tags"
ANNOTATION_PIPELINE = "io.ocibridge.card.pipeline_tag"
#: the block opens the card, after blank lines (as huggingface_hub's REGEX_YAML_BLOCK and the Hub read it)
_FRONT = re.compile(r"\A\s*---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.S)
_LANGUAGE = re.compile(r"^[a-z]{2}$")  # ModelPack's capabilities.languages: ISO 639-1


def front_block(text: str) -> tuple[str, str] | None:
    """(the YAML between the ``---`` lines, the rest) of a card that opens with a metadata
    block; None when it does not (serve's card checks read the same block: hubserver/cards.py)."""
    found = _FRONT.match(text)
    return None if found is None else (found.group(1), text[found.end():])


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """(the front matter as a mapping, the rest); ``{}`` when there is none or it is no mapping."""
    block = front_block(text)
    if block is None:
        return {}, text
    import yaml  # (here: a card without front matter, or no card, needs no YAML parser)

    try:
        data = yaml.safe_load(block[0])
    except (yaml.YAMLError, RecursionError):
        data = None
    return (data if isinstance(data, dict) else {}), block[1]


def read_front_matter(files: Iterable[ModelFile]) -> dict[str, Any]:
    """The front matter of the model's top ``README.md`` (the card the Hub shows), or ``{}``."""
    card = next((f for f in files if f.path == "README.md" and f.opener is not None and f.link_target is None), None)
    if card is None:
        return {}
    try:
        with card.open() as reader:
            data = reader.read(FRONT_MAX)
    except OSError:
        return {}
    return split_front_matter(data.decode("utf-8", "replace"))[0]


def _values(value: Any) -> list[str]:
    """A string or a list of strings, each short and without a comma; others dropped."""
    items = value if isinstance(value, list) else [value]
    kept = [v.strip() for v in items[:MAX_VALUES] if isinstance(v, str)]
    return [v for v in kept if v and len(v) <= MAX_VALUE and "," not in v]


def card_fields(front: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    """(descriptor fields, config fields, manifest annotations) the front matter says."""
    descriptor: dict[str, Any] = {}
    config: dict[str, Any] = {}
    annotations: dict[str, str] = {}
    licenses = _values(front.get("license"))
    if licenses == ["other"] and _values(front.get("license_name")):
        licenses = _values(front.get("license_name"))[:1]
    if licenses:
        descriptor["licenses"] = licenses
    languages = [v.lower() for v in _values(front.get("language"))]
    languages = list(dict.fromkeys(v for v in languages if _LANGUAGE.match(v)))
    if languages:
        config["capabilities"] = {"languages": languages}
    for key, annotation in (("base_model", ANNOTATION_BASE_MODEL), ("tags", ANNOTATION_TAGS),
                            ("pipeline_tag", ANNOTATION_PIPELINE)):
        found = _values(front.get(key))
        if found:
            annotations[annotation] = ",".join(found if key != "pipeline_tag" else found[:1])
    return descriptor, config, annotations


def card_data(config_doc: Mapping[str, Any], annotations: Mapping[str, str]) -> dict[str, Any]:
    """The Hub's ``cardData`` of an artifact: the mapped fields read back (a field the card had
    as one value comes back as one value; ``{}`` when the artifact says none)."""
    data: dict[str, Any] = {}
    descriptor = config_doc.get("descriptor")
    licenses = descriptor.get("licenses") if isinstance(descriptor, dict) else None
    licenses = _values(licenses)
    if licenses:
        data["license"] = licenses[0] if len(licenses) == 1 else licenses
    config = config_doc.get("config")
    capabilities = config.get("capabilities") if isinstance(config, dict) else None
    languages = _values(capabilities.get("languages")) if isinstance(capabilities, dict) else []
    if languages:
        data["language"] = languages
    for key, annotation in (("base_model", ANNOTATION_BASE_MODEL), ("tags", ANNOTATION_TAGS),
                            ("pipeline_tag", ANNOTATION_PIPELINE)):
        found = _values(annotations.get(annotation, "").split(","))
        if found:
            data[key] = found if key == "tags" or len(found) > 1 else found[0]
    return data
