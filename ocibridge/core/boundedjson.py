"""The one reader of JSON that a model file, a registry or a client hands ocibridge.

``json.loads`` recurses once per level of nesting, so a document of 100,000 nested arrays (a few
hundred kilobytes: a safetensors header, a config.json, a commit line) escapes it as a bare
``RecursionError``. :func:`loads` measures the nesting first, with a linear scan that costs no
recursion, and refuses a document deeper than :data:`MAX_JSON_DEPTH` with one clear line
(:class:`JsonTooDeep`) before the parser sees it. Genuine documents are far shallower: a
safetensors header nests 3 deep, a config.json or an OCI manifest rarely 6.

:class:`JsonTooDeep` is a :class:`~ocibridge.errors.TooLarge` (an uncaught one is an error line)
and a ``json.JSONDecodeError`` (a caller that turns malformed JSON into its own error does the
same with this one, saying why).
"""

from __future__ import annotations

import json
import operator
import re
from itertools import accumulate, count
from typing import Any

from ocibridge.errors import TooLarge

#: Nesting of arrays and objects a document may have; deeper is refused before parsing.
MAX_JSON_DEPTH = 64

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_LEAF_PAIR = re.compile(rb"\[\]|\{\}")
_STEP = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")
#: passes of innermost-pair removal tried before the exact count (documents this shallow end there)
_QUICK_PASSES = 8


class JsonTooDeep(TooLarge, json.JSONDecodeError):
    """JSON nested deeper than the limit, refused before ``json.loads`` recurses into it."""

    def __init__(self, message: str):
        ValueError.__init__(self, message)
        self.msg, self.doc, self.pos, self.lineno, self.colno = message, "", 0, 1, 1

    def __str__(self) -> str:
        return self.msg


def depth_of(data: bytes | str) -> int:
    """The deepest nesting of ``data``'s brackets outside strings (as deep as ``json.loads``
    would recurse). Strings and everything but brackets go first, in C; a few passes that each
    remove every innermost pair empty a shallow document (all genuine ones); a deeper or unbalanced
    one is counted exactly with C iterators, never a Python loop per byte."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    brackets = _STRING.sub(b"", raw).translate(None, _NOT_BRACKET)
    pairs = brackets
    for passes in range(_QUICK_PASSES):
        if not pairs:
            return passes
        pairs = _LEAF_PAIR.sub(b"", pairs)
    # an opener counts 2 and a closer 0, so the depth after byte i is sum[0..i] - (i + 1)
    steps = brackets.translate(_STEP)
    return max(0, max(map(operator.sub, accumulate(steps), count(1)), default=0))


def check_depth(data: bytes | str, what: str, limit: int = MAX_JSON_DEPTH) -> None:
    """Raise :class:`JsonTooDeep` when ``data`` nests deeper than ``limit``."""
    if depth_of(data) > limit:
        raise JsonTooDeep(f"{what} nested deeper than {limit} levels, refused")


def loads(data: bytes | bytearray | str, what: str = "JSON", *,
          limit: int = MAX_JSON_DEPTH, **kwargs: Any) -> Any:
    """``json.loads(data, **kwargs)`` after :func:`check_depth`; ``what`` names the document in
    the refusal (``model.safetensors header``)."""
    check_depth(bytes(data) if isinstance(data, bytearray) else data, what, limit)
    return json.loads(data, **kwargs)
