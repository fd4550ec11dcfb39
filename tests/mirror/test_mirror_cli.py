"""`ocibridge mirror` as a user runs it: the main CLI (not only the module entry point), job
files that name credentials by file and a CA bundle by relative path, `--dry-run --json`, the
exit status; and per-entry concurrency actually bounding the copies in flight."""

from __future__ import annotations

import io
import json
import re
import sys
import threading
import time
from pathlib import Path

import pytest

import ocibridge.mirror.run as mirror_run
from ocibridge.cli import main
from ocibridge.mirror import load_job, run_job
from ocibridge.mirror.summary import SHARED_WORDS
from ocibridge.model.builder import build
from ocibridge.oci.reference import parse_registry_reference
from ocibridge.stores.layout import LayoutStore
from ocibridge.stores.registry import open_repository
from ocibridge.transfer.copy import copy
from tests.mirror.test_mirror_units import package, push_models

TAGS = ["1.0.0", "1.1.0", "2.0.0"]


def test_cli_mirror_password_file_ca_file_dry_run_json_and_exit_status(
        tmp_path: Path, capsys, auth_registry, tls_registry, unique_repo) -> None:
    """Source behind Basic auth (password in a file beside the job), target over HTTPS trusted
    through a CA file given relative to the job: dry run writes nothing, the run copies the
    exact manifests, a re-run skips, and a failing entry turns the exit status to 1."""
    src = open_repository(parse_registry_reference(f"{auth_registry.host}/{unique_repo}"),
                          username=auth_registry.username, password=auth_registry.password)
    digests = {tag: copy(build(package(i)), "artifact", src, tag).root.digest for i, tag in enumerate(TAGS)}
    src.close()
    jobdir = tmp_path / "jobs"
    jobdir.mkdir()
    (jobdir / "secret").write_text(auth_registry.password + "\n")
    (jobdir / "ca.pem").write_bytes(Path(tls_registry.ca_file).read_bytes())
    job = jobdir / "job.toml"
    job.write_text(f"""
[registries."{auth_registry.host}"]
username = "{auth_registry.username}"
password_file = "secret"

[registries."{tls_registry.host}"]
ca_file = "ca.pem"

[[sync]]
source = "{auth_registry.host}/{unique_repo}"
target = "{tls_registry.host}/{unique_repo}"
tags = {{ semver = "^1" }}
""")
    dst = open_repository(parse_registry_reference(f"{tls_registry.host}/{unique_repo}"),
                          ca_file=str(tls_registry.ca_file))

    assert main(["mirror", str(job), "--dry-run", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["dryRun"] is True and plan["ok"] is True
    assert sorted(a["source"].rsplit(":", 1)[1] for a in plan["artifacts"]) == ["1.0.0", "1.1.0"]
    assert {a["status"] for a in plan["artifacts"]} == {"planned"} and plan["totals"]["bytesPlanned"] > 0
    assert plan["entries"][0]["tagsFilteredOut"] == 1
    assert dst.tags() == []

    assert main(["mirror", str(job)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1].startswith("2 copied (") and ", 0 skipped, 0 failed in " in out
    for tag in ("1.0.0", "1.1.0"):
        assert dst.resolve(tag).digest == digests[tag]
    assert sorted(dst.tags()) == ["1.0.0", "1.1.0"]

    assert main(["mirror", str(job), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["totals"]["skipped"] == 2 and again["totals"]["bytesCopied"] == 0

    # the same job with the password file gone: the entry fails, in the summary, exit status 1
    (jobdir / "secret").unlink()
    assert main(["mirror", str(job)]) == 1
    out = capsys.readouterr().out
    assert "FAILED" in out and "cannot read password_file" in out
    dst.close()


def test_per_entry_concurrency_bounds_the_copies_in_flight(tmp_path: Path, monkeypatch) -> None:
    """`concurrency.artifacts` of each entry (over the job default) is the most copies running
    at once, and `concurrency.blobs` is what each copy is given. The real copy runs; the spy
    only counts and holds each copy a moment so that overlaps show."""
    push_models(LayoutStore(tmp_path / "src", create=True), [f"1.{i}.0" for i in range(6)])
    real_copy = mirror_run.copy
    lock = threading.Lock()
    state = {"now": 0, "peak": 0, "blobs": set()}

    def spy(*args, **kwargs):
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
            state["blobs"].add(kwargs["concurrency"])
        try:
            time.sleep(0.15)
            return real_copy(*args, **kwargs)
        finally:
            with lock:
                state["now"] -= 1

    monkeypatch.setattr(mirror_run, "copy", spy)
    job = tmp_path / "job.toml"
    for target, entry, expected in (("oci:a", 'concurrency = { artifacts = 3, blobs = 5 }', 3),
                                    ("oci:b", "", 2), ("oci:c", 'concurrency = { artifacts = 1, blobs = 1 }', 1)):
        job.write_text(f'[defaults]\nconcurrency = {{ artifacts = 2, blobs = 3 }}\n\n'
                       f'[[sync]]\nsource = "oci:src"\ntarget = "{target}"\n{entry}\n')
        state.update(now=0, peak=0, blobs=set())
        summary = run_job(load_job(job))
        assert summary.ok and len(summary.with_status("copied")) == 6, summary.format_text()
        assert state["peak"] == expected, (target, state)
        assert state["blobs"] == {5 if expected == 3 else 3 if expected == 2 else 1}


def test_cli_on_a_terminal_reports_each_artifact_as_it_finishes(tmp_path: Path, monkeypatch, capsys) -> None:
    """Not all at the end of the entry: with one copy at a time, each copy starts only after the
    previous one's line is on stderr. Nothing but the summary on stdout."""
    push_models(LayoutStore(tmp_path / "src", create=True), ["1.0.0", "1.1.0", "1.2.0", "1.3.0"])

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    err = Terminal()
    monkeypatch.setattr(sys, "stderr", err)
    real_copy, seen = mirror_run.copy, []

    def spy(*args, **kwargs):
        seen.append(err.getvalue().count("copied: "))
        return real_copy(*args, **kwargs)

    monkeypatch.setattr(mirror_run, "copy", spy)
    job = tmp_path / "job.toml"
    job.write_text('[[sync]]\nsource = "oci:src"\ntarget = "oci:dst"\nconcurrency = { artifacts = 1 }\n')
    assert main(["mirror", str(job)]) == 0
    assert seen == [0, 1, 2, 3]
    lines = err.getvalue().splitlines()  # the lines, and the job's bar (tests/mirror/test_mirror_progress.py)
    assert sorted(line for line in lines if line.startswith("copied: ")) == [
        f"copied: oci:{tmp_path / 'src'}:1.{i}.0" for i in range(4)]
    assert all(line.startswith(("copied: ", "mirror ")) or not line.strip() for line in lines), lines
    assert capsys.readouterr().out.splitlines()[-1].startswith("4 copied")
    err.truncate(0)
    assert main(["mirror", str(job), "--json"]) == 0  # --json: no live lines
    assert err.getvalue().strip("\0") == ""


@pytest.mark.parametrize("value", [0, 65])
def test_concurrency_outside_its_range_is_refused(tmp_path: Path, capsys, value: int) -> None:
    job = tmp_path / "job.toml"
    job.write_text(f'[[sync]]\nsource = "oci:a"\ntarget = "oci:b"\nconcurrency = {{ artifacts = {value} }}\n')
    assert main(["mirror", str(job), "--dry-run"]) == 1
    assert "sync.0.concurrency.artifacts" in capsys.readouterr().err


def test_dry_run_counts_the_skip_rows_it_lists(tmp_path: Path, registry, registry2, unique_repo) -> None:
    """Issue 63 item 7: two tags of one model planned together listed the second's blobs as
    ``skip`` rows (the first artifact sends them) under "0 already there". The count on the line
    now accounts for every row below it, run as a user runs it."""
    import subprocess

    src = open_repository(parse_registry_reference(f"{registry.host}/{unique_repo}"))
    artifact = build(package(0))
    for tag in ("a", "b"):
        copy(artifact, "artifact", src, tag)
    src.close()
    job = tmp_path / "job.toml"
    job.write_text(f'[[sync]]\nsource = "{registry.host}/{unique_repo}"\ntarget = "{registry2.host}/{unique_repo}"\n')
    done = subprocess.run([sys.executable, "-m", "ocibridge", "mirror", str(job), "--dry-run"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    blocks = done.stdout.split("would copy ")[1:]
    assert len(blocks) == 2, done.stdout
    for block in blocks:
        head, *rows = block.splitlines()
        actions = [row.split()[0] for row in rows if row.startswith("        ") and "sha256:" in row]
        said = {what: int(n) for n, what in re.findall(r"(\d+) (blobs to send|to mount|already there|shared with "
                                                       r"another artifact of this run)", head)}
        assert said["blobs to send"] == actions.count("send"), (head, rows)
        assert said["already there"] + said.get("shared with another artifact of this run", 0) == \
            actions.count("skip"), (head, rows)
    assert SHARED_WORDS in done.stdout, done.stdout
    planned = {row.split()[1] for row in done.stdout.splitlines() if row.strip().startswith(("send ", "skip "))}
    # the real run: each shared blob sent once, by one of the two (not necessarily the one planned first)
    real = subprocess.run([sys.executable, "-m", "ocibridge", "mirror", str(job), "--json"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert real.returncode == 0, real.stderr
    sent = [d for a in json.loads(real.stdout)["artifacts"] for d in a["blobsSent"]]
    assert sorted(sent) == sorted(planned), (sent, planned)


def test_an_entry_that_copies_nothing_leaves_no_layout_behind(tmp_path: Path, capsys, registry, unique_repo) -> None:
    """A misspelt source repository, an unreachable registry or a missing tag failed the entry
    but left an empty OCI layout at its target: a layout target is made only when an artifact
    is copied into it; the entry that copies still makes its own."""
    src = open_repository(parse_registry_reference(f"{registry.host}/{unique_repo}"))
    copy(build(package(0)), "artifact", src, "v1")
    src.close()
    job = tmp_path / "job.toml"
    job.write_text(f"""
[[sync]]
source = "{registry.host}/{unique_repo}-misspelt"
target = "oci:out/misspelt"

[[sync]]
source = "127.0.0.1:1/{unique_repo}"
target = "oci:out/unreachable"

[[sync]]
source = "{registry.host}/{unique_repo}:no-such-tag"
target = "oci:out/no-tag"

[[sync]]
source = "{registry.host}/{unique_repo}"
target = "oci:out/copied"
""")
    assert main(["mirror", str(job)]) == 1
    assert "1 copied" in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["copied"]
    assert LayoutStore(tmp_path / "out" / "copied").tags() == ["v1"]


def test_an_empty_job_path_is_named_as_such(capsys) -> None:
    """``ocibridge mirror "$JOB"`` with JOB unset said 'mirror job .: Is a directory' (the current
    directory); it is one line naming the empty JOB now."""
    assert main(["mirror", ""]) == 2
    assert capsys.readouterr().err == ("ocibridge: error: an empty JOB (an unset shell variable?) "
                                       "(see 'ocibridge mirror --help')\n")
