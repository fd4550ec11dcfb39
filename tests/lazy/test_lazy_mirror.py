"""A mirror job carries the chunk table of a model pushed with ``--chunks`` (issue 29): the table
blob travels with its referrer, the manifest's binding is unchanged, and lazy reads at the
mirror move one chunk, not the layer, with no fallback."""

from __future__ import annotations

import os
from pathlib import Path

from support.fixtures import new_repo

import ocibridge
from ocibridge.api.lazy_ops import open_model
from ocibridge.chunks.chunktable import DEFAULT_CHUNK_SIZE
from ocibridge.mirror import load_job, run_job

MiB = 1024 * 1024


def _job(path: Path, source: str, target: str, referrers: bool) -> Path:
    path.write_text(f'[defaults]\nreferrers = {"true" if referrers else "false"}\n\n'
                    f'[[sync]]\nsource = "{source}"\ntarget = "{target}"\n')
    return path


def _mirrored(registry, registry2, tmp_path: Path, *, referrers: bool) -> tuple[str, bytes]:
    """A 17 MiB file pushed with ``--chunks`` and mirrored by a job: (the mirror's ref, bytes)."""
    src = tmp_path / "m"
    src.mkdir()
    data = os.urandom(17 * MiB + 9)
    (src / "w.bin").write_bytes(data)
    repo, mirrored = new_repo(), new_repo()
    ocibridge.push(str(src), f"{registry.host}/{repo}:v1", options=ocibridge.PushOptions(chunk_threshold=16 << 20))
    done = run_job(load_job(_job(tmp_path / "job.toml", f"{registry.host}/{repo}",
                                 f"{registry2.host}/{mirrored}", referrers=referrers)))
    assert done.ok, done.format_text()
    return f"{registry2.host}/{mirrored}:v1", data


def test_a_mirror_job_carries_the_chain(registry, registry2, tmp_path):
    ref, data = _mirrored(registry, registry2, tmp_path, referrers=True)
    warnings: list[str] = []
    with open_model(ref, warn=warnings.append, cache=False) as model:
        assert model.read("w.bin", 5 * MiB, 5 * MiB + 10) == data[5 * MiB:5 * MiB + 10]
        assert model.chain.how.endswith("bound by the manifest") and not warnings
        assert model.bytes_fetched == DEFAULT_CHUNK_SIZE


def test_a_mirror_without_referrers_falls_back_and_says_so(registry, registry2, tmp_path):
    """``referrers = false`` leaves the table's referrer, hence its blob, behind: the binding
    annotation names a blob the mirror lacks, so reads are whole and verified, and say so."""
    ref, data = _mirrored(registry, registry2, tmp_path, referrers=False)
    warnings: list[str] = []
    with open_model(ref, warn=warnings.append, cache=False) as model:
        assert model.read("w.bin", 5 * MiB, 5 * MiB + 10) == data[5 * MiB:5 * MiB + 10]
        assert model.bytes_fetched == len(data)
    assert len(warnings) == 1 and "reading the whole blob" in warnings[0] and "--referrers" in warnings[0]
