"""Repositories as the Hub has them (issue 74), through the real huggingface_hub client against
serve as a process over a registry of this module's own (the GC test stops it): a bare name lands
in the token's namespace, a new repository has the Hub's first commit, deletes, moves and
squashes with the Hub's errors, private repositories and anonymous reads, auth-check, and the
request id every error names. What huggingface_hub's own test suite taught (bench/hub_suite.py
runs it against serve) is here as this project's tests."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import huggingface_hub
import pytest
from huggingface_hub import HfApi
from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError
from serving import own_registry_and_serve, point_hub_at, serve_over

from ocibridge.hubserver.access import parse_line, parse_lines
from ocibridge.hubserver.repo.initial import GITATTRIBUTES
from ocibridge.hubserver.repo.tombstone import DIGEST as TOMBSTONE
from tests.support.registry import RegistryProcess, garbage_collect

TOKENS = ("alice-token user=alice write=alice/,acme/\n"
          "bob-token user=bob\n"
          "carol-token user=carol private=alice/gated\n"
          "old-token write acme/ olduser\n"
          "dave-token user=dave read=* write=acme/\n"
          "anonymous read=*\n")

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@dataclass
class Served:
    url: str
    registry: RegistryProcess
    root: Path

    def api(self, token: str | bool | None) -> HfApi:
        return HfApi(endpoint=self.url, token=token)

    def tag(self, repo: str, tag: str) -> str | None:
        """The digest the registry's tag names (None: no such tag), asked of the registry itself."""
        answer = httpx.head(f"{self.registry.url}/v2/{repo}/manifests/{tag}",
                            headers={"Accept": "application/vnd.oci.image.manifest.v1+json"})
        return answer.headers.get("docker-content-digest") if answer.status_code == 200 else None


def whole_registry(host: str) -> list[str]:
    """serve's source: the registry itself (bare repo ids are top-level repositories)."""
    return [host, "--plain-http"]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("hubrepos")
    with own_registry_and_serve(root, TOKENS, whole_registry) as (url, registry):
        yield Served(url, registry, root)


@pytest.fixture(autouse=True)
def lfs_only(monkeypatch: pytest.MonkeyPatch, served: Served, tmp_path: Path) -> None:
    point_hub_at(monkeypatch, served.url, tmp_path / "hub")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)


def test_token_lines_say_a_namespace_and_separate_read_write_and_private_scopes():
    alice = parse_line("t user=alice write=alice/,acme/")
    assert (alice.namespace, alice.may_write("acme/x"), alice.may_write("bob/x")) == ("alice", True, False)
    assert alice.may_read("bob/x") and not alice.may_read_private("bob/x")
    assert alice.may_read_private("alice/x") and alice.may_read_private("acme/y")
    reader = parse_line("t user=r read=acme/ private=acme/")
    assert reader.may_read("acme/x") and not reader.may_read("beta/x") and not reader.write
    old = parse_line("t write acme/ ci")  # the first form: one scope, read privately too
    assert (old.namespace, old.may_write("acme/x"), old.may_read("other/x"), old.may_read_private("acme/x")) == \
        ("ci", True, False, True)
    anonymous = parse_lines(["anonymous read=public/"])[0]
    assert anonymous.anonymous and anonymous.may_read("public/x") and not anonymous.write
    for bad, said in [("anonymous write=x/", "read= only"), ("t user=a color=red", "color=red"),
                      ("t read=* read=a/", "twice"), ("anonymous", "read=PREFIXES")]:
        with pytest.raises(Exception, match=said):
            parse_line(bad)
    with pytest.raises(Exception, match="anonymous line"):
        parse_lines(["anonymous read=a/", "anonymous read=b/"])


