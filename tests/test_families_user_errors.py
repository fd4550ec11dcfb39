"""What a platform engineer saw trying every family from the command line, against a real registry."""

from __future__ import annotations

import pytest

from ocibridge.cli import main
from tests.modelcar_images import BASE, write_image


@pytest.mark.parametrize("command", [["pull", "{ref}", "{tmp}/out"],
                                     ["convert", "{ref}", "{ref}-kit", "--to", "modelkit"]])
def test_a_container_image_is_refused_naming_the_reference_as_written(registry, unique_repo, tmp_path,
                                                                       capsys, command):
    """The line said '1 is a container image' (the tag alone) for registry/repo:1."""
    ref = f"{registry.host}/{unique_repo}:1"
    assert main(["copy", write_image(tmp_path / "img", "1", [BASE], docker=False), ref, "-q"]) == 0
    capsys.readouterr()
    assert main([part.format(ref=ref, tmp=tmp_path) for part in command]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"ocibridge: error: {ref} is a container image"), err

