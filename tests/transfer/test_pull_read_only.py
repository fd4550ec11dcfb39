"""A pull into a directory keeps what the user made read-only, as a single output file does
(tests/cli/test_read_only_outputs.py): files are staged and renamed into place, and rename(2)
replaces a 0444 file (and root writes into a 0555 directory), so ``pull -o DIR --overwrite``
replaced them silently. Now the pull is refused, one line naming the file, exit 2, DIR as it was."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from ocibridge.cli import main
from tests.support.cli_run import one_error_line

_EDITED = b"the user's own edits\n"


@pytest.fixture(scope="module")
def pushed(registry, tmp_path_factory) -> str:
    """A small model with a nested file, pushed once for this file's tests."""
    model = tmp_path_factory.mktemp("ro") / "m"
    (model / "sub").mkdir(parents=True)
    (model / "config.json").write_text('{"a": 1}\n')
    (model / "README.md").write_text("# m\n")
    (model / "sub" / "notes.txt").write_text("notes\n")
    ref = f"{registry.host}/pull-read-only-dir/m:v1"
    assert main(["push", str(model), ref, "-q"]) == 0  # set-up
    return ref


def _pulled(ref: str, out: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    assert main(["pull", ref, "-o", str(out), "-q"]) == 0  # set-up
    capsys.readouterr()
    return out


def _state(out: Path) -> dict[str, tuple[int, bytes | None]]:
    """Every entry of ``out`` (itself too) with its mode and a file's bytes."""
    state = {".": (out.stat().st_mode, None)}
    for path in out.rglob("*"):
        mode = path.lstat().st_mode
        state[str(path.relative_to(out))] = (mode, path.read_bytes() if stat.S_ISREG(mode) else None)
    return state


def _edited_read_only(path: Path) -> Path:
    path.write_bytes(_EDITED)
    path.chmod(0o444)
    return path


@pytest.mark.parametrize("make_read_only, mode", [
    (lambda out: _edited_read_only(out / "config.json"), "0444"),
    (lambda out: _edited_read_only(out / "sub" / "notes.txt"), "0444"),
    (lambda out: (out.chmod(0o555), out)[1], "0555"),
    (lambda out: ((out / "sub" / "notes.txt").unlink(), (out / "sub").chmod(0o555), out / "sub")[2], "0555"),
], ids=["read-only file", "read-only nested file", "read-only directory", "read-only subdirectory"])
def test_pull_overwrite_refuses_a_read_only_file_or_directory_and_changes_nothing(
        make_read_only, mode, pushed, tmp_path, capsys):
    out = _pulled(pushed, tmp_path / "out", capsys)
    (out / "README.md").write_bytes(_EDITED)  # a differing writable file: --overwrite would replace it
    kept = make_read_only(out)
    before = _state(out)
    try:
        assert main(["pull", pushed, "-o", str(out), "--overwrite"]) == 2
        assert f"{kept} is read-only (mode {mode}): refused, nothing written" in one_error_line(capsys)
        assert _state(out) == before
    finally:
        for path in (out, out / "sub"):
            path.chmod(0o755)  # for tmp_path's removal


def test_every_read_only_file_is_counted_and_a_read_only_file_already_right_is_no_refusal(
        pushed, tmp_path, capsys):
    out = _pulled(pushed, tmp_path / "out", capsys)
    _edited_read_only(out / "config.json")
    _edited_read_only(out / "README.md")
    assert main(["pull", pushed, "-o", str(out), "--overwrite"]) == 2
    line = one_error_line(capsys)
    assert f"{out / 'README.md'} is read-only (mode 0444): refused, nothing written" in line
    assert line.endswith(f"; refused so too: {out / 'config.json'} (see 'ocibridge pull --help')")
    for path in (out / "config.json", out / "README.md"):
        path.unlink()
    out = _pulled(pushed, out, capsys)  # both written again, then made read-only as they are
    for path in (out / "config.json", out / "README.md"):
        path.chmod(0o444)
    assert main(["pull", pushed, "-o", str(out), "--overwrite", "-q"]) == 0  # nothing to replace
    assert (out / "config.json").read_bytes() == b'{"a": 1}\n'
