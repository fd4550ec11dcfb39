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

from ocibridge.hubserver.repo.publishing import Publishing

#: huggingface_hub's own LFS upload passes bytes as data= to httpx, which warns (not ours)
pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning")

TOKENS = ("writer write * ci-bot", "reader")
REPO = "acme/expand"


@dataclass
class History:
    url: str
    api: HfApi
    commits: list[str]  # oldest first
    initial: str  # create_repo's first commit, before them


@pytest.fixture
def history(registry: Any, unique_repo: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[History]:
    """Three commits: the first adds every file, the second changes ``dir/b.txt`` only, the
    third changes ``a.txt`` only (``same.txt`` and ``dir/deep/c.txt``: the first's to this day)."""
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)
    with serving([f"{registry.host}/{unique_repo}"], tokens=TOKENS, publish=Publishing()) as s:
        api = HfApi(endpoint=s.url, token="writer")
        initial = api.create_repo(REPO) and api.model_info(REPO).sha  # its .gitattributes
        first = api.create_commit(REPO, operations=[
            huggingface_hub.CommitOperationAdd(path, data) for path, data in (
                ("a.txt", b"a one"), ("same.txt", b"same"), ("dir/b.txt", b"b one"), ("dir/deep/c.txt", b"c"))],
            commit_message="first <all>")
        second = api.upload_file(path_or_fileobj=b"b two", path_in_repo="dir/b.txt", repo_id=REPO,
                                 commit_message="second: b & more", commit_description="why <b>")
        third = api.upload_file(path_or_fileobj=b"a two", path_in_repo="a.txt", repo_id=REPO,
                                commit_message="third")
        yield History(s.url, api, [first.oid, second.oid, third.oid], initial)


def test_list_repo_commits_formatted_gives_the_title_and_message_as_html(history):
    """``formatted=True`` (``expand[]=formatted``): each commit's title and message, HTML-escaped;
    without it neither, as the Hub answers."""
    plain = history.api.list_repo_commits(REPO)
    assert [c.commit_id for c in plain] == [*history.commits[::-1], history.initial]
    assert all(c.formatted_title is None and c.formatted_message is None for c in plain)
    formatted = history.api.list_repo_commits(REPO, formatted=True)
    assert [c.commit_id for c in formatted] == [*history.commits[::-1], history.initial]
    assert [c.formatted_title for c in formatted] == ["third", "second: b &amp; more", "first &lt;all&gt;",
                                                      "initial commit"]
    assert formatted[1].formatted_message == "why &lt;b&gt;" and formatted[1].message == "why <b>"
    assert all(c.formatted_message is not None for c in formatted)


def test_get_paths_info_and_list_repo_tree_with_expand_name_the_commit_that_last_changed_each_path(history):
    """A file changed in the second of three commits names the second; one no later commit
    touched names the first; a folder names the newest commit that changed anything under it.
    Without ``expand`` no entry carries one."""
    first, second, third = history.commits
    api = history.api
    infos = api.get_paths_info(REPO, ["dir/b.txt", "a.txt", "same.txt", "dir", "dir/deep"], expand=True)
    assert {i.path: i.last_commit.oid for i in infos} == {
        "dir/b.txt": second, "a.txt": third, "same.txt": first, "dir": second, "dir/deep": first}
    dates = {c.commit_id: c.created_at for c in api.list_repo_commits(REPO)}
    titles = {i.path: i.last_commit.title for i in infos}
    assert titles["dir/b.txt"] == "second: b & more" and titles["a.txt"] == "third"
    assert all(i.last_commit.date == dates[i.last_commit.oid] for i in infos)
    assert all(i.last_commit is None for i in api.get_paths_info(REPO, ["dir/b.txt", "dir"]))

    tree = {e.path: e.last_commit.oid for e in api.list_repo_tree(REPO, recursive=True, expand=True)}
    assert tree == {"a.txt": third, "same.txt": first, "dir": second, "dir/b.txt": second,
                    "dir/deep": first, "dir/deep/c.txt": first, ".gitattributes": history.initial}
    assert all(e.last_commit is None for e in api.list_repo_tree(REPO, recursive=True))
    # an older revision's answer is its own history's
    old = api.get_paths_info(REPO, ["dir/b.txt", "a.txt"], expand=True, revision=second)
    assert {i.path: i.last_commit.oid for i in old} == {"dir/b.txt": second, "a.txt": first}
    # a file deleted is a change of its folder
    gone = api.delete_file("dir/deep/c.txt", REPO, commit_message="fourth").oid
    assert api.get_paths_info(REPO, ["dir"], expand=True)[0].last_commit.oid == gone


