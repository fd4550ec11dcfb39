"""A repository's ``.gitignore`` honoured as the Hub honours it (issue 75): preupload answers
``shouldIgnore`` by the ``.gitignore`` the commit adds (huggingface_hub sends its text), else by
the branch's own, and huggingface_hub leaves those files out of the commit. huggingface_hub's own
tests of it (test_upload_folder_gitignore_in_commit, ..._already_exists), through serve over the
real registry."""

from __future__ import annotations

from pathlib import Path

import huggingface_hub
import pytest
from huggingface_hub import HfApi
from serving import serving

from ocibridge.hubserver.repo.publishing import Publishing

#: huggingface_hub's own LFS upload passes bytes as data= to httpx, which warns (not ours)
pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning")

REPO = "acme/ignoring"


def folder(root: Path, files: dict[str, bytes]) -> Path:
    for path, data in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
    return root


def test_upload_folder_leaves_out_what_its_gitignore_and_then_the_branchs_ignore(tmp_path, registry, unique_repo,
                                                                                monkeypatch):
    """The first upload_folder holds the .gitignore (``nested/*`` but ``!nested/keep.bin``): the
    ignored file is not committed. A later one without a .gitignore of its own is answered by
    the branch's: its ignored file is left out too."""
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)
    rules = b"nested/*\n!nested/keep.bin\n*.log\n"
    first = folder(tmp_path / "first", {".gitignore": rules, "temp": b"temp", "nested/file.bin": b"ignored",
                                        "nested/keep.bin": b"kept", "deep/run.log": b"ignored"})
    later = folder(tmp_path / "later", {"nested/other.bin": b"ignored", "new.txt": b"new", "b.log": b"ignored"})
    with serving([f"{registry.host}/{unique_repo}"], tokens=("writer write * ci-bot",),
                 publish=Publishing()) as s:
        api = HfApi(endpoint=s.url, token="writer")
        api.create_repo(REPO)
        api.upload_folder(folder_path=first, repo_id=REPO)
        assert sorted(api.list_repo_files(REPO)) == [".gitattributes", ".gitignore", "nested/keep.bin", "temp"]
        assert not api.file_exists(REPO, "nested/file.bin")
        api.upload_folder(folder_path=later, repo_id=REPO)  # the .gitignore is the branch's now
        assert sorted(api.list_repo_files(REPO)) == [".gitattributes", ".gitignore", "nested/keep.bin", "new.txt",
                                                     "temp"]
        # a .gitignore the commit changes is the one that counts, not the branch's
        api.upload_folder(folder_path=folder(tmp_path / "third", {".gitignore": b"", "b.log": b"now kept"}),
                          repo_id=REPO)
        assert "b.log" in api.list_repo_files(REPO)
