"""Documents as YAML, written by PyYAML (a declared dependency): the one writer of the Kubernetes
documents that ``k8s`` and ``mirror --emit k8s-job`` print.

Block style, keys in the order the documents were built (kubectl does not care, a reader does),
no line folding, a mapping used twice (the labels of a Deployment and its pods) written twice
rather than as an anchor and an alias, and text of several lines (a job file or a CA bundle in a
ConfigMap, a public key in a policy) as a literal block where one holds it exactly. PyYAML quotes
every string that would read back as something else (``"no"``, ``"1"``, ``"on"``), so what is
loaded is what was written. PyYAML is imported on the first document written, not at start-up.

Comments above the documents go through :func:`comments` too: a comment is one line by
construction (any line break or character YAML does not allow is written as an escape), so no
text taken from input (a policy's scope, a reference, a file name) can end the comment and
start YAML of its own, let alone a ``---`` document.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from yaml import SafeDumper, ScalarNode

#: Wide enough that no value is folded across lines.
_NO_FOLDING = 1 << 20

#: Characters YAML reads as line breaks besides ``\n``: a block or a plain scalar may fold them.
_OTHER_BREAKS = "\r\x85\u2028\u2029"


def comments(lines: Iterable[str]) -> str:
    """``# LINE`` for each of ``lines``, each kept on its one line: line breaks, control
    characters and whatever else YAML refuses in a stream are written as escapes (``\\n``,
    ``\\x00``), so the text reads back as comment and nothing else."""
    return "".join(f"# {_one_line(line)}\n" if line else "#\n" for line in lines)


def _one_line(text: str) -> str:
    return "".join(c if _printable(c) else _escape(c) for c in text)


def _printable(c: str) -> bool:
    """PyYAML's reader's printable set (YAML 1.1 c-printable), less every line break."""
    o = ord(c)
    return (o == 0x09 or 0x20 <= o <= 0x7E or 0xA0 <= o <= 0xD7FF or 0xE000 <= o <= 0xFFFD
            or 0x10000 <= o <= 0x10FFFF) and c not in _OTHER_BREAKS and o != 0xFEFF


def _escape(c: str) -> str:
    if c == "\n":
        return "\\n"
    if c == "\r":
        return "\\r"
    o = ord(c)
    return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}"


def dump_all(documents: Iterable[Any]) -> str:
    """Several documents, each begun by ``---`` but the first; one document is just itself."""
    import yaml

    text: str = yaml.dump_all(list(documents), Dumper=_dumper(), sort_keys=False, default_flow_style=False,
                              allow_unicode=True, width=_NO_FOLDING)
    return text


@functools.cache
def _dumper() -> type[SafeDumper]:
    import yaml

    class Dumper(yaml.SafeDumper):
        """The safe dumper: text of several lines as a literal block, no anchors."""

        def ignore_aliases(self, data: Any) -> bool:
            return True

    def text(dumper: SafeDumper, value: str) -> ScalarNode:
        style = None
        if any(c in value for c in _OTHER_BREAKS):
            style = '"'  # the one style that keeps them: escaped
        elif "\n" in value.rstrip("\n"):
            style = "|"  # the emitter falls back to quoting where a block cannot hold the text exactly
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, text)
    return Dumper
