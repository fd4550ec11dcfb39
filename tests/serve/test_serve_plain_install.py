"""``serve`` on the plain install (``pip install ocibridge``, no ``serve`` extra): whatever the
flags, one line naming ``ocibridge[serve]``, never an import error; run by the console script of
a virtualenv that holds ocibridge's core requirements only (tests/docrun.py)."""

from __future__ import annotations

import subprocess

import pytest

from tests.docrun import plain_venv, reader_venvs  # noqa: F401  (fixture)

EXTRA_LINE = ("ocibridge: error: ocibridge serve needs Starlette, uvicorn and its page renderers: "
              "pip install 'ocibridge[serve]'")


@pytest.mark.parametrize("flags", [[], ["--token-file", "tokens.txt"], ["--token-file", "tokens.txt", "--no-metrics"]])
def test_serve_without_its_extra_says_which_extra_whatever_the_flags(tmp_path, reader_venvs, flags):  # noqa: F811
    """The token file was read before the extra was checked, through a module that imports
    Starlette: ``--token-file`` said ``unexpected ModuleNotFoundError: No module named 'starlette'``."""
    venv = plain_venv(reader_venvs)
    assert not (venv / "bin" / "uvicorn").exists()
    (tmp_path / "tokens.txt").write_text("hf_reader\nhf_ci write acme/ ci-bot\n")
    proc = subprocess.run([str(venv / "bin" / "ocibridge"), "serve", "local", *flags], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc
    assert proc.stderr.splitlines() == [EXTRA_LINE], proc.stderr
