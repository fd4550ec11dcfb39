"""Issue 76: short commit ids and the commit page. A unique prefix of 7 or more hex digits of a
commit id names that commit, as git resolves one (the CLI's ``REG/org/name@<short>``, serve's
revisions), a tag of the same name first in serve; an ambiguous prefix is refused naming its
candidates. ``/{repo}/commit/{id}`` shows one commit: its message, author, date, parent and the
files it changed.

One registry (the session's), serve and the CLI as processes, the real huggingface_hub as the
client; the ambiguity decision is tested at the function level (two commit ids sharing a 7-hex
prefix cannot be made on purpose)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi, hf_hub_download
from huggingface_hub.errors import RevisionNotFoundError
from serving import files_of, serve_as_process

from ocibridge.errors import InvalidReference, NotFound
from ocibridge.oci.models import Descriptor
from ocibridge.oci.reference import parse_registry_reference
from ocibridge.stores.registry.commitscan import AmbiguousCommit, find_commit

ROOT = Path(__file__).resolve().parents[2]
TOKENS = "alice-token user=alice write=acme/\nbob-token user=bob\n"
REPO = "acme/m"


# -- the decision, at the function level ---------------------------------------------------------
def digest_of(commit: str) -> str:
    return "sha256:" + commit + "0" * 24


def resolver(table: dict[str, str]):
    """A fake repository's ``resolve``: its plain tags' digests."""
    asked: list[str] = []

    def resolve(tag: str) -> Descriptor:
        asked.append(tag)
        if tag not in table:
            raise NotFound(tag)
        return Descriptor(mediaType="application/vnd.oci.image.manifest.v1+json", digest=table[tag], size=1)

    return resolve, asked


A, B, C = "abc1234" + "1" * 33, "abc1234" + "2" * 33, "def5678" + "3" * 33


def test_a_unique_prefix_names_its_commit_by_its_commit_tag_or_a_plain_tags_digest():
    resolve, _ = resolver({"main": digest_of(A), "v1": digest_of(C)})
    tags = ["main", "v1", f"ocibridge-commit-{A}", f"ocibridge-commit-{C}", "ocibridge-refs"]
    assert find_commit("def5678", tags, resolve) == digest_of(C)  # a plain tag's digest: no request more
    assert find_commit(A[:12], tags, resolve) == digest_of(A)
    assert find_commit(A, tags, resolve) == digest_of(A)  # the whole id is its own prefix
    resolve, _ = resolver({})
    assert find_commit("def5678", [f"ocibridge-commit-{C}"], resolve) == f"ocibridge-commit-{C}"
    assert find_commit("0000000", tags, resolve) is None


def test_an_ambiguous_prefix_is_refused_naming_every_candidate():
    resolve, asked = resolver({"main": digest_of(A)})
    tags = ["main", f"ocibridge-commit-{A}", f"ocibridge-commit-{B}"]
    with pytest.raises(AmbiguousCommit) as two:
        find_commit("abc1234", tags, resolve, "reg.example/acme/m@abc1234")
    said = str(two.value)
    assert said.startswith("reg.example/acme/m@abc1234: the commit id abc1234 is ambiguous: 2 commits") and A in said
    assert B in said and "\n" not in said and two.value.candidates == [A, B]
    assert asked == []  # two commit tags decide it: no plain tag resolved
    assert isinstance(two.value, NotFound)  # what names no one manifest is not found
    # a commit tag and a manifest pushed outside serve (only a plain tag names it)
    resolve, _ = resolver({"v3": digest_of(B)})
    with pytest.raises(AmbiguousCommit):
        find_commit("abc1234", ["v3", f"ocibridge-commit-{A}"], resolve)
    assert find_commit("abc12341", ["v3", f"ocibridge-commit-{A}"], resolve) == f"ocibridge-commit-{A}"
    # two tags naming one commit are one candidate
    resolve, _ = resolver({"main": digest_of(A), "v1": digest_of(A)})
    assert find_commit("abc1234", ["main", "v1", f"ocibridge-commit-{A}"], resolve) == digest_of(A)


def test_the_cli_reads_a_short_commit_id_after_the_at_sign():
    ref = parse_registry_reference("localhost:5000/acme/m@ABC1234")
    assert ref.tag == "ocibridge-commit-abc1234" and ref.digest is None
    assert parse_registry_reference(f"localhost:5000/acme/m@{A}").tag == f"ocibridge-commit-{A}"
    for short in ("abc12", "a" * 41):
        with pytest.raises(InvalidReference, match="a commit id is 7 to 40 hex digits"):
            parse_registry_reference(f"localhost:5000/acme/m@{short}")


def test_a_layout_source_resolves_a_short_commit_id_by_its_tags(tmp_path):
    """A layout has no commit tags: the catalog finds the commit among its names itself."""
    import ocibridge
    from ocibridge.hubserver.repo.catalog import Catalog
    from ocibridge.hubserver.repo.sources import RevisionNotFound, parse_sources

    layout = tmp_path / "layout"
    digests = []
    for tag in ("v1", "v2"):
        (tmp_path / tag).mkdir()
        (tmp_path / tag / "config.json").write_text(f'{{"version": "{tag}"}}')
        digests.append(ocibridge.push(str(tmp_path / tag), f"oci:{layout}:tiny:{tag}").descriptor.digest)
    catalog = Catalog(parse_sources([f"oci:{layout}"]))
    try:
        for digest in digests:
            assert catalog.resolve("tiny", digest[7:14]).top.digest == digest
            assert catalog.resolve("tiny", digest[7:14]).tag is None
        assert catalog.resolve("tiny", "v1").tag == "v1"
        unknown = next(p for p in (c * 7 for c in "0123456789abcdef") if not any(d[7:].startswith(p) for d in digests))
        with pytest.raises(RevisionNotFound):
            catalog.resolve("tiny", unknown)
    finally:
        catalog.close()


# -- through serve and the CLI, against the registry ---------------------------------------------
@dataclass
class Made:
    root: Path
    prefix: str
    url: str
    commits: list[str]  # the first commit (create_repo's), c0, c1
    files: dict[str, dict[str, bytes]]  # what each commit holds
    secret: str  # a commit of a private repository

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "OCIBRIDGE_CACHE": str(self.root / "cli-cache")}
        return subprocess.run([sys.executable, "-m", "ocibridge", *args], env=env, capture_output=True, text=True,
                              timeout=300)

    def unknown(self) -> str:
        """Seven hex digits no commit id of the repository starts with."""
        return next(p for p in (c * 7 for c in "0123456789abcdef") if not any(x.startswith(p) for x in self.commits))

    def login(self, token: str) -> dict[str, str]:
        answer = httpx.post(self.url + "/ocibridge/login", data={"token": token, "next": "/"})
        return {"ocibridge_session": answer.cookies["ocibridge_session"]}


@pytest.fixture(scope="module")
def made(registry, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Made]:
    """acme/m through serve: create_repo's commit, c0 (three files), c1 (one changed, one added,
    one deleted); a Hub tag named like c0's 7-hex prefix on c1; a private acme/secret."""
    root = tmp_path_factory.mktemp("short-ids")
    prefix = f"{registry.host}/short-{uuid.uuid4().hex[:8]}"
    (root / "tokens.txt").write_text(TOKENS)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OCIBRIDGE_CACHE": str(root / "cache"), "HF_HUB_DISABLE_XET": "1"}
    src = root / "src"
    src.mkdir()
    (src / "config.json").write_text('{"model_type": "bert"}')
    (src / "model.safetensors").write_bytes(b"weights v0\n" * 100)
    (src / "notes.txt").write_text("to be deleted\n")
    with serve_as_process([prefix, "--no-access-log", "--token-file", str(root / "tokens.txt")], env,
                          root / "serve.log") as url:
        api = HfApi(endpoint=url, token="alice-token")
        api.create_repo(REPO)
        commits = [api.model_info(REPO).sha]
        c0 = api.upload_folder(repo_id=REPO, folder_path=src, commit_message="c0: the first weights",
                               commit_description="Three files.\nA second line.").oid
        files = {c0: files_of(src)}
        changed = b"weights v1\n" * 300
        c1 = api.create_commit(REPO, [CommitOperationAdd("model.safetensors", changed),
                                      CommitOperationAdd("README.md", b"# m\n"),
                                      CommitOperationDelete("notes.txt")],
                               commit_message="c1: new weights", commit_description="And a card.").oid
        files[c1] = {"config.json": files[c0]["config.json"], "model.safetensors": changed, "README.md": b"# m\n"}
        api.create_tag(REPO, tag=c0[:7], revision=c1)
        secret = api.create_repo("acme/secret", private=True).repo_id
        hidden = api.upload_file(path_or_fileobj=b"x\n", path_in_repo="x.txt", repo_id=secret).oid
        yield Made(root, prefix, url, [*commits, c0, c1], files, hidden)


