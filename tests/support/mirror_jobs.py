"""Mirror job files written from plain values, so a test names only the keys it is about."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path


def toml_value(value: object) -> str:
    """``value`` in TOML: a string, bool, int, list or inline table (what job keys hold)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string: the same escapes
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{key} = {toml_value(v)}" for key, v in value.items()) + " }"
    if isinstance(value, Iterable):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML for {value!r}")


def _table(header: str, keys: Mapping[str, object]) -> str:
    return header + "\n" + "".join(f"{key} = {toml_value(value)}\n" for key, value in keys.items())


def mirror_job(path: Path, *syncs: Mapping[str, object], defaults: Mapping[str, object] | None = None,
               plain_http: Iterable[str] = ()) -> Path:
    """A job file at ``path``: ``[defaults]``, a ``[registries."HOST"]`` with ``plain_http = true``
    for each of ``plain_http``, and one ``[[sync]]`` per mapping of ``syncs``."""
    tables = [_table("[defaults]", defaults)] if defaults else []
    tables += [_table(f"[registries.{json.dumps(host)}]", {"plain_http": True}) for host in plain_http]
    tables += [_table("[[sync]]", sync) for sync in syncs]
    path.write_text("\n".join(tables))
    return path
