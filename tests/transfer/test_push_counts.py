"""Push summaries stay honest (issue 13, class 9): equal files, and pushes that race each other
for the same blobs, never give a negative or double count."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import ocibridge
from ocibridge.stores.layout import LayoutStore


def _blobs_of(layout: Path, digest: str) -> int:
    store = LayoutStore(layout)
    from ocibridge.oci.models import Manifest, parse_manifest_bytes

    desc = store.resolve(digest)
    manifest = parse_manifest_bytes(store.fetch_bytes(desc), desc.mediaType)
    assert isinstance(manifest, Manifest)
    return len({d.digest for d in [manifest.config, *manifest.layers]})


def _counts(result) -> tuple[int, int, int]:
    s = result.stats
    return s.blobs_copied, s.blobs_skipped, s.blobs_mounted


def test_files_with_equal_content_count_as_one_blob(tmp_path: Path) -> None:
    model = tmp_path / "m"
    model.mkdir()
    data = os.urandom(300_000)
    (model / "a.bin").write_bytes(data)
    (model / "b.bin").write_bytes(data)
    (model / "config.json").write_text("{}")
    result = ocibridge.push(str(model), f"oci:{tmp_path}/l:v1")
    copied, skipped, mounted = _counts(result)
    assert (copied, skipped, mounted) == (_blobs_of(tmp_path / "l", "v1"), 0, 0) == (3, 0, 0)


def test_racing_pushes_sharing_blobs_count_each_blob_once(tmp_path: Path) -> None:
    shared = os.urandom(2_000_000)
    models = []
    for i in range(6):
        model = tmp_path / f"m{i}"
        model.mkdir()
        (model / "base.bin").write_bytes(shared)
        (model / f"own-{i}.bin").write_bytes(os.urandom(50_000))
        models.append(model)
    with ThreadPoolExecutor(6) as pool:
        results = list(pool.map(lambda m: ocibridge.push(str(m), f"oci:{tmp_path}/l:{m.name}"), models))
    for model, result in zip(models, results, strict=True):
        copied, skipped, mounted = _counts(result)
        assert min(copied, skipped, mounted) >= 0, (model.name, copied, skipped, mounted)
        assert copied + skipped + mounted == _blobs_of(tmp_path / "l", model.name)