def test_a_bare_name_lands_in_the_tokens_namespace_with_the_hubs_first_commit(served):
    api = served.api("alice-token")
    made = api.create_repo("tiny")
    assert made.repo_id == "alice/tiny"
    assert made == f"{served.url}/alice/tiny"
    assert api.list_repo_files("alice/tiny") == [".gitattributes"]
    commits = api.list_repo_commits("alice/tiny")
    assert [c.title for c in commits] == ["initial commit"]
    assert api.model_info("alice/tiny").sha == commits[0].commit_id
    got = api.hf_hub_download("alice/tiny", ".gitattributes")
    assert Path(got).read_bytes() == GITATTRIBUTES and b"*.safetensors filter=lfs" in GITATTRIBUTES
    api.create_branch("alice/tiny", branch="dev")  # main exists from the start
    api.create_tag("alice/tiny", tag="v0")
    assert served.tag("alice/tiny", "latest") is not None  # in the registry at once
    with pytest.raises(HfHubHTTPError) as again:
        api.create_repo("tiny")
    assert again.value.response.status_code == 409
    assert api.create_repo("tiny", exist_ok=True).repo_id == "alice/tiny"
    # the first form's namespace is its NAME; outside its write prefix, the Hub's 403
    with pytest.raises(HfHubHTTPError) as outside:
        served.api("old-token").create_repo("mine")
    assert outside.value.response.status_code == 403


def test_a_refused_write_names_the_tokens_write_prefixes_and_what_a_bare_name_became(served):
    with pytest.raises(HfHubHTTPError) as bare:
        served.api("dave-token").create_repo("mine")
    said = bare.value.response.headers.get("X-Error-Message", "") or bare.value.response.text
    assert bare.value.response.status_code == 403
    assert "under acme/" in said and "'mine' became dave/mine" in said and "''" not in said, said
    with pytest.raises(HfHubHTTPError) as named:
        served.api("dave-token").create_repo("other/thing")
    said = named.value.response.headers.get("X-Error-Message", "") or named.value.response.text
    assert "rights to write to other/thing" in said and "under acme/" in said and "became" not in said, said


def test_transformers_push_to_hub_with_a_bare_name_publishes_under_the_users_namespace(served):
    from transformers import BertConfig

    os.environ["HF_TOKEN"] = "alice-token"
    try:
        BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2).push_to_hub("bert-bare")
    finally:
        del os.environ["HF_TOKEN"]
    api = served.api("alice-token")
    assert {".gitattributes", "config.json"} <= set(api.list_repo_files("alice/bert-bare"))  # and its card
    assert served.tag("alice/bert-bare", "latest") is not None


def test_deletes_have_the_hubs_semantics_and_errors(served):
    api = served.api("alice-token")
    repo = api.create_repo("deletes").repo_id
    api.upload_file(repo_id=repo, path_in_repo="a.txt", path_or_fileobj=b"a")
    api.create_branch(repo, branch="dev")
    api.create_tag(repo, tag="v1")
    dev_commit = api.model_info(repo, revision="dev").sha
    api.delete_branch(repo, branch="dev")
    api.delete_tag(repo, tag="v1")
    refs = api.list_repo_refs(repo)
    assert [b.name for b in refs.branches] == ["main"] and refs.tags == []
    for gone in ("dev", "v1"):
        with pytest.raises(RevisionNotFoundError):
            api.model_info(repo, revision=gone)
        assert served.tag(repo, gone) == TOMBSTONE  # the registry's tag names serve's tombstone
    assert api.model_info(repo, revision=dev_commit).sha == dev_commit  # its commit tag keeps it
    with pytest.raises(HfHubHTTPError, match="Cannot delete refs/heads/main"):
        api.delete_branch(repo, branch="main")
    with pytest.raises(HfHubHTTPError, match="Invalid rev id"):
        api.delete_branch(repo, branch="nope")
    api.create_tag(repo, tag="cool-tag")
    with pytest.raises(HfHubHTTPError, match="Invalid rev id"):
        api.delete_branch(repo, branch="cool-tag")  # a tag is no branch
    with pytest.raises(RevisionNotFoundError):
        api.delete_tag(repo, tag="v0")
    with pytest.raises(HfHubHTTPError):
        api.delete_tag(repo, tag="main")
    # a branch of a deleted name can be made again
    api.create_branch(repo, branch="dev")
    assert api.model_info(repo, revision="dev").sha == api.model_info(repo).sha
    with pytest.raises(HfHubHTTPError, match="Reference refs/heads/dev already exists"):
        api.create_branch(repo, branch="dev")


