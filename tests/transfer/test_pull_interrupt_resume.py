"""Ctrl-C of a pull says what was kept and how to go on, and the pull run again draws its bar
from what was kept (it said ``resumed … at 52%`` and drew 0 % upwards). A real process stopped
by SIGINT mid-blob through a throttling proxy, then the same pull on a pty (tests/transfer/test_progress.py)."""

from __future__ import annotations

import re

from ocibridge.cli import main
from ocibridge.oci.mediatypes import OCI_LAYER_TAR
from ocibridge.oci.models import Descriptor
from tests.transfer.test_progress import frames, on_terminal
from tests.transfer.test_transfer_interrupt import (
    _model_with_big_file,
    _pull_interrupted,
)

SAID = ("ocibridge: interrupted: the blobs received and the part of the one in flight are kept; "
        "run the same command again to resume")


def test_an_interrupted_pull_says_what_it_kept_and_its_rerun_draws_from_there(fault_proxy, unique_repo, tmp_path):
    model = _model_with_big_file(tmp_path / "m")
    ref = f"{fault_proxy.host}/{unique_repo}:v1"
    assert main(["push", str(model), ref, "-q"]) == 0
    big = Descriptor.for_bytes(OCI_LAYER_TAR, (model / "weights.bin").read_bytes())
    out = tmp_path / "out"
    err = _pull_interrupted(fault_proxy, ref, big, out)
    assert err.splitlines()[-1] == SAID, err

    code, _, screen = on_terminal("pull", ref, "-o", str(out), "--concurrency", "1")
    assert code == 0, screen
    resumed = re.search(rf"resumed {big.digest} at (\d+)%", screen)
    assert resumed, screen[-1000:]
    kept = int(resumed[1])
    assert kept >= 25, kept  # INTERRUPT_AFTER of SIZE at least
    drawn = [pct for *_, pct in frames(screen)]
    assert drawn and drawn[-1] == 100, drawn
    # before: the resumed blob's bytes counted from 0 (6 %, 12 % ... then a jump to 100 %)
    assert [pct for pct in drawn if 2 <= pct < kept - 2] == [], (kept, drawn)
    assert any(kept - 2 <= pct < 100 for pct in drawn), (kept, drawn)
