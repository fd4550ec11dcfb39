"""The CLI run in-process, as tests check it: the exit code with its one-line error, and what
``ocibridge resolve`` says of a reference."""

from __future__ import annotations

from pathlib import Path

import pytest

from ocibridge.cli import main


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """Exit code and stderr; a failure must be exactly one line."""
    code = main(list(args))
    err = capsys.readouterr().err
    if code:
        assert err.startswith("ocibridge: error: ") and err.count("\n") == 1, err
    return code, err


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    """The one ``ocibridge: error:`` line a refused command printed: never main's last-resort
    "unexpected <Exception>", never a traceback."""
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ocibridge: error: "), err
    assert "unexpected" not in err and "Traceback" not in err, err
    return lines[0]


def digest_of(capsys: pytest.CaptureFixture[str], ref: str) -> str:
    """The digest ``ref`` resolves to (what the test printed before is dropped)."""
    capsys.readouterr()
    assert main(["resolve", ref]) == 0
    return capsys.readouterr().out.split()[-1]


def pushed_layout(tmp_path: Path) -> str:
    """A one-file model pushed into the layout ``tmp_path/lay`` as ``v1``: its reference."""
    model = tmp_path / "m"
    model.mkdir()
    (model / "README.md").write_text("# m\n")
    assert main(["push", str(model), f"oci:{tmp_path}/lay:v1", "-q"]) == 0  # set-up
    return f"oci:{tmp_path}/lay:v1"


def output_commands_setup(tmp_path: Path, job_dir: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path, Path]:
    """What the tests of commands writing one output file share: a pushed layout's reference, an
    empty ``tmp_path/work`` for the output, a mirror job (in ``job_dir``) copying that layout into
    ``tmp_path/mirrored``, and a key password for keygen."""
    ref = pushed_layout(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    job = job_dir / "job.toml"
    job.write_text(f'[[sync]]\nsource = "oci:{tmp_path}/lay"\ntarget = "oci:{tmp_path}/mirrored"\n')
    monkeypatch.setenv("COSIGN_PASSWORD", "pw")
    return ref, work, job