def test_a_deleted_repository_answers_404_by_every_name_and_can_be_made_again(served):
    api = served.api("alice-token")
    repo = api.create_repo("gone").repo_id
    first = api.upload_file(repo_id=repo, path_in_repo="a.txt", path_or_fileobj=b"a").oid
    api.delete_repo(repo)
    for revision in (None, first, "latest"):
        with pytest.raises(RepositoryNotFoundError):
            api.model_info(repo, revision=revision)
    assert served.tag(repo, f"ocibridge-commit-{first}") == TOMBSTONE
    assert "alice/gone" not in [m.id for m in api.list_models(search="gone")]
    with pytest.raises(RepositoryNotFoundError) as missing:
        api.delete_repo(repo)
    assert "(Request ID: " in str(missing.value)  # X-Request-Id, printed by the client
    api.delete_repo(repo, missing_ok=True)
    again = api.create_repo("gone").repo_id
    assert api.list_repo_files(again) == [".gitattributes"]
    assert len(api.list_repo_commits(again)) == 1


def test_private_repositories_and_anonymous_reads(served):
    alice, bob, anonymous = served.api("alice-token"), served.api("bob-token"), served.api(False)
    public = alice.create_repo("open").repo_id
    secret = alice.create_repo("secret", private=True).repo_id
    assert alice.model_info(secret, expand=["private"]).private is True
    assert alice.model_info(public, expand=["private"]).private is False
    for other in (bob, anonymous):
        with pytest.raises(RepositoryNotFoundError):
            other.model_info(secret)
        with pytest.raises(RepositoryNotFoundError):
            other.hf_hub_download(secret, ".gitattributes")
        assert other.model_info(public).sha == alice.model_info(public).sha
        assert secret not in [m.id for m in other.list_models(search="secret")]
    assert secret in [m.id for m in alice.list_models(search="secret")]
    # without a cookie, the anonymous line's public pages; a private one asks for the login
    assert httpx.get(f"{served.url}/{public}").status_code == 200
    assert public in httpx.get(f"{served.url}/models?search=open").text
    assert secret not in httpx.get(f"{served.url}/models?search=secret").text
    assert httpx.get(f"{served.url}/{secret}").status_code in (302, 303)
    for token, seen in (("bob-token", 404), ("alice-token", 200)):  # the pages and their catalog too
        login = httpx.post(f"{served.url}/ocibridge/login", data={"token": token, "next": "/"})
        jar = {"ocibridge_session": login.cookies["ocibridge_session"]}
        assert httpx.get(f"{served.url}/{secret}", cookies=jar).status_code == seen
        assert (secret in httpx.get(f"{served.url}/models?search=secret", cookies=jar).text) == (seen == 200)
    status = httpx.get(f"{served.url}/api/models/{secret}/xet-read-token/main").status_code
    assert status == 401  # as a missing one is to a request without a token: the Hub's 401 (RepoNotFound)
    alice.update_repo_settings(secret, private=False)
    assert bob.model_info(secret).sha == alice.model_info(secret).sha
    alice.update_repo_settings(secret, visibility="private")
    with pytest.raises(RepositoryNotFoundError):
        bob.model_info(secret)
    with pytest.raises(HfHubHTTPError) as writes:
        anonymous.upload_file(repo_id=public, path_in_repo="x.txt", path_or_fileobj=b"x")
    assert writes.value.response.status_code == 401


