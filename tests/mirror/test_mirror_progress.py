"""``mirror`` shows its work on a terminal as push, pull and copy do: the job's bytes in one bar
(drawn while a blob moves, not only when an artifact ends) and a line per artifact copied; piped
(a log) or with ``-q`` it prints nothing but the summary. Run on a real pty (tests/transfer/test_progress.py)."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.transfer.test_progress import CHILD, make_big_model, on_terminal

FRAME = re.compile(r"mirror (\d+)/(\d+) blobs(?:, \d+ already there)?(?:, \d+ mounted)?:\s+(\d+)%")


def job(tmp_path, registry, unique_repo) -> tuple[str, str]:
    source = f"{registry.host}/{unique_repo}/big"
    pushed = subprocess.run([sys.executable, "-m", "ocibridge", "push", str(make_big_model(tmp_path / "m")),
                             f"{source}:v1", "-q"], capture_output=True, text=True, timeout=120)
    assert pushed.returncode == 0, pushed.stderr
    path = tmp_path / "job.toml"
    path.write_text(f'[[sync]]\nsource = "{source}"\ntarget = "oci:{tmp_path}/mirror"\n')
    return str(path), source


def test_mirror_draws_the_jobs_bytes_and_names_each_artifact_on_a_terminal(tmp_path, registry, unique_repo):
    path, source = job(tmp_path, registry, unique_repo)
    code, out, screen = on_terminal("mirror", path)
    assert code == 0, screen
    seen = [(int(a), int(b), int(pct)) for a, b, pct in FRAME.findall(screen)]
    assert seen, screen[-1000:]
    assert any(10 <= pct <= 90 for *_, pct in seen), seen  # drawn while the 2 MiB blob moves
    assert seen[-1][0] == seen[-1][1] and seen[-1][2] == 100, seen[-1]
    assert f"copied: {source}:v1" in screen
    assert "1 copied" in out and "\r" not in out  # the summary stays on stdout, whole


def test_mirror_piped_or_quiet_prints_only_its_summary(tmp_path, registry, unique_repo):
    path, source = job(tmp_path, registry, unique_repo)
    piped = subprocess.run([sys.executable, "-c", CHILD, "mirror", path], capture_output=True, text=True, timeout=120)
    assert piped.returncode == 0 and piped.stderr == "", piped.stderr
    assert "1 copied" in piped.stdout
    (tmp_path / "mirror").rename(tmp_path / "first")
    code, out, screen = on_terminal("mirror", path, "-q")
    assert code == 0 and "1 copied" in out
    assert "blobs" not in screen and "copied:" not in screen, screen
