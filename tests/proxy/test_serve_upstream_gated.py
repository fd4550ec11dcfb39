"""serve as a proxy of an upstream Hub (issue 87) over repositories the upstream keeps gated or
private, let in by ``--upstream-allow-gated`` / ``--upstream-allow-private``: fetched with serve's
upstream token for a reader serve's own grants would let have them, kept gated or private here,
and to every other reader nothing: not their bytes, not (private) their existence, and no fetch.
Real processes: the upstream is another ``ocibridge serve`` over its own registry, behind a
counting fault proxy; the proxy is ``ocibridge serve`` over a second prefix; the clients are
huggingface_hub's own."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import huggingface_hub
import pytest
from huggingface_hub import HfApi
from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError
from serving import ROOT, own_registry_and_serve, serve_over
from support.faultproxy import FaultProxy, server_error
from support.registry import RegistryProcess

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

UP_TOKEN = "up-token"  # the upstream's: only the proxy has it
GRANTED = "granted-token"  # the proxy's reader with a private prefix over gp/: on its gates' lists too
PLAIN = "plain-token"  # the proxy's reader of every public repository, nothing private, on no gate's list
OWNER = "owner-token"  # the proxy's writer of gp/asked: decides its access requests
TOKENS = (f"{GRANTED} user=alice read=* private=gp/\n{PLAIN} user=bob read=*\n{OWNER} user=ops write=gp/asked\n"
          "anonymous read=*\n")
FILES = {"gp/gated": {"config.json": b'{"gate": "auto"}', "w.safetensors": b"\x07" * 4096},
         "gp/manual": {"config.json": b'{"gate": "manual"}'},
         "gp/asked": {"config.json": b'{"asked": 1}'},
         "gp/private": {"config.json": b'{"private": 1}', "w.safetensors": b"\x08" * 4096},
         "other/gated": {"config.json": b"{}"}}


@dataclass
class Kept:
    upstream: str
    counted: FaultProxy
    proxy: str
    registry: RegistryProcess
    commits: dict[str, str]  # repo id -> its main commit at the upstream
    audit: Path

    def ended(self, repo_id: str, count: int, timeout: float = 60) -> list[str]:
        """The repository's ingest outcomes once ``count`` fetches of it ended."""
        until = time.monotonic() + timeout
        while True:
            lines = [json.loads(line) for line in self.audit.read_text().splitlines()] if self.audit.exists() else []
            said = [e["outcome"] for e in lines if e["action"] == "upstream_ingest" and e["repository"] == repo_id]
            if len(said) >= count:
                return said
            assert time.monotonic() < until, f"{repo_id}: {said}"
            time.sleep(0.1)

    def api(self, token: str | bool) -> HfApi:
        return HfApi(endpoint=self.proxy, token=token)

    def asked(self, repo_id: str) -> list[str]:
        return [r.path for r in self.counted.requests if f"/{repo_id}/" in r.path]

    def tags(self, repo_id: str) -> list[str]:
        answer = httpx.get(f"{self.registry.url}/v2/kept/{repo_id}/tags/list")
        return list(answer.json().get("tags") or []) if answer.status_code == 200 else []

    def landed(self, repo_id: str, timeout: float = 60) -> list[str]:
        """The repository's tags once its main commit landed and main names it (just after its
        last file streamed to the reader that asked)."""
        wanted = {f"ocibridge-upstream-{self.commits[repo_id]}", "latest"}
        until = time.monotonic() + timeout
        while not wanted <= set(tags := self.tags(repo_id)):
            assert time.monotonic() < until, f"{repo_id}: {wanted - set(tags)} never landed"
            time.sleep(0.1)
        return tags