def test_gated_repositories_give_their_files_to_the_authorized_list_only(served, tmp_path):
    """As on the Hub (huggingface_hub's own tests: test_update_repo_settings sets and reads every
    pair, test_auth_check_gated_repo and test_download_from_a_gated_repo refuse a user who asked
    for nothing under an "auto" gate): a gated repository is described and listed to whoever
    reads it; its files go to the authorized list, which serve, without access requests, takes
    from the token file (write or private prefixes); anonymous readers get none. Refusals are
    GatedRepoError, over resolve, auth-check, Xet's read token and the pages."""
    alice, bob, carol, anonymous = (served.api(t) for t in ("alice-token", "bob-token", "carol-token", False))
    repo = alice.create_repo("gated").repo_id
    alice.upload_file(repo_id=repo, path_in_repo="config.json", path_or_fileobj=b'{"a": 1}')
    for gated in ("auto", "manual", False):
        for private in (True, False):
            alice.update_repo_settings(repo, gated=gated, private=private)
            info = alice.model_info(repo)
            assert (info.gated, info.private) == (gated, private)

    def fetch(api: HfApi, who: str) -> bytes:
        return Path(api.hf_hub_download(repo, "config.json", cache_dir=tmp_path / who)).read_bytes()

    def page(token: str | None, path: str) -> httpx.Response:
        jar = {}
        if token is not None:
            login = httpx.post(f"{served.url}/ocibridge/login", data={"token": token, "next": "/"})
            jar = {"ocibridge_session": login.cookies["ocibridge_session"]}
        return httpx.get(f"{served.url}/{repo}/{path}", cookies=jar)

    def xet_read(token: str | None) -> httpx.Response:
        headers = {} if token is None else {"authorization": f"Bearer {token}"}
        return httpx.get(f"{served.url}/api/models/{repo}/xet-read-token/main", headers=headers)

    commit = alice.model_info(repo).sha
    for gate in ("auto", "manual"):
        alice.update_repo_settings(repo, gated=gate)
        assert anonymous.model_info(repo).gated == gate  # described to every reader
        assert anonymous.list_repo_files(repo) == [".gitattributes", "config.json"]
        assert repo in [m.id for m in bob.list_models(search="gated", gated=True)]
        assert repo not in [m.id for m in bob.list_models(search="gated", gated=False)]
        with pytest.raises(GatedRepoError) as unlisted:
            fetch(bob, f"bob-{gate}")
        assert unlisted.value.response.status_code == 403 and "not in the authorized list" in str(unlisted.value)
        with pytest.raises(GatedRepoError):
            bob.auth_check(repo)
        with pytest.raises(GatedRepoError) as unknown:
            fetch(anonymous, f"anonymous-{gate}")
        assert unknown.value.response.status_code == 401 and "Please log in" in str(unknown.value)
        assert fetch(carol, f"carol-{gate}") == fetch(alice, f"alice-{gate}") == b'{"a": 1}'  # the list
        assert xet_read(None).headers["x-error-code"] == "GatedRepo"
        assert [xet_read(t).status_code for t in ("bob-token", "carol-token")] == [403, 200]
        assert page(None, "blob/main/config.json").status_code in (302, 303)  # to the login form
        for path in ("blob/main/config.json", f"commit/{commit}", f"compare/{commit}...main"):
            assert page("bob-token", path).status_code == 403, path
            assert page("carol-token", path).status_code == 200, path
        assert page(None, "").status_code == 200  # the model's page, with its card, as the Hub shows it
    alice.update_repo_settings(repo, gated=False)
    assert fetch(anonymous, "anonymous-after") == b'{"a": 1}' and bob.model_info(repo).gated is False
    bogus = httpx.put(f"{served.url}/api/models/{repo}/settings", json={"gated": "sometimes"},
                      headers={"authorization": "Bearer alice-token"})
    assert bogus.status_code == 400 and "'auto', 'manual' or false" in bogus.text
    assert alice.model_info(repo).gated is False


def test_auth_check_says_whether_a_token_reads_and_writes(served):
    alice, bob = served.api("alice-token"), served.api("bob-token")
    repo = alice.create_repo("checked").repo_id
    alice.auth_check(repo)
    alice.auth_check(repo, write=True)
    bob.auth_check(repo)
    with pytest.raises(HfHubHTTPError) as denied:
        bob.auth_check(repo, write=True)
    assert denied.value.response.status_code == 403
    with pytest.raises(RepositoryNotFoundError):
        alice.auth_check("alice/none")