def test_the_cli_pulls_and_inspects_by_a_short_commit_id(made):
    ref = f"{made.prefix}/{REPO}"
    _, c0, c1 = made.commits
    for n, commit in ((7, c0), (12, c1)):
        out = made.root / f"pulled-{n}"
        pulled = made.cli("pull", f"{ref}@{commit[:n]}", str(out), "-q")
        assert pulled.returncode == 0, pulled.stderr
        got = files_of(out)
        assert got.pop(".gitattributes") and got == made.files[commit]  # create_repo's first file stays
    inspected = made.cli("inspect", f"{ref}@{c1[:9].upper()}", "--json")
    assert inspected.returncode == 0 and json.loads(inspected.stdout)["digest"].startswith(f"sha256:{c1}")
    # a prefix no commit has: one error line; too few digits: a usage mistake
    none = made.cli("inspect", f"{ref}@{made.unknown()}")
    assert none.returncode == 1 and none.stderr.count("\n") == 1, none.stderr
    assert f"no commit of this repository has an id starting with {made.unknown()}" in none.stderr
    few = made.cli("inspect", f"{ref}@{c1[:5]}")
    assert few.returncode == 2 and "a commit id is 7 to 40 hex digits" in few.stderr and few.stderr.count("\n") == 1


def test_serve_resolves_a_short_commit_id_on_every_route_a_tag_of_that_name_first(made, tmp_path):
    api = HfApi(endpoint=made.url, token="bob-token")
    _, c0, c1 = made.commits
    assert api.model_info(REPO, revision=c1[:7]).sha == c1
    assert api.model_info(REPO, revision=c0[:12]).sha == c0
    got = hf_hub_download(REPO, "model.safetensors", revision=c0[:12], cache_dir=tmp_path / "hub",
                          endpoint=made.url, token="bob-token")
    assert Path(got).read_bytes() == made.files[c0]["model.safetensors"]
    assert {f.path for f in api.list_repo_tree(REPO, revision=c1[:10])} == set(made.files[c1]) | {".gitattributes"}
    # the Hub tag named like c0's 7-hex prefix is the tag (on c1); one digit more is c0 again
    assert api.model_info(REPO, revision=c0[:7]).sha == c1
    assert api.model_info(REPO, revision=c0[:8]).sha == c0
    with pytest.raises(RevisionNotFoundError):
        api.model_info(REPO, revision=made.unknown())
    # the writes name refs only: a branch named like a prefix of c0 that does not exist is not c0
    alice = HfApi(endpoint=made.url, token="alice-token")
    with pytest.raises(RevisionNotFoundError):
        alice.upload_file(path_or_fileobj=b"y\n", path_in_repo="y.txt", repo_id=REPO, revision=c0[:9])
    with pytest.raises(RevisionNotFoundError):
        alice.delete_branch(REPO, branch=c0[:9])
    assert alice.model_info(REPO, revision=c0[:9]).sha == c0  # still the commit, no branch made
    jar = made.login("bob-token")
    for page in (f"/{REPO}/tree/{c1[:7]}", f"/{REPO}/blob/{c1[:7]}/README.md", f"/{REPO}/commits/{c1[:7]}",
                 f"/{REPO}/compare/{c0[:12]}...{c1[:7]}"):
        answer = httpx.get(made.url + page, cookies=jar)
        assert answer.status_code == 200, (page, answer.status_code)