@pytest.fixture(scope="module")
def kept(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kept]:
    root = tmp_path_factory.mktemp("kept")
    (root / "up-token.txt").write_text(UP_TOKEN + "\n")
    (root / "proxy").mkdir()
    with own_registry_and_serve(root / "up", f"{UP_TOKEN} write\n", lambda host: [f"{host}/up", "--plain-http"]) \
            as (up, registry), FaultProxy(up) as counted:
        api = HfApi(endpoint=up, token=UP_TOKEN)
        commits = {}
        for repo, files in FILES.items():
            api.create_repo(repo, private=repo == "gp/private")
            for path, data in files.items():
                commits[repo] = api.upload_file(path_or_fileobj=data, path_in_repo=path, repo_id=repo).oid
        for repo, gate in (("gp/gated", "auto"), ("gp/manual", "manual"), ("gp/asked", "manual"),
                           ("other/gated", "auto")):
            api.update_repo_settings(repo, gated=gate)
        flags = ["--upstream", counted.url, "--upstream-token-file", str(root / "up-token.txt"),
                 "--upstream-allow-gated", "gp/*", "--upstream-allow-private", "GP/*", "--upstream-fresh", "1",
                 "--audit-log", str(root / "audit.jsonl"),
                 # the module's tests ask many misses of one client (loopback); with quick requests over 60
                 # fell in one minute (the default budget): that budget is test_serve_upstream_takeback.py's
                 "--upstream-asks-per-client", "1000/min"]
        with serve_over(registry, root / "proxy", TOKENS, lambda host: [f"{host}/kept", "--plain-http", *flags],
                        HF_HUB_DISABLE_XET="1") as proxy:
            yield Kept(up, counted, proxy, registry, commits, root / "audit.jsonl")


@pytest.fixture(autouse=True)
def lfs_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)


def test_a_gated_upstream_repository_goes_to_its_gates_list_only_and_stays_gated_here(kept: Kept, tmp_path: Path):
    # before any reader on the list asked: the gate's answers, and nothing fetched past model_info
    with pytest.raises(GatedRepoError) as anonymous:
        kept.api(False).hf_hub_download("gp/gated", "config.json", cache_dir=tmp_path / "a")
    assert anonymous.value.response.status_code == 401
    with pytest.raises(GatedRepoError) as plain:
        kept.api(PLAIN).hf_hub_download("gp/gated", "config.json", cache_dir=tmp_path / "p")
    assert plain.value.response.status_code == 403
    with pytest.raises(GatedRepoError):
        kept.api(PLAIN).model_info("gp/gated")  # described only once fetched (that would fetch its files)
    asked = kept.asked("gp/gated")
    assert asked and all(p.startswith("/api/models/gp/gated/revision/") for p in asked), asked
    assert kept.tags("gp/gated") == []
    # a gated repository the flag does not name is refused at the door, as without the flag
    refused = httpx.get(f"{kept.proxy}/api/models/other/gated", headers={"Authorization": f"Bearer {GRANTED}"})
    assert refused.status_code == 403
    assert "--upstream-allow-gated does not name it" in refused.headers["x-error-message"]
    assert kept.tags("other/gated") == []

    # a reader on the list: fetched with serve's upstream token, byte for byte
    folder = Path(kept.api(GRANTED).snapshot_download("gp/gated", cache_dir=tmp_path / "g"))
    assert {p.name: p.read_bytes() for p in folder.iterdir()
            if p.is_file() and p.name != ".gitattributes"} == FILES["gp/gated"]  # and the commit's .gitattributes
    assert kept.api(GRANTED).model_info("gp/gated").sha == kept.commits["gp/gated"]
    assert {r.headers.get("authorization") for r in kept.counted.requests} == {f"Bearer {UP_TOKEN}"}
    kept.landed("gp/gated")

    # gated here, with the upstream's mode: described to every reader, its files to the list only,
    # past a re-check too (--upstream-fresh 1: the upstream asked again, still gated)
    time.sleep(1.2)
    for token in (PLAIN, False):
        assert kept.api(token).model_info("gp/gated").gated == "auto"
    with pytest.raises(GatedRepoError) as plain:
        kept.api(PLAIN).hf_hub_download("gp/gated", "w.safetensors", cache_dir=tmp_path / "p2")
    assert plain.value.response.status_code == 403
    with pytest.raises(GatedRepoError) as anonymous:
        kept.api(False).hf_hub_download("gp/gated", "w.safetensors", revision=kept.commits["gp/gated"],
                                        cache_dir=tmp_path / "a2")
    assert anonymous.value.response.status_code == 401
    kept.api(GRANTED).snapshot_download("gp/manual", cache_dir=tmp_path / "m")
    kept.landed("gp/manual")
    assert kept.api(PLAIN).model_info("gp/manual").gated == "manual"