def test_move_and_super_squash(served):
    api = served.api("alice-token")
    repo = api.create_repo("squash").repo_id
    api.upload_file(repo_id=repo, path_in_repo="file.txt", path_or_fileobj=b"content")
    api.upload_file(repo_id=repo, path_in_repo="file.txt", path_or_fileobj=b"another")
    api.create_branch(repo, branch="v0.1")
    api.upload_file(repo_id=repo, path_in_repo="file.txt", path_or_fileobj=b"foo", revision="v0.1")
    api.super_squash_history(repo_id=repo)
    main = api.list_repo_commits(repo)
    assert [c.title for c in main] == ["Super-squash branch 'main' using huggingface_hub"]
    branch = api.list_repo_commits(repo, revision="v0.1")
    assert len(branch) == 4 and branch[-1].title == "initial commit"  # the branch keeps its history
    assert Path(api.hf_hub_download(repo, "file.txt")).read_bytes() == b"another"
    head = api.model_info(repo).sha
    api.move_repo(from_id=repo, to_id="acme/squashed")
    assert api.model_info("acme/squashed").sha == head  # the same commits, the same ids
    # the catalog page lists the new id, not the old one (nor counts it), as list_models does
    login = httpx.post(f"{served.url}/ocibridge/login", data={"token": "alice-token", "next": "/"})
    listed = httpx.get(f"{served.url}/models?search=squash", cookies=login.cookies).text
    assert 'href="/acme/squashed"' in listed and f'href="/{repo}"' not in listed, listed
    assert '<p class="count">1 model matching' in listed  # counted once
    assert [m.id for m in api.list_models(search="squash")] == ["acme/squashed"]
    assert api.model_info("acme/squashed", revision="v0.1").sha == branch[0].commit_id
    # the old id redirects its reads to the new one (307), as the Hub's do after a rename
    assert Path(api.hf_hub_download(repo, "file.txt")).read_bytes() == b"another"
    moved = httpx.head(f"{served.url}/{repo}/resolve/main/file.txt", headers={"Authorization": "Bearer alice-token"})
    assert moved.status_code == 307 and moved.headers["location"] == "/acme/squashed/resolve/main/file.txt"
    assert api.model_info(repo).id == "acme/squashed"
    assert api.create_repo(repo.split("/")[1]).repo_id == repo  # the old name is free again
    api.delete_repo(repo)
    api.create_repo("acme/taken")
    with pytest.raises(HfHubHTTPError) as taken:
        api.move_repo(from_id="acme/squashed", to_id="acme/taken")
    assert taken.value.response.status_code == 409


def test_commits_go_to_branches_only_and_reserved_names_are_refused(served):
    api = served.api("alice-token")
    repo = api.create_repo("refsonly").repo_id
    api.create_tag(repo, tag="v1")
    pinned = api.model_info(repo, revision="v1").sha
    for revision, said in [("v1", "is a tag"), ("ocibridge-refs", "bookkeeping"),
                           (f"ocibridge-commit-{pinned}", "bookkeeping")]:
        with pytest.raises(HfHubHTTPError, match=said):
            api.upload_file(repo_id=repo, path_in_repo="x.txt", path_or_fileobj=b"x", revision=revision)
    assert api.model_info(repo, revision="v1").sha == pinned
    with pytest.raises(RevisionNotFoundError):
        api.upload_file(repo_id=repo, path_in_repo="x.txt", path_or_fileobj=b"x", revision="no-branch")


def test_lfs_files_are_listed_and_deleted_for_good(served):
    """list_lfs_files lists every file in git-lfs of every branch's history, once; a permanent
    delete rewrites each branch that held one, and tags no commit that still names its blob."""
    api = served.api("alice-token")
    repo = api.create_repo("lfsfiles").repo_id
    api.upload_file(path_or_fileobj=b"LFS content", path_in_repo="lfs_file.bin", repo_id=repo)
    api.upload_file(path_or_fileobj=b"TXT content", path_in_repo="txt_file.txt", repo_id=repo)
    api.upload_file(path_or_fileobj=b"LFS content 2", path_in_repo="lfs_file_2.bin", repo_id=repo)
    api.create_branch(repo, branch="my-branch")
    api.upload_file(path_or_fileobj=b"LFS branch", path_in_repo="lfs_branch.bin", repo_id=repo, revision="my-branch")
    api.create_tag(repo, tag="v1")
    old_head = api.model_info(repo).sha
    listed = list(api.list_lfs_files(repo))
    assert sorted((f.filename, f.ref) for f in listed) == [
        ("lfs_branch.bin", "refs/heads/my-branch"), ("lfs_file.bin", "refs/heads/main"),
        ("lfs_file_2.bin", "refs/heads/main")]
    contents = [b"LFS branch", b"LFS content", b"LFS content 2"]
    by_name = sorted(listed, key=lambda f: f.filename)
    assert [f.file_oid for f in by_name] == [hashlib.sha256(c).hexdigest() for c in contents]
    on_main = [f for f in listed if f.ref == "refs/heads/main"]
    api.permanently_delete_lfs_files(repo, on_main)
    assert [f.filename for f in api.list_lfs_files(repo)] == ["lfs_branch.bin"]
    assert api.list_repo_files(repo) == [".gitattributes", "txt_file.txt"]
    assert api.list_repo_files(repo, revision="my-branch") == [".gitattributes", "lfs_branch.bin", "txt_file.txt"]
    assert len(api.list_repo_commits(repo)) == 4  # the same history, rewritten
    assert api.model_info(repo, revision="v1").sha == api.model_info(repo).sha != old_head  # the tag moved too
    with pytest.raises(huggingface_hub.errors.EntryNotFoundError):
        api.hf_hub_download(repo, "lfs_file.bin")
    assert served.tag(repo, f"ocibridge-commit-{old_head}") == TOMBSTONE  # nothing tags the old commits


