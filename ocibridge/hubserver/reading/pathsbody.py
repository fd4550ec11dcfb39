"""The body of a paths-info request, read as huggingface_hub sends it (a form, or JSON)."""

from __future__ import annotations

from urllib.parse import parse_qs

from ocibridge.core import boundedjson
from ocibridge.hubserver.guard import PATHS_MAX


def truthy(value: str | None) -> bool:
    """A flag of a query or form as huggingface_hub sends one (``true``; ``1`` too)."""
    return (value or "").lower() in ("1", "true")


def expand_requested(content_type: str, body: bytes) -> bool:
    """Whether a paths-info body asks ``expand`` (huggingface_hub sends a form: ``expand=true``)."""
    if content_type.startswith("application/json"):
        try:
            given = boundedjson.loads(body, "the body")
        except ValueError:
            return False
        return isinstance(given, dict) and given.get("expand") in (True, "true", "1", 1)
    try:
        return truthy(parse_qs(body.decode("utf-8", "replace"), max_num_fields=PATHS_MAX + 16).get("expand", [""])[0])
    except ValueError:
        return False


def requested_paths(content_type: str, body: bytes) -> list[str] | str:
    """The paths a paths-info body lists (JSON ``{"paths": [...]}`` or a form's ``paths=``),
    at most :data:`.guard.PATHS_MAX` of them; else why the body is refused."""
    too_many = f"a paths-info request lists at most {PATHS_MAX} paths"
    if content_type.startswith("application/json"):
        try:
            given = boundedjson.loads(body, "the body")
        except boundedjson.JsonTooDeep as e:
            return str(e)
        except ValueError:
            return "the body is not JSON"
        listed = given.get("paths", []) if isinstance(given, dict) else None
        if not isinstance(listed, list) or not all(isinstance(p, str) for p in listed):
            return 'expected {"paths": ["PATH", ...]}'
        return listed if len(listed) <= PATHS_MAX else too_many
    try:  # a few fields besides the paths (expand=)
        paths = parse_qs(body.decode("utf-8", "replace"), max_num_fields=PATHS_MAX + 16).get("paths", [])
    except ValueError:
        return too_many
    return paths if len(paths) <= PATHS_MAX else too_many
