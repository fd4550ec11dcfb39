"""``ocibridge-*`` tags are ocibridge's own bookkeeping (a commit's tag, the refs record, a
referrer's, the writer lease): ``push``, ``copy`` and ``tag`` refuse one as a destination with one
line and write nothing (issue 76), over a layout and the real registry alike."""

from __future__ import annotations

import json

import pytest

from ocibridge.cli import main
from tests.modelgen import make_bert_model


@pytest.mark.parametrize("where", ["layout", "registry"])
def test_push_copy_and_tag_refuse_a_bookkeeping_tag(tmp_path, capsys, registry, unique_repo, where):
    src = make_bert_model(tmp_path / "tiny")
    base = f"oci:{tmp_path / 'lay'}:tiny" if where == "layout" else f"{registry.host}/{unique_repo}/tiny"
    assert main(["push", str(src), f"{base}:v1", "-q"]) == 0
    capsys.readouterr()
    for argv in (["push", str(src), f"{base}:ocibridge-refs"],
                 ["copy", f"{base}:v1", f"{base}:ocibridge-commit-{'0' * 40}"],
                 ["tag", f"{base}:v1", "ocibridge-writer"]):
        assert main([*argv, "-q"] if argv[0] != "tag" else argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "ocibridge's own bookkeeping" in err, (argv, err)
    assert main(["tags", base, "--all", "--json"]) == 0
    assert [t.rpartition(":")[2] for t in json.loads(capsys.readouterr().out)] == ["v1"]  # nothing was written