def test_commit_rules_as_the_hub_answers_them(served):
    api = served.api("alice-token")
    repo = api.create_repo("rules").repo_id
    parent = api.model_info(repo).sha
    api.upload_file(path_or_fileobj=b"x", path_in_repo="dir/a.txt", repo_id=repo)
    api.upload_file(path_or_fileobj=b"y", path_in_repo="dir/b.txt", repo_id=repo)
    with pytest.raises(HfHubHTTPError, match="The branch was updated since you opened this page") as stale:
        api.create_commit(repo, operations=[huggingface_hub.CommitOperationAdd("z", b"z")], commit_message="late",
                          parent_commit=parent)
    assert stale.value.response.status_code == 412
    # a deletedFile that names a folder deletes the folder, as the Hub does
    api.create_commit(repo, operations=[huggingface_hub.CommitOperationDelete("dir", is_folder=False)],
                      commit_message="folder as a file")
    assert api.list_repo_files(repo) == [".gitattributes"]
    with pytest.raises(HfHubHTTPError) as relative:
        api.upload_file(path_or_fileobj=b"x", path_in_repo="..\\ddd", repo_id=repo)
    assert relative.value.response.status_code == 422
    # a backslash elsewhere is a character of the name, as on the Hub (test_serve_backslash_names.py)
    api.upload_file(path_or_fileobj=b"x", path_in_repo="folder/..\\..\\file", repo_id=repo)
    assert api.list_repo_files(repo) == [".gitattributes", "folder/..\\..\\file"]
    with pytest.raises(RevisionNotFoundError):  # the revision is checked before the tag's name
        api.create_tag(repo, tag="invalid tag", revision="foobar")
    # a card whose metadata opens after a blank line is read, and checked, as the Hub reads it
    with pytest.raises(ValueError, match="Invalid metadata in README.md"):
        api.upload_file(path_or_fileobj=b"\n---\nmodel-index: foo\n---\n\ntext\n", path_in_repo="README.md",
                        repo_id=repo)


