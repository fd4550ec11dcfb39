"""Mirror jobs: declarative, resumable copies of many models between registries and layouts.

``run_job(load_job(path), dry_run=...)`` is what ``ocibridge mirror JOB`` runs.
"""

from __future__ import annotations

from ocibridge.mirror.job import MirrorJob, load_job, parse_job
from ocibridge.mirror.run import ProgressCallback, run_job
from ocibridge.mirror.summary import ArtifactResult, MirrorSummary

__all__ = ["ArtifactResult", "MirrorJob", "MirrorSummary", "ProgressCallback", "load_job", "parse_job",
           "run_job"]
