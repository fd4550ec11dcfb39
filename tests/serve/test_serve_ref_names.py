"""A branch and a Hub tag of one name (issue 75): the Hub keeps ``refs/heads/x`` and
``refs/tags/x`` apart, a registry has one tag ``x``. What huggingface_hub's
``test_create_branch_existing_tag_does_not_fail`` taught, through HfApi against serve over a real
registry: both made and listed with their commits, a commit to the branch leaves the tag, a
delete of one leaves the other (which then has the registry tag of its name), each resolved by
``refs/heads/x`` and ``refs/tags/x``, a bare ``x`` the branch, and ``pull REG/repo:x`` the ref
that had the name first (docs/serve.md, "A branch and a tag of one name")."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from huggingface_hub import HfApi
from huggingface_hub.errors import HfHubHTTPError, RevisionNotFoundError
from serving import Served, files_of, point_hub_at, serving

from ocibridge.cli import main
from ocibridge.hubserver.repo.publishing import Publishing
from ocibridge.hubserver.repo.tombstone import DIGEST as TOMBSTONE

TOKENS = ("reader", "writer write * ci-bot")
REPO = "acme/clash"


@pytest.fixture
def served(registry, unique_repo, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[tuple[Served, str]]:
    prefix = f"{registry.host}/{unique_repo}"
    with serving([prefix], tokens=TOKENS, publish=Publishing()) as served:
        point_hub_at(monkeypatch, served.url, tmp_path / "hub")
        yield served, prefix


def registry_tag(prefix: str, tag: str) -> str | None:
    """The digest the registry's tag names (None: no such tag), asked of the registry itself."""
    host, _, path = prefix.partition("/")
    answer = httpx.head(f"http://{host}/v2/{path}/{REPO}/manifests/{tag}",
                        headers={"Accept": "application/vnd.oci.image.manifest.v1+json"})
    return answer.headers.get("docker-content-digest") if answer.status_code == 200 else None


def commit_digest(prefix: str, commit: str) -> str:
    """The digest of a commit, as its commit tag in the registry names it."""
    digest = registry_tag(prefix, f"ocibridge-commit-{commit}")
    assert digest is not None and digest != TOMBSTONE
    return digest


def heads_and_tags(api: HfApi) -> tuple[dict[str, str], dict[str, str]]:
    refs = api.list_repo_refs(REPO)
    return {b.name: b.target_commit for b in refs.branches}, {t.name: t.target_commit for t in refs.tags}


def read(api: HfApi, revision: str) -> bytes:
    return Path(api.hf_hub_download(REPO, "which.txt", revision=revision)).read_bytes()


def test_a_branch_and_a_tag_of_one_name_live_side_by_side(served, tmp_path, capsys):
    served, prefix = served
    api = HfApi(endpoint=served.url, token="writer")
    api.create_repo(REPO)
    tagged = api.upload_file(repo_id=REPO, path_in_repo="which.txt", path_or_fileobj=b"the tag\n").oid
    api.create_tag(REPO, tag="x")  # first: the registry tag x
    api.create_branch(REPO, branch="x")  # the Hub's test_create_branch_existing_tag_does_not_fail
    with pytest.raises(HfHubHTTPError, match="Reference refs/heads/x already exists"):
        api.create_branch(REPO, branch="x")
    with pytest.raises(HfHubHTTPError, match="Reference refs/tags/x already exists"):
        api.create_tag(REPO, tag="x")
    on_branch = api.upload_file(repo_id=REPO, path_in_repo="which.txt", path_or_fileobj=b"the branch\n",
                                revision="x").oid
    heads, tags = heads_and_tags(api)
    assert heads == {"main": tagged, "x": on_branch} and tags == {"x": tagged}  # the commit left the tag
    assert read(api, "refs/heads/x") == b"the branch\n" and read(api, "refs/tags/x") == b"the tag\n"
    assert read(api, "x") == b"the branch\n"  # a bare name: the branch, as the Hub answers
    assert api.model_info(REPO, revision="refs/tags/x").sha == tagged
    assert [c.commit_id for c in api.list_repo_commits(REPO, revision="refs/heads/x")][0] == on_branch
    # the registry: x is still the tag (what it was when pulled before), the branch beside it
    assert registry_tag(prefix, "x") == commit_digest(prefix, tagged)
    assert registry_tag(prefix, "ocibridge-branch-x") == commit_digest(prefix, on_branch)
    assert main(["pull", f"{prefix}/{REPO}:x", str(tmp_path / "pulled"), "-q"]) == 0
    assert files_of(tmp_path / "pulled")["which.txt"] == b"the tag\n"
    capsys.readouterr()

    # the tag goes: the branch gets the registry tag of its name back, its reserved one is buried
    api.delete_tag(REPO, tag="x")
    heads, tags = heads_and_tags(api)
    assert heads == {"main": tagged, "x": on_branch} and tags == {}
    assert registry_tag(prefix, "x") == commit_digest(prefix, on_branch)
    assert registry_tag(prefix, "ocibridge-branch-x") == TOMBSTONE
    with pytest.raises(RevisionNotFoundError):
        api.model_info(REPO, revision="refs/tags/x")
    assert read(api, "x") == b"the branch\n"
    after = api.upload_file(repo_id=REPO, path_in_repo="which.txt", path_or_fileobj=b"later\n", revision="x").oid
    assert registry_tag(prefix, "x") == commit_digest(prefix, after)  # commits land at x now
    assert main(["pull", f"{prefix}/{REPO}:x", str(tmp_path / "again"), "-q"]) == 0
    assert files_of(tmp_path / "again")["which.txt"] == b"later\n"


