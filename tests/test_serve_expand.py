"""What huggingface_hub's ``expand`` and ``formatted`` ask of serve (issue 75): each file's and
folder's last commit (``list_repo_tree``/``get_paths_info(expand=True)``, ``HfFileSystem``'s
``modified`` and ``ls(expand_info=True)``), and commits with their formatted title and message.
serve runs in-process over the real registry, publishing as ``ocibridge serve`` does."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import huggingface_hub
import pytest
from huggingface_hub import HfApi
from serving import serving

from ocibridge.hubserver.writes.publishing import Publishing

#: huggingface_hub's own LFS upload passes bytes as data= to httpx, which warns (not ours)
pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning")

TOKENS = ("writer write * ci-bot", "reader")
REPO = "acme/expand"


@dataclass
class History:
    url: str
    api: HfApi
    commits: list[str]  # oldest first


@pytest.fixture
def history(registry: Any, unique_repo: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[History]:
    """Three commits: the first adds every file, the second changes ``dir/b.txt`` only, the
    third changes ``a.txt`` only (``same.txt`` and ``dir/deep/c.txt``: the first's to this day)."""
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)
    with serving([f"{registry.host}/{unique_repo}"], tokens=TOKENS, publish=Publishing()) as s:
        api = HfApi(endpoint=s.url, token="writer")
        api.create_repo(REPO)
        first = api.create_commit(REPO, operations=[
            huggingface_hub.CommitOperationAdd(path, data) for path, data in (
                ("a.txt", b"a one"), ("same.txt", b"same"), ("dir/b.txt", b"b one"), ("dir/deep/c.txt", b"c"))],
            commit_message="first <all>")
        second = api.upload_file(path_or_fileobj=b"b two", path_in_repo="dir/b.txt", repo_id=REPO,
                                 commit_message="second: b & more", commit_description="why <b>")
        third = api.upload_file(path_or_fileobj=b"a two", path_in_repo="a.txt", repo_id=REPO,
                                commit_message="third")
        yield History(s.url, api, [first.oid, second.oid, third.oid])


def test_list_repo_commits_formatted_gives_the_title_and_message_as_html(history):
    """``formatted=True`` (``expand[]=formatted``): each commit's title and message, HTML-escaped;
    without it neither, as the Hub answers."""
    plain = history.api.list_repo_commits(REPO)
    assert [c.commit_id for c in plain] == history.commits[::-1]
    assert all(c.formatted_title is None and c.formatted_message is None for c in plain)
    formatted = history.api.list_repo_commits(REPO, formatted=True)
    assert [c.commit_id for c in formatted] == history.commits[::-1]
    assert [c.formatted_title for c in formatted] == ["third", "second: b &amp; more", "first &lt;all&gt;"]
    assert formatted[1].formatted_message == "why &lt;b&gt;" and formatted[1].message == "why <b>"
    assert all(c.formatted_message is not None for c in formatted)
