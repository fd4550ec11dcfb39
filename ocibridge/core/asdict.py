"""One ``as_dict()`` for the small result records whose JSON form is their fields as they are
(``--json`` prints it): written once here instead of by hand in each record, where a field added
and not listed would silently leave the JSON."""

from __future__ import annotations

import dataclasses
from typing import Any


class FieldsAsDict:
    """Mixed into a flat dataclass: ``as_dict()`` maps each field's name to its value."""

    def as_dict(self) -> dict[str, Any]:
        record: Any = self  # a dataclass instance: the classes that mix this in are
        return {f.name: getattr(record, f.name) for f in dataclasses.fields(record)}


def camel_key(name: str) -> str:
    """``bytes_copied`` → ``bytesCopied``: a field's key in every ``--json`` output."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)
