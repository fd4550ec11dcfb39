"""A mirror job writing onto a full disk: each entry's FAILED line names the disks it writes to,
as every command's error line does, not Python's ``OSError: [Errno 28]``; the job's summary and
exit status are those of any failed entry."""

from __future__ import annotations

import os
import subprocess
import sys

import ocibridge


def test_a_full_disk_names_the_target_and_the_cache_in_each_entrys_line(tmp_path, monkeypatch):
    """The disk is a 64 KiB tmpfs in a mount namespace of the test's own (``unshare``, util-linux),
    as in tests/cli/test_cli_mistakes.py."""
    model = tmp_path / "m"
    model.mkdir()
    (model / "model.safetensors").write_bytes(os.urandom(300_000))
    (model / "config.json").write_text("{}")
    full, cache = tmp_path / "full", tmp_path / "cache"
    full.mkdir()
    monkeypatch.setenv("OCIBRIDGE_CACHE", str(cache))
    ocibridge.push(str(model), f"oci:{tmp_path / 'lay'}:v1")  # set-up: in this process
    ocibridge.push(str(model), f"oci:{tmp_path / 'lay'}:v2")
    job = tmp_path / "job.toml"
    job.write_text(f'[[sync]]\nsource = "oci:{tmp_path / "lay"}"\ntarget = "oci:{full / "dst"}"\n')
    script = f'mount -t tmpfs -o size=64k tmpfs "{full}" && "$0" -m ocibridge mirror "{job}"; echo "exit $?"'
    done = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script, sys.executable],
                          env=dict(os.environ), capture_output=True, text=True, timeout=120, check=False)
    said = (f"No space left on device (writing to {full / 'dst'} or the cache {cache}: free some space there, "
            "then run it again)")
    assert done.stdout.splitlines()[-1] == "exit 1", (done.stdout, done.stderr)
    failed = [line for line in (done.stdout + done.stderr).splitlines() if line.startswith("FAILED")]
    assert failed == [f"FAILED  oci:{tmp_path / 'lay'}:{tag} -> oci:{full / 'dst'}:{tag}: {said}"
                      for tag in ("v1", "v2")], (done.stdout, done.stderr)
    assert "Errno" not in done.stdout + done.stderr
    assert "0 copied (0 B sent, 0 blobs mounted), 0 skipped, 2 failed in " in done.stdout + done.stderr
