"""A mirror job's validation error as one line: where (``sync.0.accept``), what the key takes,
and how to write it (``write 4`` for ``"4"``, the key meant for a misspelt one), so a typo in a
job reads as a sentence, not pydantic's report. :mod:`.job` holds the tables it names.
"""

from __future__ import annotations

from typing import get_args

from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError


def one_line(e: PydanticValidationError, where: str, top: type[BaseModel]) -> str:
    """The first problem of ``e`` (an unknown key first), located in the job's table ``top``."""
    errors = e.errors()
    # an unknown key first: a misspelt `sorce` also reads as `source` missing, which hides the typo
    first = next((err for err in errors if err["type"] == "extra_forbidden"), errors[0])
    loc = ".".join(str(p) for p in first["loc"]) or "(top)"
    if first["type"] == "extra_forbidden":
        return f"{where}: {loc}: unknown key ({_keys_meant(first['loc'], top)})"
    if first["loc"] == ("sync",) and first["type"] == "list_type":  # `[sync]`: a table, not `[[sync]]`
        return (f"{where}: sync: expected a list of entries: in TOML each is a [[sync]] table "
                "(two brackets), in YAML a '- source: ...' item under sync:")
    given = repr(first.get("input"))
    given = given if len(given) <= 60 else given[:57] + "..."
    if first["type"] in ("model_type", "dict_type"):  # (pydantic names the class: "instance of TagFilter")
        return f"{where}: {loc}: expected a table of keys ({{ key = value, ... }}), not {given}"
    if first["type"] == "list_type":
        wrap = f": write [{given}]" if isinstance(first["input"], str) else ""
        return f"{where}: {loc}: expected a list ([...]), not {given}{wrap}"
    if first["type"] in _TAKES:
        return (f"{where}: {loc}: expected {_TAKES[first['type']]}, not {given}"
                f"{_written_as(first['type'], first.get('input'))}")
    # a check of ours raising ValueError reads as our sentence, not pydantic's "Value error, ..."
    msg = first["msg"].removeprefix("Value error, ") if first["type"] == "value_error" else first["msg"]
    return f"{where}: {loc}: {msg}"


#: What a key of each type takes, by the type of pydantic's error.
_TAKES = {"int_type": "a whole number", "float_type": "a number", "bool_type": "true or false",
          "string_type": "a string in quotes"}


def _written_as(error: str, value: object) -> str:
    """For a number or a boolean written as a string: how to write it (``"4"``: ``write 4``)."""
    if not isinstance(value, str) or error == "string_type":
        return ""
    text = value.strip()
    if error == "bool_type":
        return f": write {text.lower()}" if text.lower() in ("true", "false") else ""
    try:
        int(text) if error == "int_type" else float(text)
    except ValueError:
        return ""
    return f": write {text}"


def _keys_meant(loc: tuple[int | str, ...], top: type[BaseModel]) -> str:
    """For an unknown key at ``loc``: the key of that table it is closest to, else the table's keys."""
    import difflib

    model: type[BaseModel] | None = top
    for part in loc[:-1]:  # list indexes and registry hosts are not keys of a table: passed over
        if model is not None and isinstance(part, str) and part in model.model_fields:
            model = _table_in(model.model_fields[part].annotation)
    keys = list(model.model_fields) if model is not None else []
    close = difflib.get_close_matches(str(loc[-1]), keys, n=1)
    return f"did you mean {close[0]!r}?" if close else f"the keys here: {', '.join(keys)}"


def _table_in(annotation: object) -> type[BaseModel] | None:
    """The settings table a field holds (``X``, ``X | None``, ``list[X]``, ``dict[str, X]``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _table_in(arg)
        if found is not None:
            return found
    return None
