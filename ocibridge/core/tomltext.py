"""The one reader of TOML a user or an archive hands ocibridge (a mirror job, a quotas file, the
registry settings, a carton's TOML). ``tomllib`` recurses once per level of nesting, so text
nested deeply enough raises a bare ``RecursionError``, naming no file: here it is a
:class:`TomlError`, as a syntax error is."""

from __future__ import annotations

import sys
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib


class TomlError(ValueError):
    """Text that is no TOML, or nested too deeply to read."""


def loads(text: str) -> dict[str, Any]:
    """The document ``text`` holds; :class:`TomlError` saying why when it holds none."""
    try:
        document: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise TomlError(str(e)) from None
    except RecursionError:
        raise TomlError("nested too deeply to read") from None
    return document