def test_hf_repos_ls_lists_the_namespaces_repositories_with_their_storage(served, tmp_path):
    """``hf repos ls`` (huggingface_hub 2.4's ``list_user_repos``: /api/settings/repositories)."""
    api = served.api("alice-token")
    api.create_repo("alice/listed-a", exist_ok=True)
    api.upload_file(path_or_fileobj=b"x" * 1000, path_in_repo="weights.bin", repo_id="alice/listed-a")
    api.create_repo("alice/listed-secret", private=True, exist_ok=True)
    mine = {r.id: r for r in api.list_user_repos()}
    assert {"alice/listed-a", "alice/listed-secret"} <= set(mine)
    assert all(i.startswith("alice/") for i in mine) and all(r.type == "model" for r in mine.values())
    assert mine["alice/listed-a"].storage >= 1000 and mine["alice/listed-a"].visibility == "public"
    assert mine["alice/listed-secret"].visibility == "private"
    assert 0 < mine["alice/listed-a"].storage_percent <= 100
    # an organization's, as a token reads it: bob reads alice's public repositories only
    seen = {r.id for r in served.api("bob-token").list_user_repos(namespace="alice")}
    assert "alice/listed-a" in seen and "alice/listed-secret" not in seen
    # the hf CLI, as a user types it
    env = {**os.environ, "HF_ENDPOINT": served.url, "HF_TOKEN": "alice-token", "HF_HUB_DISABLE_TELEMETRY": "1",
           "HF_HOME": str(tmp_path / "hf")}
    hf = Path(sys.executable).with_name("hf")
    listed = subprocess.run([str(hf), "repos", "ls", "--format", "quiet"], env=env, capture_output=True,
                            text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert {"alice/listed-a", "alice/listed-secret"} <= set(listed.stdout.split()), listed.stdout
    with pytest.raises(HfHubHTTPError) as anonymous:
        list(served.api(False).list_user_repos())
    assert anonymous.value.response.status_code == 401


def test_raw_answers_a_git_lfs_files_pointer_and_a_regular_files_bytes(served):
    """``GET /{repo}/raw/{rev}/{path}``, what huggingface.js' ``downloadFile({raw: true})`` asks."""
    api = served.api("alice-token")
    repo = api.create_repo("raw-files", exist_ok=True).repo_id
    weights = os.urandom(3000)
    api.upload_file(path_or_fileobj=b"plain text\n", path_in_repo="notes.txt", repo_id=repo)
    api.upload_file(path_or_fileobj=weights, path_in_repo="model.safetensors", repo_id=repo)
    alice = {"Authorization": "Bearer alice-token"}
    regular = httpx.get(f"{served.url}/{repo}/raw/main/notes.txt", headers=alice)
    assert regular.status_code == 200 and regular.content == b"plain text\n"
    pointer = httpx.get(f"{served.url}/{repo}/raw/main/model.safetensors", headers=alice)
    assert pointer.status_code == 200, pointer.text
    assert pointer.text == ("version https://git-lfs.github.com/spec/v1\n"
                            f"oid sha256:{hashlib.sha256(weights).hexdigest()}\nsize 3000\n")
    assert pointer.headers["x-repo-commit"] == api.model_info(repo).sha
    assert httpx.get(f"{served.url}/{repo}/raw/main/none.txt", headers=alice).status_code == 404
    # a gated repository's raw files go to its authorized list only, as its resolved ones
    api.update_repo_settings(repo, gated="manual")
    refused = httpx.get(f"{served.url}/{repo}/raw/main/notes.txt", headers={"Authorization": "Bearer bob-token"})
    assert refused.status_code == 403 and refused.headers.get("x-error-code") == "GatedRepo"


def test_a_deleted_repository_goes_at_the_registrys_gc(served, tmp_path):
    """delete_repo leaves no tag on its manifests: distribution's garbage-collect takes them and
    their blobs, while a live repository's files stay, and its gate too: a new serve over the
    collected registry refuses them to the same token (this module's last test: it stops the registry)."""
    api = served.api("alice-token")
    kept = api.create_repo("kept").repo_id
    keep = os.urandom(4096)
    api.upload_file(repo_id=kept, path_in_repo="keep.bin", path_or_fileobj=keep)
    api.update_repo_settings(kept, gated="manual")
    api.update_repo_settings(kept, private=False)  # a second record written: the first one left untagged
    doomed = api.create_repo("doomed").repo_id
    payload = os.urandom(4096)
    api.upload_file(repo_id=doomed, path_in_repo="doomed.bin", path_or_fileobj=payload)
    api.delete_repo(doomed)
    digest = hashlib.sha256(payload).hexdigest()
    blob = served.registry.storage / "docker/registry/v2/blobs/sha256" / digest[:2] / digest
    assert blob.exists()
    garbage_collect(served.registry)
    assert not blob.exists()
    registry = RegistryProcess(served.registry.workdir)  # the same storage, a new port
    try:
        with serve_over(registry, tmp_path, TOKENS, whole_registry) as url:
            again = HfApi(endpoint=url, token="alice-token")
            assert Path(again.hf_hub_download(kept, "keep.bin")).read_bytes() == keep
            assert again.model_info(kept).gated == "manual"
            with pytest.raises(GatedRepoError):
                HfApi(endpoint=url, token="bob-token").hf_hub_download(kept, "keep.bin", cache_dir=tmp_path / "bob")
            with pytest.raises(RepositoryNotFoundError):
                again.model_info(doomed)
    finally:
        registry.stop()
