"""The distribution spec's error codes, as named values in one table, and the one reading of an
error body (``{"errors": [{"code", "message", "detail"}]}``) that yields them.

Every module that tells one registry refusal from another compares against these names; no
code is spelled as a string elsewhere (tests/registry/test_registry_errcodes.py holds it so).
"""

from __future__ import annotations

from typing import Final

import httpx

from ocibridge.core import boundedjson

BLOB_UNKNOWN: Final = "BLOB_UNKNOWN"
BLOB_UPLOAD_INVALID: Final = "BLOB_UPLOAD_INVALID"
BLOB_UPLOAD_UNKNOWN: Final = "BLOB_UPLOAD_UNKNOWN"
DIGEST_INVALID: Final = "DIGEST_INVALID"
MANIFEST_BLOB_UNKNOWN: Final = "MANIFEST_BLOB_UNKNOWN"
MANIFEST_INVALID: Final = "MANIFEST_INVALID"
MANIFEST_UNKNOWN: Final = "MANIFEST_UNKNOWN"
NAME_INVALID: Final = "NAME_INVALID"
NAME_UNKNOWN: Final = "NAME_UNKNOWN"
SIZE_INVALID: Final = "SIZE_INVALID"
UNAUTHORIZED: Final = "UNAUTHORIZED"
DENIED: Final = "DENIED"
UNSUPPORTED: Final = "UNSUPPORTED"
TOOMANYREQUESTS: Final = "TOOMANYREQUESTS"

#: every code the distribution spec names, as this table spells it
SPEC_CODES: Final = frozenset({
    BLOB_UNKNOWN, BLOB_UPLOAD_INVALID, BLOB_UPLOAD_UNKNOWN, DIGEST_INVALID, MANIFEST_BLOB_UNKNOWN,
    MANIFEST_INVALID, MANIFEST_UNKNOWN, NAME_INVALID, NAME_UNKNOWN, SIZE_INVALID, UNAUTHORIZED,
    DENIED, UNSUPPORTED, TOOMANYREQUESTS,
})

#: the code and message an answer without a body stands for (a HEAD's refusal has none)
BY_STATUS: Final = {
    401: (UNAUTHORIZED, "authentication required"),
    403: (DENIED, "requested access to the resource is denied"),
}

#: codes that refuse an upload's content or the right to write, not the form of the upload
CONTENT_CODES: Final = frozenset({DIGEST_INVALID, SIZE_INVALID, DENIED, UNAUTHORIZED})

#: codes by which the registry says it checked the bytes and they are not what their digest names
CONTENT_MISMATCH: Final = frozenset({DIGEST_INVALID, SIZE_INVALID})

#: bytes of an error body read: the first error is near its start
BODY_PREFIX = 65536


def parse_error_body(response: httpx.Response) -> tuple[str | None, str]:
    """The first OCI error ``(code, message)`` of a response body, if it has one; else no code
    and the body's first 200 characters (a proxy's page, a plain-text refusal)."""
    try:
        body = response.content[:BODY_PREFIX]
    except httpx.ResponseNotRead:
        return None, ""
    try:
        errors = boundedjson.loads(body).get("errors") or []
        first = errors[0]
        return str(first.get("code") or "") or None, str(first.get("message") or "")
    except (ValueError, AttributeError, IndexError, TypeError):
        text = body.decode("utf-8", "replace").strip()
        return None, text[:200]


def code_of(response: httpx.Response) -> tuple[str | None, str]:
    """:func:`parse_error_body`, or for a bodiless refusal what its status stands for."""
    code, message = parse_error_body(response)
    if code is None and response.status_code in BY_STATUS:
        code, message = BY_STATUS[response.status_code]
    return code, message