def test_a_tag_made_beside_a_branch_and_the_hubs_errors(served):
    served, prefix = served
    api = HfApi(endpoint=served.url, token="writer")
    api.create_repo(REPO)
    first = api.upload_file(repo_id=REPO, path_in_repo="which.txt", path_or_fileobj=b"first\n").oid
    api.create_branch(REPO, branch="y")
    moved = api.upload_file(repo_id=REPO, path_in_repo="which.txt", path_or_fileobj=b"on y\n", revision="y").oid
    api.create_tag(REPO, tag="y", revision=first)  # beside the branch: at ocibridge-tag-y
    assert registry_tag(prefix, "y") == commit_digest(prefix, moved)
    assert registry_tag(prefix, "ocibridge-tag-y") == commit_digest(prefix, first)
    heads, tags = heads_and_tags(api)
    assert heads == {"main": first, "y": moved} and tags == {"y": first}
    later = api.upload_file(repo_id=REPO, path_in_repo="which.txt", path_or_fileobj=b"later\n", revision="y").oid
    assert heads_and_tags(api) == ({"main": first, "y": later}, {"y": first})
    assert read(api, "refs/tags/y") == b"first\n" and read(api, "y") == b"later\n"
    # the branch goes: the tag keeps its commit and gets the registry tag y
    api.delete_branch(REPO, branch="y")
    assert heads_and_tags(api) == ({"main": first}, {"y": first})
    assert registry_tag(prefix, "y") == commit_digest(prefix, first)
    assert registry_tag(prefix, "ocibridge-tag-y") == TOMBSTONE
    assert read(api, "y") == b"first\n"
    # the Hub's errors: a tag is no branch to delete, or to commit to; a missing revision first
    with pytest.raises(HfHubHTTPError, match="Invalid rev id: y is a tag"):
        api.delete_branch(REPO, branch="y")
    with pytest.raises(HfHubHTTPError, match="is a tag"):
        api.upload_file(repo_id=REPO, path_in_repo="z.txt", path_or_fileobj=b"z", revision="y")
    with pytest.raises(RevisionNotFoundError):
        api.create_branch(REPO, branch="invalid name", revision="nowhere")
    with pytest.raises(RevisionNotFoundError):
        api.delete_tag(REPO, tag="latest")  # main's registry tag is no Hub tag
    # both again, then the aside one deleted: the other stays where it is
    api.create_branch(REPO, branch="y")
    assert registry_tag(prefix, "ocibridge-branch-y") is not None
    api.delete_branch(REPO, branch="y")
    assert heads_and_tags(api) == ({"main": first}, {"y": first})
    assert registry_tag(prefix, "y") == commit_digest(prefix, first)


