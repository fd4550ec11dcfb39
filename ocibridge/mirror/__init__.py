"""Mirror jobs: declarative, resumable copies of many models between registries and layouts.

``run_job(load_job(path), dry_run=...)`` is what ``ocibridge mirror JOB`` runs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pydantic import ValidationError as PydanticValidationError

from ocibridge.core.limits import MAX_SMALL_INPUT, read_small_file
from ocibridge.errors import OcibridgeError
from ocibridge.mirror.job import MirrorJob
from ocibridge.mirror.run import ProgressCallback, run_job
from ocibridge.mirror.summary import ArtifactResult, MirrorSummary

__all__ = ["ArtifactResult", "MirrorJob", "MirrorSummary", "ProgressCallback", "load_job", "parse_job",
           "run_job"]


def _read(path: Path) -> object:
    suffix = path.suffix.lower()
    text = read_small_file(path, MAX_SMALL_INPUT, "mirror job")
    if suffix in (".yaml", ".yml"):
        import yaml  # a declared dependency

        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise OcibridgeError(f"{path}: invalid YAML: {' '.join(str(e).split())}") from None
    if suffix == ".json":
        try:
            return json.loads(text)
        except ValueError as e:
            raise OcibridgeError(f"{path}: invalid JSON: {e}") from None
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10
        import tomli as tomllib
    try:
        return tomllib.loads(text.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise OcibridgeError(f"{path}: invalid TOML: {e}") from None


def parse_job(data: object, base_dir: Path | None = None, where: str = "mirror job") -> MirrorJob:
    """Validate a job document; the first problem becomes one line naming its location."""
    if not isinstance(data, dict):
        raise OcibridgeError(f"{where}: expected a table of settings at the top")
    try:
        job = MirrorJob.model_validate(data)
    except PydanticValidationError as e:
        first = e.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "(top)"
        # a check of ours raising ValueError reads as our sentence, not pydantic's "Value error, ..."
        msg = first["msg"].removeprefix("Value error, ") if first["type"] == "value_error" else first["msg"]
        raise OcibridgeError(f"{where}: {loc}: {msg}") from None
    return job.with_base_dir(base_dir or Path.cwd())


def load_job(path: str | Path) -> MirrorJob:
    """Read a job file: TOML (``.toml``, the default), YAML (``.yaml``/``.yml``) or JSON."""
    path = Path(path)
    return parse_job(_read(path), path.resolve().parent, str(path))
