"""Kubernetes documents as YAML, written by PyYAML (a dependency since Kitfiles).

Block style, keys in the order the documents were built (kubectl does not care, a reader does),
no line folding, and text of several lines (a CA bundle in a ConfigMap, a public key in a
policy) as a literal block so it stays readable. PyYAML quotes every string that would read
back as something else (``"no"``, ``"1"``, ``"on"``), so what is loaded is what was written.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import yaml

#: Wide enough that no value is folded across lines.
_NO_FOLDING = 1 << 20


class _BlockDumper(yaml.SafeDumper):
    """The safe dumper, with text of several lines as a literal block where one holds it exactly,
    and a mapping used twice (the labels of a Deployment and its pods) written twice, not as an
    anchor and an alias."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value.rstrip("\n") else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _text)


def dump_all(documents: Iterable[Any]) -> str:
    """Several documents, each begun by ``---`` but the first; one document is just itself."""
    text: str = yaml.dump_all(list(documents), Dumper=_BlockDumper, sort_keys=False, default_flow_style=False,
                              allow_unicode=True, width=_NO_FOLDING)
    return text
