"""--progress auto|bar|plain|none, totals known before the bar starts, a re-push that sends
nothing, and typed progress events with file paths (issue 18), against a real registry."""

from __future__ import annotations

import re
import subprocess
import sys

import ocibridge
from ocibridge.transfer.progress_events import ProgressEvent, events
from tests.modelgen import make_model, tree
from tests.transfer.test_progress import CHILD, on_terminal


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", CHILD, *args], capture_output=True, text=True, timeout=120)


def test_plain_prints_a_line_per_blob_started_done_with_size_and_rate(tmp_path, registry, unique_repo):
    model = make_model(tmp_path / "m")
    ref = f"{registry.host}/{unique_repo}:v1"
    proc = run("push", str(model), ref, "--progress", "plain")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    for path in tree(model):
        assert f"push: {path}: started" in proc.stderr
        assert any(re.fullmatch(rf"push: {re.escape(path)}: done [\d.]+ [KMG]?i?B in [\d.]+ s(, .+/s)?", line)
                   for line in lines), (path, lines)
    assert proc.stdout.startswith("pushed ")  # results stay on stdout

    again = run("push", str(model), f"{registry.host}/{unique_repo}:v2", "--progress", "plain")
    assert again.returncode == 0, again.stderr
    assert "started" not in again.stderr and "done" not in again.stderr
    assert all(f"push: {path}: already there" in again.stderr for path in tree(model))

    pulled = run("pull", ref, str(tmp_path / "out"), "--progress", "plain")
    assert pulled.returncode == 0 and "pull: model.safetensors: done" in pulled.stderr


def test_none_and_bar_when_piped(tmp_path):
    model = make_model(tmp_path / "m")
    silent = run("push", str(model), f"oci:{tmp_path}/l:a", "--progress", "none")
    assert silent.returncode == 0 and silent.stderr == ""
    forced = run("push", str(model), f"oci:{tmp_path}/other:b", "--progress", "bar")
    assert forced.returncode == 0 and "push 8/8 blobs" in forced.stderr
    named = [path for path in tree(model) if path in forced.stderr]  # only bar frames are on stderr
    assert named, forced.stderr.replace("\r", "\n")[-2000:]  # a file in flight is named


def test_a_re_push_that_sends_nothing_draws_no_transfer(tmp_path):
    model = make_model(tmp_path / "m")
    assert run("push", str(model), f"oci:{tmp_path}/l:v1", "-q").returncode == 0
    code, _, screen = on_terminal("push", str(model), f"oci:{tmp_path}/l:v2")
    assert code == 0
    assert "8/8 blobs, 8 already there" in screen
    assert "%|" not in screen.split("already there")[-1]  # no percentage bar once all are there
    assert "391k/391k" not in screen


def _first_non_plan_after_all_plans(calls) -> bool:
    planned: set[str] = set()
    started = False
    for kind, digest in calls:
        if kind == "plan":
            if started and digest not in planned:
                return False
            planned.add(digest)
        else:
            started = True
            if digest not in planned:
                return False
    return True


def test_totals_are_known_before_any_byte_moves(tmp_path, registry, unique_repo):
    model = make_model(tmp_path / "m")
    calls: list[tuple[str, str]] = []

    def record(kind, desc, nbytes):
        calls.append((kind, desc.digest))

    for dest in (f"{registry.host}/{unique_repo}:v1", f"oci:{tmp_path}/l:v1"):
        calls.clear()
        ocibridge.push(str(model), dest, progress=record)
        assert calls and _first_non_plan_after_all_plans(calls), calls
        calls.clear()
        ocibridge.pull(dest, str(tmp_path / f"out-{len(dest)}"), progress=record)
        assert calls and _first_non_plan_after_all_plans(calls), calls


def test_progress_events_carry_the_file_path_and_real_digests(tmp_path, registry, unique_repo):
    model = make_model(tmp_path / "m")
    seen: list[ProgressEvent] = []
    result = ocibridge.push(str(model), f"{registry.host}/{unique_repo}:v1", progress=events(seen.append))
    info = ocibridge.inspect(result.reference)
    real = {layer["digest"] for layer in info.layers} | {info.data["configDescriptor"]["digest"]}
    done = [e for e in seen if e.kind == "done"]
    assert {e.path for e in done if e.path} == set(tree(model))
    # a digest is either not known yet (hashed while sent) or the blob's real one
    assert all(e.digest is None or e.digest in real for e in seen)
    assert all(e.digest in real for e in done if e.path is None)  # the config
    by_path = {e.path: e for e in done if e.path}
    assert by_path["model.safetensors"].size == 200_000