NOWHERE = "gp/nowhere"  # at neither: what a reader without a private grant must see of gp/private too


def _answers(kept: Kept, repo_id: str, commit: str, token: str | None) -> list[tuple[int, str, str]]:
    """What each read route answers ``token`` (None: no token) for ``repo_id``: status, error
    code and message (the repo id written as REPO)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    base = f"{kept.proxy}/api/models/{repo_id}"
    asks = [("GET", base, None), ("GET", f"{base}/revision/main", None), ("GET", f"{base}/revision/{commit}", None),
            ("GET", f"{base}/tree/main", None), ("POST", f"{base}/paths-info/main", {"paths": ["config.json"]}),
            ("GET", f"{base}/refs", None), ("GET", f"{base}/commits/main", None),
            ("GET", f"{base}/xet-read-token/main", None), ("GET", f"{base}/auth-check", None),
            ("HEAD", f"{kept.proxy}/{repo_id}/resolve/main/config.json", None),
            ("GET", f"{kept.proxy}/{repo_id}/resolve/{commit}/w.safetensors", None),
            ("GET", f"{kept.proxy}/{repo_id}/raw/main/config.json", None)]
    said = []
    for method, url, form in asks:
        answer = httpx.request(method, url, headers=headers, data=form)
        said.append((answer.status_code, answer.headers.get("x-error-code", ""),
                     answer.headers.get("x-error-message", "").replace(repo_id, "REPO")))
    cookies = {}
    if token:  # the model page, to the token's signed-in visitor
        login = httpx.post(f"{kept.proxy}/ocibridge/login", data={"token": token, "next": "/"})
        cookies = {"ocibridge_session": login.cookies["ocibridge_session"]}
        said.append((httpx.get(f"{kept.proxy}/{repo_id}", cookies=cookies).status_code, "", ""))
    page = httpx.get(f"{kept.proxy}/{repo_id}")  # ... and to a visitor not signed in (the anonymous line)
    said.append((page.status_code, "", ""))
    return said


def test_a_gated_upstream_repository_goes_to_a_caller_once_its_owner_accepts_its_request(kept: Kept, tmp_path: Path):
    """The upstream's gate kept here takes access requests (once recorded: its owner read it);
    an accepted caller's files come with the proxy's upstream token, never the caller's."""
    def reads(token: str | bool, where: str) -> bool:
        try:
            got = kept.api(token).hf_hub_download("gp/asked", "config.json", cache_dir=tmp_path / where)
        except GatedRepoError:
            return False
        return Path(got).read_bytes() == FILES["gp/asked"]["config.json"]

    assert not reads(PLAIN, "before")
    assert reads(OWNER, "owner")  # fetched, and recorded gated ("manual") here
    asked = httpx.post(f"{kept.proxy}/api/models/gp/asked/user-access-request",
                       headers={"Authorization": f"Bearer {PLAIN}"})
    assert asked.json() == {"user": "bob", "status": "pending"}
    assert not reads(PLAIN, "pending")
    owner = kept.api(OWNER)
    assert [r.username for r in owner.list_pending_access_requests("gp/asked")] == ["bob"]
    owner.accept_access_request("gp/asked", "bob")
    assert reads(PLAIN, "accepted")
    assert not reads(False, "anonymous")
    assert {r.headers.get("authorization") for r in kept.counted.requests} == {f"Bearer {UP_TOKEN}"}
    owner.reject_access_request("gp/asked", "bob", rejection_reason="not for bob")
    assert not reads(PLAIN, "rejected")


