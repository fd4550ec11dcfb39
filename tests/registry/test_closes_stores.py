"""Every registry client an API call opens is closed when it returns: a copy between two
registries (and a push, a pull, an inspect) leaves no connection pool and no socket behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.client_probe import CLIENT_COUNTER, run_probe_each, small_model

SETUP = CLIENT_COUNTER + """
from ocibridge.cli import main
"""
TAIL = """
code = main(args)
gc.collect()
print("CLIENTS", len(made), len(closed & set(made)), "EXIT", code)
"""


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    return small_model(tmp_path)


def test_every_command_closes_the_clients_it_opens(registry, unique_repo, model_dir, tmp_path):
    src, dst = f"{registry.host}/{unique_repo}:v1", f"{registry.host}/{unique_repo}-copy:v1"
    batch = [["push", "-q", str(model_dir), src],
             ["copy", "-q", src, dst],
             ["pull", "-q", dst, str(tmp_path / "out")],
             ["inspect", dst],
             ["tags", f"{registry.host}/{unique_repo}"]]
    for done in run_probe_each(SETUP, TAIL, batch, tmp_path, tmp_path / "runs"):  # each a fresh process, in order
        args, out, err = done.args, done.stdout, done.stderr
        assert "EXIT 0" in out, (args, out, err)
        made, closed = map(int, out.split("CLIENTS", 1)[1].split()[:2])
        assert made >= 1 and closed == made, (args, out)
        assert "ResourceWarning" not in err, (args, err)
