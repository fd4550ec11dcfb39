"""A mirror job file's text as data: TOML (the default), YAML (``.yaml``/``.yml``) or JSON, chosen
by the file's suffix. Validating that data is the job model's part (mirror/job.py)."""

from __future__ import annotations

from pathlib import Path

from ocibridge.core import boundedjson
from ocibridge.core.limits import MAX_SMALL_INPUT, read_small_file
from ocibridge.errors import OcibridgeError


def read_job_document(path: Path) -> object:
    """The document a job file holds (not yet checked); a syntax error is one line naming the file."""
    suffix = path.suffix.lower()
    text = read_small_file(path, MAX_SMALL_INPUT, "mirror job")
    if suffix in (".yaml", ".yml"):
        import yaml  # a declared dependency

        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise OcibridgeError(f"{path}: invalid YAML: {' '.join(str(e).split())}") from None
        except RecursionError:  # PyYAML's composer recurses once per level of nesting
            raise OcibridgeError(f"{path}: invalid YAML: nested too deeply to read") from None
    if suffix == ".json":
        try:
            return boundedjson.loads(text)
        except ValueError as e:
            raise OcibridgeError(f"{path}: invalid JSON: {e}") from None
    from ocibridge.core import tomltext

    try:
        return tomltext.loads(text.decode("utf-8"))
    except (tomltext.TomlError, UnicodeDecodeError) as e:
        raise OcibridgeError(f"{path}: invalid TOML: {e}") from None
