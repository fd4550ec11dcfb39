"""The canonical JSON an artifact's documents (manifests, configs) are digested over: compact,
UTF-8. A text with a byte that is no UTF-8 (a command-line value in a Latin-1 locale reaches
Python as a lone surrogate) cannot be written as UTF-8: it is one line naming the text, not the
encoder's error from deep in a push."""

from __future__ import annotations

import json
from typing import Any

from ocibridge.core.terminal import one_line
from ocibridge.errors import UsageError


def canonical_bytes(data: Any) -> bytes:
    """``data`` as compact JSON in UTF-8; a text that is not UTF-8 is a UsageError."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    try:
        return text.encode()
    except UnicodeEncodeError as e:
        near = one_line(text[max(0, e.start - 30):e.end + 30])
        raise UsageError(f"a value is not UTF-8 text (a byte from another encoding), near: {near} ("
                         "an artifact's documents hold text only)") from None
