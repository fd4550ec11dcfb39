"""What the kinds' mappings share when they write a manifest annotation: the compact JSON of a
``+json`` annotation, written once here (carton and mlsteam each had a copy, and they drifted).

The key order stays each kind's own: carton has always sorted the keys and mlsteam has always
kept them as read. The annotations are in the manifest, so making them agree would change every
existing artifact's digest of one of the two (tests/kinds/test_carton.py and tests/kinds/test_mlsteam.py pin
them); ``sort_keys`` says which, at each call."""

from __future__ import annotations

import json
from typing import Any


def annotation_json(value: Any, *, sort_keys: bool) -> str:
    """``value`` as the compact JSON of an annotation (UTF-8 as it is, no spaces)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=sort_keys)