def test_the_commit_page_shows_message_author_parent_and_the_files_changed(made):
    _, c0, c1 = made.commits
    jar = made.login("bob-token")
    page = httpx.get(f"{made.url}/{REPO}/commit/{c1}", cookies=jar)
    assert page.status_code == 200, page.text
    html = page.text
    assert '<h2 id="title">c1: new weights</h2>' in html and '<pre id="message">And a card.</pre>' in html
    assert '<li id="author">by alice</li>' in html and f'<code id="commit-id">{c1}</code>' in html
    c0_digest = json.loads(made.cli("inspect", f"{made.prefix}/{REPO}@{c0}", "--json").stdout)["digest"]
    c1_digest = json.loads(made.cli("inspect", f"{made.prefix}/{REPO}@{c1}", "--json").stdout)["digest"]
    assert f'<a class="parent" href="/{REPO}/commit/{c0_digest}">' in html and c0[:12] in html
    assert f'href="/{REPO}/compare/{c0_digest}...{c1_digest}"' in html
    assert f'href="/{REPO}/tree/{c1_digest}"' in html
    rows = re.findall(r'<tr class="file (\w+)".*?<code>([^<]+)</code>', html, re.S)
    assert rows == [("added", "README.md"), ("changed", "model.safetensors"), ("removed", "notes.txt")]
    assert f'href="/{REPO}/blob/{c1_digest}/README.md"' in html
    assert f'href="/{REPO}/blob/{c0_digest}/notes.txt"' in html  # a removed file: at the parent
    assert "3.2 KiB" in html and "1.1 KiB" in html  # model.safetensors' sizes, before and after
    # the same page for a short id, and the parent's page (its own parent: create_repo's commit)
    assert httpx.get(f"{made.url}/{REPO}/commit/{c1[:7]}", cookies=jar).text == html
    parent = httpx.get(f"{made.url}/{REPO}/commit/{c0_digest}", cookies=jar).text
    assert "Three files.\nA second line." in parent and 'data-change="added"' in parent
    assert f"{made.commits[0][:12]}</code></a>" in parent
    # the history links each of its entries to its commit page
    history = httpx.get(f"{made.url}/{REPO}/commits/main", cookies=jar).text
    for digest in (c0_digest, c1_digest):
        assert f'<a class="commit-id" href="/{REPO}/commit/{digest}">' in history