def test_a_private_upstream_repository_goes_to_private_grants_only_and_tells_no_one_else(kept: Kept,
                                                                                          tmp_path: Path):
    commit = kept.commits["gp/private"]
    before = len(kept.asked("gp/private")), len(kept.asked(NOWHERE))
    for token in (PLAIN, None):  # before it is fetched: as a repository at neither, and nothing fetched
        hidden, missing = _answers(kept, "gp/private", commit, token), _answers(kept, NOWHERE, commit, token)
        assert hidden == missing, (token, hidden, missing)
        assert {s for s, _, _ in hidden[:-1]} <= {401, 404} and hidden[-1][0] == 303, hidden  # the page: login
    asked = kept.asked("gp/private")
    assert all(p.startswith("/api/models/gp/private/revision/") for p in asked), asked
    assert len(asked) - before[0] == len(kept.asked(NOWHERE)) - before[1]  # the same asks of the upstream
    assert kept.tags("gp/private") == []
    with pytest.raises(RepositoryNotFoundError):
        kept.api(PLAIN).hf_hub_download("gp/private", "config.json", cache_dir=tmp_path / "p")
    with pytest.raises(RepositoryNotFoundError):
        kept.api(False).model_info("gp/private")

    # a private grant: fetched with serve's upstream token, byte for byte, private here
    folder = Path(kept.api(GRANTED).snapshot_download("gp/private", cache_dir=tmp_path / "g"))
    assert {p.name: p.read_bytes() for p in folder.iterdir()
            if p.is_file() and p.name != ".gitattributes"} == FILES["gp/private"]  # and the commit's .gitattributes
    info = kept.api(GRANTED).model_info("gp/private")
    assert info.sha == commit and info.private is True
    assert {r.headers.get("authorization") for r in kept.counted.requests} == {f"Bearer {UP_TOKEN}"}
    kept.landed("gp/private")

    # once here: still as a repository at neither, on every route, and never listed
    for token in (PLAIN, None):
        assert _answers(kept, "gp/private", commit, token) == _answers(kept, NOWHERE, commit, token)
    with pytest.raises(RepositoryNotFoundError):
        kept.api(PLAIN).hf_hub_download("gp/private", "w.safetensors", cache_dir=tmp_path / "p2")
    assert "gp/private" not in {m.id for m in kept.api(PLAIN).list_models(search="gp/")}
    assert "gp/private" in {m.id for m in kept.api(GRANTED).list_models(search="gp/")}


def test_a_repository_made_private_or_gated_at_the_upstream_after_it_was_fetched_is_so_here_at_its_next_check(
        kept: Kept, tmp_path: Path):
    up = HfApi(endpoint=kept.upstream, token=UP_TOKEN)
    for repo in ("gp/later-private", "gp/later-gated"):
        up.create_repo(repo)
        up.upload_file(path_or_fileobj=b"{}", path_in_repo="config.json", repo_id=repo)
        assert kept.api(PLAIN).model_info(repo).sha  # public: fetched for anyone
    up.update_repo_settings("gp/later-private", private=True)
    up.update_repo_settings("gp/later-gated", gated="manual")
    time.sleep(1.2)  # past --upstream-fresh: main is asked again
    with pytest.raises(RepositoryNotFoundError):
        kept.api(PLAIN).model_info("gp/later-private")
    with pytest.raises(GatedRepoError):
        kept.api(PLAIN).hf_hub_download("gp/later-gated", "config.json", cache_dir=tmp_path / "p")
    assert kept.api(GRANTED).model_info("gp/later-private").private is True
    assert kept.api(GRANTED).model_info("gp/later-gated").gated == "manual"
    kept.api(GRANTED).hf_hub_download("gp/later-gated", "config.json", cache_dir=tmp_path / "g")
    with pytest.raises(RepositoryNotFoundError):  # recorded: no re-check needed to keep it so
        kept.api(PLAIN).model_info("gp/later-private")


def test_a_repository_the_upstream_no_longer_gives_is_kept_private_here_when_the_allow_flag_names_it(
        kept: Kept, tmp_path: Path):
    up = HfApi(endpoint=kept.upstream, token=UP_TOKEN)
    up.create_repo("gp/later-gone")
    commit = up.upload_file(path_or_fileobj=b'{"gone": 1}', path_in_repo="config.json", repo_id="gp/later-gone").oid
    assert kept.api(PLAIN).model_info("gp/later-gone").sha == commit  # public: fetched for anyone
    kept.commits["gp/later-gone"] = commit
    kept.landed("gp/later-gone")
    up.delete_repo("gp/later-gone")  # the upstream refuses serve's token now (404)
    time.sleep(1.2)  # past --upstream-fresh
    with pytest.raises(RepositoryNotFoundError):
        kept.api(PLAIN).model_info("gp/later-gone")
    assert _answers(kept, "gp/later-gone", commit, PLAIN) == _answers(kept, NOWHERE, commit, PLAIN)
    got = kept.api(GRANTED).hf_hub_download("gp/later-gone", "config.json", revision=commit,
                                            cache_dir=tmp_path / "g")
    assert Path(got).read_bytes() == b'{"gone": 1}'  # --upstream-allow-private gp/*: kept, private here
    assert kept.api(GRANTED).model_info("gp/later-gone").private is True


