"""cosign's simple-signing payload: the JSON document a classic signature is made over.

Written as Go's ``encoding/json`` writes cosign's struct (field order, compact, ``<>&``
escaped, map keys sorted) so that a payload made here is byte-identical to cosign's for the same
reference, digest and claims.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ocibridge.core import boundedjson
from ocibridge.errors import SignatureError

SIMPLE_SIGNING_MEDIA_TYPE = "application/vnd.dev.cosign.simplesigning.v1+json"
SIGNATURE_ANNOTATION = "dev.cosignproject.cosign/signature"
SIGNATURE_TYPE = "cosign container image signature"


def go_json(value: Any) -> bytes:
    """JSON as Go's ``json.Marshal`` writes it: compact, and ``<``, ``>``, ``&`` escaped."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026").encode()


def simple_signing_payload(reference: str, digest: str, claims: dict[str, str] | None = None) -> bytes:
    """The payload for the manifest ``digest`` of repository ``reference``; claims go to ``optional``."""
    doc = {
        "critical": {
            "identity": {"docker-reference": reference},
            "image": {"docker-manifest-digest": digest},
            "type": SIGNATURE_TYPE,
        },
        "optional": dict(sorted(claims.items())) if claims else None,
    }
    return go_json(doc)


@dataclass
class SimpleSigning:
    """What a verified payload says."""

    reference: str
    digest: str
    claims: dict[str, Any] = field(default_factory=dict)


def parse_simple_signing(data: bytes) -> SimpleSigning:
    """Read a payload, refusing one that is not a cosign container image signature."""
    try:
        doc = boundedjson.loads(data)
        critical = doc["critical"]
        kind = critical["type"]
        digest = critical["image"]["docker-manifest-digest"]
        reference = critical["identity"]["docker-reference"]
        optional = doc.get("optional") or {}
    except (ValueError, KeyError, TypeError):
        raise SignatureError("simple-signing payload is not the cosign format") from None
    if kind != SIGNATURE_TYPE:
        raise SignatureError(f"simple-signing payload has type {kind!r}, not {SIGNATURE_TYPE!r}")
    if not isinstance(digest, str) or not isinstance(reference, str) or not isinstance(optional, dict):
        raise SignatureError("simple-signing payload is not the cosign format")
    return SimpleSigning(reference, digest, optional)