def test_the_pages_links_to_refs_with_a_slash_or_beside_a_branch_lead_to_them(served):
    """A revision in a page's link is one quoted segment: the tag ``v1`` beside the branch ``v1``
    (``refs/tags/v1``) was linked with its ``/`` kept in the links of its tree, which then named
    the revision ``refs`` (404)."""
    import re

    server, _ = served
    api = HfApi(endpoint=server.url, token="writer")
    api.create_repo(REPO)
    api.upload_file(path_or_fileobj=b"one\n", path_in_repo="sub/which.txt", repo_id=REPO)
    api.create_tag(REPO, tag="v1")
    api.create_branch(REPO, branch="v1")
    login = httpx.post(f"{server.url}/ocibridge/login", data={"token": "reader", "next": "/"})
    cookies = {"ocibridge_session": login.cookies["ocibridge_session"]}

    def links(path: str) -> list[str]:
        page = httpx.get(f"{server.url}{path}", cookies=cookies)
        assert page.status_code == 200, (path, page.status_code)
        return re.findall(r'href="(/acme/clash/(?:tree|blob)/[^"]+)"', page.text)

    refs = [link for link in links(f"/{REPO}") if link.count("/") == 4]  # /acme/clash/tree/REV
    assert {"/acme/clash/tree/refs%2Ftags%2Fv1", "/acme/clash/tree/v1"} <= set(refs)
    for ref in refs:
        inside = links(ref)  # the tree of that revision, and every link it has: its folder, its file
        assert any(link.endswith("/sub") for link in inside), (ref, inside)
        assert all("/tree/refs%2Ftags%2Fv1/" in link or "/blob/refs%2Ftags%2Fv1/" in link
                   for link in inside if "refs" in ref), inside
        for link in inside:
            assert httpx.get(f"{server.url}{link}", cookies=cookies).status_code == 200, link


def test_a_branch_whose_name_is_no_registry_tag_lives_at_a_reserved_one(served):
    """``feature/x`` is a branch on the Hub (git's rules) and no registry tag: it was a 400. It is
    made, committed to, read, listed, shown on the pages and deleted; its registry tag is
    ``ocibridge-branch-sha256-`` and 40 hex of the name's SHA-256; names git refuses are 400."""
    import hashlib

    server, prefix = served
    api = HfApi(endpoint=server.url, token="writer")
    api.create_repo(REPO)
    api.upload_file(path_or_fileobj=b"main\n", path_in_repo="which.txt", repo_id=REPO)
    api.create_branch(REPO, branch="feature/x")
    api.create_tag(REPO, tag="release/1.0", revision="feature/x")
    oid = api.upload_file(path_or_fileobj=b"feature\n", path_in_repo="which.txt", repo_id=REPO,
                          revision="feature/x").oid
    heads, tags = heads_and_tags(api)
    assert heads["feature/x"] == oid and heads["main"] != oid and "release/1.0" in tags
    assert read(api, "feature/x") == b"feature\n" and read(api, "main") == b"main\n"
    assert read(api, "release/1.0") == b"main\n"  # tagged before the branch's commit
    reserved = "ocibridge-branch-sha256-" + hashlib.sha256(b"feature/x").hexdigest()[:40]
    assert registry_tag(prefix, reserved) == commit_digest(prefix, oid)
    login = httpx.post(f"{server.url}/ocibridge/login", data={"token": "reader", "next": "/"})
    cookies = {"ocibridge_session": login.cookies["ocibridge_session"]}
    tree = httpx.get(f"{server.url}/{REPO}/tree/feature%2Fx", cookies=cookies)
    assert tree.status_code == 200 and f'href="/{REPO}/blob/feature%2Fx/which.txt"' in tree.text
    for bad in ("a..b", "x.lock", "sp ace", "-/.hidden"):
        with pytest.raises(HfHubHTTPError) as refused:
            api.create_branch(REPO, branch=bad)
        assert refused.value.response.status_code == 400, bad
    api.delete_branch(REPO, branch="feature/x")
    heads, tags = heads_and_tags(api)
    assert "feature/x" not in heads and "release/1.0" in tags
    with pytest.raises(RevisionNotFoundError):
        read(api, "feature/x")
