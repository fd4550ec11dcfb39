"""A Hub revision an older mirror run tagged without the chunk table's referrer its manifest binds
is completed by the next run (``ocibridge serve`` as the Hub over registry A, real
huggingface_hub, the targets on registry B; test_mirror_hub's helpers)."""

from __future__ import annotations

from serving import point_hub_at, serving

from ocibridge.chunks.chunktable import ARTIFACT_TYPE, PUSH_THRESHOLD
from ocibridge.cli import main
from ocibridge.mirror import load_job, run_job
from ocibridge.oci.reference import parse_registry_reference
from ocibridge.stores.registry import open_repository
from ocibridge.transfer.copy import copy
from tests.mirror.test_mirror_hub import Hub, digest_of, sync_job
from tests.modelgen import make_bert_model


def _table_referrers(host_repo: str, tag: str) -> list[str]:
    store = open_repository(parse_registry_reference(f"{host_repo}:{tag}"))
    try:
        return [r.digest for r in store.referrers(store.resolve(tag), ARTIFACT_TYPE)]
    finally:
        store.close()


def test_rerun_completes_a_revision_tagged_without_its_chunk_table(tmp_path, capsys, registry, registry2,
                                                                   unique_repo, monkeypatch) -> None:
    hub = Hub(tmp_path, capsys, registry, unique_repo)
    src = make_bert_model(tmp_path / "models" / "big", weights=PUSH_THRESHOLD // 256 + 1)  # from the table threshold
    assert main(["push", str(src), f"{hub.repo}:latest", "-q"]) == 0
    commit = digest_of(capsys, f"{hub.repo}:latest").split(":")[1][:40]
    pinned = f"main-{commit[:12]}"
    whole, half = (f"{registry2.host}/{unique_repo}/mirror/{name}" for name in ("whole", "half"))
    with serving([hub.prefix]) as served:
        point_hub_at(monkeypatch, served.url, tmp_path / "hf-home" / "hub")
        assert run_job(load_job(sync_job(tmp_path / "whole.toml", served.url, whole, ["main"]))).exit_code == 0
        [table_referrer] = _table_referrers(whole, pinned)
        # what an older run left: the revision's manifest and both its tags, not the table's referrer
        there, left = (open_repository(parse_registry_reference(r)) for r in (whole, half))
        try:
            for tag in (pinned, "main"):
                copy(there, tag, left, tag, referrers=False)
        finally:
            there.close()
            left.close()
        assert _table_referrers(half, pinned) == []

        job = load_job(sync_job(tmp_path / "half.toml", served.url, half, ["main"]))
        again = run_job(job)
        assert again.exit_code == 0, again.format_text()
        [result] = again.artifacts
        assert result.status == "copied" and result.note.startswith("completed:"), result
        assert result.referrers == 1 and result.blobs_copied == 0  # the model's blobs were all there
        assert _table_referrers(half, pinned) == [table_referrer]
        assert digest_of(capsys, f"{half}:main") == digest_of(capsys, f"{half}:{pinned}") \
            == digest_of(capsys, f"{whole}:{pinned}")

        last = run_job(job)  # complete now: skipped without a download
        assert [(a.status, a.reason) for a in last.artifacts] == [("skipped", f"already mirrored ({pinned})")]