def test_the_commit_page_needs_the_login_and_hides_what_the_token_may_not_read(made):
    secret = f"/acme/secret/commit/{made.secret}"
    first = httpx.get(made.url + secret)
    assert first.status_code == 303 and first.headers["location"].startswith("/ocibridge/login?next=")
    hidden = httpx.get(made.url + secret, cookies=made.login("bob-token"))
    missing = httpx.get(made.url + "/acme/nothing/commit/" + made.secret, cookies=made.login("bob-token"))
    assert hidden.status_code == missing.status_code == 404 and "No such model" in hidden.text
    assert "x.txt" not in hidden.text
    shown = httpx.get(made.url + secret, cookies=made.login("alice-token"))
    assert shown.status_code == 200 and "x.txt" in shown.text
    unknown = httpx.get(f"{made.url}/{REPO}/commit/{made.unknown()}", cookies=made.login("bob-token"))
    assert unknown.status_code == 404 and "No such revision" in unknown.text


def test_the_commit_page_in_a_browser(browser, made):
    """Rendered once by Chromium: the files table, and the parent link leads to the parent's page."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    _, c0, c1 = made.commits
    browser.delete_all_cookies()
    browser.get(f"{made.url}/{REPO}/commit/{c1[:7]}")
    browser.find_element(By.ID, "token").send_keys("bob-token")
    browser.find_element(By.CSS_SELECTOR, "form.login button[type=submit]").click()
    WebDriverWait(browser, 10).until(lambda b: "/ocibridge/login" not in b.current_url)
    assert browser.find_element(By.ID, "title").text == "c1: new weights"
    rows = [(r.get_attribute("data-change"), r.find_element(By.CSS_SELECTOR, ".path").text)
            for r in browser.find_elements(By.CSS_SELECTOR, "#files tr.file")]
    assert rows == [("added", "README.md"), ("changed", "model.safetensors"), ("removed", "notes.txt")]
    browser.find_element(By.CSS_SELECTOR, "a.parent").click()
    WebDriverWait(browser, 10).until(lambda b: "/commit/sha256:" in b.current_url)
    assert browser.find_element(By.ID, "commit-id").text == c0



def test_the_commit_page_of_a_one_part_repo_id_pushed_outside_serve(tmp_path):
    """``/NAME/commit/ID`` too; a manifest no serve wrote records no parent: its files, added."""
    from starlette.testclient import TestClient

    import ocibridge

    layout = tmp_path / "layout"
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "config.json").write_text('{"version": 1}')
    digest = ocibridge.push(str(tmp_path / "src"), f"oci:{layout}:tiny:v1").descriptor.digest
    with TestClient(ocibridge.create_app(f"oci:{layout}")) as client:
        page = client.get(f"/tiny/commit/{digest[7:14]}")
    assert page.status_code == 200, page.text
    assert '<h2 id="title">pushed outside serve</h2>' in page.text and 'id="no-parent"' in page.text
    assert re.findall(r'<tr class="file (\w+)".*?<code>([^<]+)</code>', page.text, re.S) == [("added", "config.json")]
    assert f'href="/tiny/blob/{digest}/config.json"' in page.text
