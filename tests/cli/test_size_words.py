"""One model, three sizes, each saying which it is (issue 90 item 11): ``ls``'s TOTAL is the
manifest, config and layers; ``inspect``'s ``Layers:`` the layers alone (the files as stored);
``push`` the bytes of the blobs it sent (layers and config, never the manifest)."""

from __future__ import annotations

import json
import re
import shutil

from ocibridge.cli import main
from ocibridge.core.terminal import human_size
from tests.docrun import EXAMPLE_MODEL


def test_ls_inspect_and_push_name_the_size_they_print(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OCIBRIDGE_STORE", str(tmp_path / "store"))
    model = shutil.copytree(EXAMPLE_MODEL, tmp_path / "tiny")
    assert main(["push", str(model), "tiny:v1"]) == 0
    pushed = capsys.readouterr().out
    assert main(["inspect", "tiny:v1", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    layers = info["totalSize"]
    assert re.search(r"5 blobs uploaded \(\d+ B of layers and config\)", pushed), pushed  # 4 layers, 1 config
    assert main(["inspect", "tiny:v1"]) == 0
    assert f"Layers:        {human_size(layers)} in 4 layers" in capsys.readouterr().out
    assert main(["ls"]) == 0
    header, row = capsys.readouterr().out.splitlines()
    assert header.split()[2] == "TOTAL" and human_size(layers) not in row