def test_a_first_fetch_that_fails_leaves_the_repository_private_and_the_upstreams_to_fill(kept: Kept,
                                                                                        tmp_path: Path):
    up = HfApi(endpoint=kept.upstream, token=UP_TOKEN)
    up.create_repo("gp/flaky", private=True)
    up.upload_file(path_or_fileobj=b'{"flaky": 1}', path_in_repo="config.json", repo_id="gp/flaky")
    down = kept.counted.add("GET", r"/gp/flaky/resolve/", server_error(503), times=None)
    headers = {"Authorization": f"Bearer {GRANTED}"}
    with pytest.raises(httpx.HTTPError):  # its reader is cut (or refused) when the fetch fails
        httpx.get(f"{kept.proxy}/gp/flaky/resolve/main/config.json", headers=headers, timeout=120).raise_for_status()
    assert kept.ended("gp/flaky", 1) == ["failed"]
    assert kept.tags("gp/flaky") == ["ocibridge-refs"]  # its record alone: private before anything landed
    commit = up.model_info("gp/flaky").sha
    assert _answers(kept, "gp/flaky", commit, PLAIN) == _answers(kept, NOWHERE, commit, PLAIN)
    down.times = down.applied  # the upstream whole again: the repository is still the upstream's to fill
    got = kept.api(GRANTED).hf_hub_download("gp/flaky", "config.json", cache_dir=tmp_path / "g")
    assert Path(got).read_bytes() == b'{"flaky": 1}'
    assert kept.ended("gp/flaky", 2) == ["failed", "landed"]


def test_the_allow_flags_need_serves_own_tokens(tmp_path: Path):
    done = subprocess.run([sys.executable, "-m", "ocibridge", "serve", "127.0.0.1:1/x", "--plain-http",
                           "--upstream", "http://127.0.0.1:2", "--upstream-allow-private", "acme/*"],
                          env={"PYTHONPATH": str(ROOT), "OCIBRIDGE_CACHE": str(tmp_path)},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "--upstream-allow-private go with --token-file" in done.stderr and "Traceback" not in done.stderr


def test_a_revision_the_upstream_lacks_tells_no_reader_a_private_repository_exists(kept: Kept):
    """The upstream answers serve's token "no revision" for a private repository: a reader the
    proxy would not let in is answered as for a repository at neither, by any revision."""
    up = HfApi(endpoint=kept.upstream, token=UP_TOKEN)
    for repo in ("hush/x", "gp/hush"):  # private upstream: no allow flag names hush/; gp/ for private grants
        up.create_repo(repo, private=True)
        up.upload_file(path_or_fileobj=b"{}", path_in_repo="config.json", repo_id=repo)

    def said(repo_id: str, token: str | None, revision: str) -> list[tuple[int, str, str]]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        answers = [httpx.get(f"{kept.proxy}/api/models/{repo_id}/revision/{revision}", headers=headers),
                   httpx.get(f"{kept.proxy}/{repo_id}/resolve/{revision}/config.json", headers=headers)]
        return [(a.status_code, a.headers.get("x-error-code", ""),
                 a.headers.get("x-error-message", "").replace(repo_id, "REPO")) for a in answers]

    for revision in ("nosuch", "0" * 40):
        for repo, token in (("hush/x", PLAIN), ("hush/x", None), ("hush/x", GRANTED), ("gp/hush", PLAIN)):
            hidden, missing = said(repo, token, revision), said(NOWHERE, token, revision)
            assert hidden == missing, (repo, token, revision, hidden, missing)
        # a reader the proxy lets have it is told what the upstream said
        assert {code for _, code, _ in said("gp/hush", GRANTED, revision)} == {"RevisionNotFound"}
    assert kept.tags("hush/x") == kept.tags("gp/hush") == []
