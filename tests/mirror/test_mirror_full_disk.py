"""A mirror job writing onto a full disk: each entry's FAILED line names the disks it writes to,
as every command's error line does, not Python's ``OSError: [Errno 28]``; the job's summary and
exit status are those of any failed entry."""

from __future__ import annotations

import ocibridge
from tests.support.fulldisk import model_and_places, run_on_full_disk


def test_a_full_disk_names_the_target_and_the_cache_in_each_entrys_line(tmp_path, monkeypatch):
    """The disk is a 64 KiB tmpfs (tests/support/fulldisk.py)."""
    model, full, cache = model_and_places(tmp_path)
    monkeypatch.setenv("OCIBRIDGE_CACHE", str(cache))
    ocibridge.push(str(model), f"oci:{tmp_path / 'lay'}:v1")  # set-up: in this process
    ocibridge.push(str(model), f"oci:{tmp_path / 'lay'}:v2")
    job = tmp_path / "job.toml"
    job.write_text(f'[[sync]]\nsource = "oci:{tmp_path / "lay"}"\ntarget = "oci:{full / "dst"}"\n')
    done = run_on_full_disk(full, f'"$0" -m ocibridge mirror "{job}"; echo "exit $?"')
    said = (f"No space left on device (writing to {full / 'dst'} or the cache {cache}: free some space there, "
            "then run it again)")
    assert done.stdout.splitlines()[-1] == "exit 1", (done.stdout, done.stderr)
    failed = [line for line in (done.stdout + done.stderr).splitlines() if line.startswith("FAILED")]
    assert failed == [f"FAILED  oci:{tmp_path / 'lay'}:{tag} -> oci:{full / 'dst'}:{tag}: {said}"
                      for tag in ("v1", "v2")], (done.stdout, done.stderr)
    assert "Errno" not in done.stdout + done.stderr
    assert "0 copied (0 B sent, 0 blobs mounted), 0 skipped, 2 failed in " in done.stdout + done.stderr