def test_hf_file_system_modified_and_ls_expand_info_read_the_last_commit(history):
    """``HfFileSystem.modified`` is the date of the commit that last changed the file (it raised
    NotImplementedError without ``lastCommit``); ``ls(detail=True, expand_info=True)`` carries it."""
    from huggingface_hub import HfFileSystem

    _, second, third = history.commits
    fs = HfFileSystem(endpoint=history.url, token="reader")
    dates = {c.commit_id: c.created_at for c in history.api.list_repo_commits(REPO)}
    assert fs.modified(f"{REPO}/dir/b.txt") == dates[second]
    assert fs.modified(f"{REPO}/a.txt") == dates[third]
    listed = {e["name"]: e["last_commit"] for e in fs.ls(REPO, detail=True, expand_info=True, refresh=True)}
    assert listed[f"{REPO}/dir"].oid == second and listed[f"{REPO}/a.txt"].oid == third
    assert listed[f"{REPO}/a.txt"].date == dates[third]


def test_a_tree_with_expand_is_paged_by_fifty_as_the_hub_pages_it(registry, unique_repo, monkeypatch):
    """The Hub answers 50 entries a page with ``expand`` (1,000 without): huggingface_hub follows
    the pages, so all of them come back, each with its commit."""
    import httpx

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)
    with serving([f"{registry.host}/{unique_repo}"], tokens=TOKENS, publish=Publishing()) as s:
        api = HfApi(endpoint=s.url, token="writer")
        api.create_repo(REPO)
        done = api.create_commit(REPO, operations=[
            huggingface_hub.CommitOperationAdd(f"f{i:03d}.txt", b"%d" % i) for i in range(120)], commit_message="many")
        reader = {"Authorization": "Bearer reader"}
        asked = httpx.get(f"{s.url}/api/models/{REPO}/tree/main?expand=true", headers=reader)
        assert len(asked.json()) == 50 and 'rel="next"' in asked.headers["link"]
        plain = httpx.get(f"{s.url}/api/models/{REPO}/tree/main", headers=reader)
        assert len(plain.json()) == 121  # and the first commit's .gitattributes
        listed = [e for e in api.list_repo_tree(REPO, expand=True) if e.path != ".gitattributes"]
        assert len(listed) == 120 and {e.last_commit.oid for e in listed} == {done.oid}


def test_a_model_pushed_outside_serve_with_a_tar_layer_names_its_one_commit(tmp_path, registry, unique_repo):
    """A manifest pushed by ``ocibridge push`` names no parent: every path, those inside its tar
    layer too, was last changed by it (its title says where it came from)."""
    from ocibridge.cli import main
    from tests.modelgen import make_bert_model

    prefix = f"{registry.host}/{unique_repo}"
    assert main(["push", str(make_bert_model(tmp_path / "tiny")), f"{prefix}/acme/tiny:latest", "-q",
                 "--group", "doc"]) == 0
    with serving([prefix]) as s:
        api = HfApi(endpoint=s.url, token=False)
        sha = api.model_info("acme/tiny").sha
        listed = list(api.list_repo_tree("acme/tiny", recursive=True, expand=True))
        assert "extra/notes.md" in {e.path for e in listed}  # a file of the tar layer
        assert {(e.last_commit.oid, e.last_commit.title) for e in listed} == {(sha, "pushed outside serve")}
