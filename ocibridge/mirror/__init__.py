"""Mirror jobs: declarative, resumable copies of many models between registries and layouts.

The engine: ``run_job(load_job(path), dry_run=...)``. The public API over it, which ``ocibridge
mirror`` calls, is :mod:`ocibridge.api.mirror` (plan, run, one shard, merge, the Kubernetes Job).
"""

from __future__ import annotations

from ocibridge.mirror.job import MirrorJob, load_job, parse_job
from ocibridge.mirror.run import ProgressCallback, run_job
from ocibridge.mirror.summary import ArtifactResult, MirrorSummary

__all__ = ["ArtifactResult", "MirrorJob", "MirrorSummary", "ProgressCallback", "load_job", "parse_job",
           "run_job"]
