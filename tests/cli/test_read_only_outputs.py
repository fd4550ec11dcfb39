"""A file the user made read-only is kept: every command writing one output file stages it and
renames it into place, and rename(2) ignores the target's mode, so ``save -o`` over a 0444 file
replaced it silently where ``cp``, ``tar -f`` and ``curl -o`` refuse."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from ocibridge.api.bundle import save
from ocibridge.cli import main
from ocibridge.core.fsutil import check_output_file
from ocibridge.errors import UsageError
from tests.support.cli_run import one_error_line, output_commands_setup, pushed_layout

_KEPT = b"the user's own bytes\n"


def _read_only(path: Path) -> Path:
    path.write_bytes(_KEPT)
    path.chmod(0o444)
    return path


@pytest.mark.parametrize("argv, name", [
    (["save", "{ref}", "-o", "{out}"], "out.tar"),
    (["mirror", "{job}", "--report", "{out}"], "report.json"),
    (["keygen", "{prefix}", "--overwrite"], "cosign.key"),
    (["pull", "{ref}", "{out}", "--overwrite"], "m.carton"),
    (["warm", "load", "{ref}", "--torch", "{out}", "--allow-unsigned"], "torch.bin"),
], ids=["save", "mirror --report", "keygen --overwrite", "pull .carton --overwrite", "warm load --torch"])
def test_a_read_only_output_is_refused_and_left_as_it_was(argv, name, tmp_path, capsys, monkeypatch):
    ref, work, job = output_commands_setup(tmp_path, tmp_path, monkeypatch)
    out = _read_only(work / name)
    capsys.readouterr()
    words = [a.format(ref=ref, out=out, job=job, prefix=work / "cosign") for a in argv]
    assert main(words) == 2
    assert f"{out} is read-only (mode 0444): refused, nothing written" in one_error_line(capsys)
    assert out.read_bytes() == _KEPT and stat.S_IMODE(out.stat().st_mode) == 0o444
    assert sorted(p.name for p in work.iterdir()) == [name]
    assert not (tmp_path / "mirrored").exists()


def test_save_over_a_writable_file_still_replaces_it_and_the_api_refuses_a_read_only_one(tmp_path):
    ref = pushed_layout(tmp_path)
    out = tmp_path / "out.tar"
    out.write_bytes(_KEPT)
    save(ref, out)
    assert out.read_bytes() != _KEPT
    out.chmod(0o400)  # read-only for its owner alone: still no write bit
    with pytest.raises(UsageError, match="read-only"):
        save(ref, out)
    out.chmod(0o200)  # a write bit for the owner: writable, replaced as before
    save(ref, out)


def test_a_link_to_a_read_only_file_is_refused_and_a_missing_file_is_fine(tmp_path):
    target = _read_only(tmp_path / "kept")
    link = tmp_path / "link"
    link.symlink_to(target)
    with pytest.raises(UsageError, match="read-only"):
        check_output_file(link)
    check_output_file(tmp_path / "new")

