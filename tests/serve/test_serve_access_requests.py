"""A gated repository's access requests through serve, as the Hub has them: a caller asks, the
repository's owners (its write tokens) list, accept, reject, cancel or grant with huggingface_hub's
own calls, and each caller reads the files once accepted and only while accepted; the decisions
live in the registry (the repository's refs record). Real processes: serve over a registry of its
own; the clients are huggingface_hub's."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import huggingface_hub
import pytest
from huggingface_hub import HfApi, get_session
from huggingface_hub.errors import GatedRepoError, HfHubHTTPError
from huggingface_hub.utils import build_hf_headers, hf_raise_for_status
from serving import own_registry_and_serve, point_hub_at
from support.registry import RegistryProcess

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

TOKENS = ("owner-token user=owner write=acme/\n"
          "bob-token user=bob\n"
          "eve-token user=eve\n"
          "anonymous read=*\n")
CARD = b"---\nlicense: mit\nextra_gated_prompt: You agree to cite the paper.\n---\n# terms\n"


@dataclass
class Served:
    url: str
    registry: RegistryProcess

    def api(self, token: str | bool) -> HfApi:
        return HfApi(endpoint=self.url, token=token)

    def ask(self, repo: str, token: str | None) -> dict[str, str]:
        """The caller's access request (huggingface_hub has no call for it: the Hub's form posts it)."""
        answer = get_session().post(f"{self.url}/api/models/{repo}/user-access-request",
                                    headers=build_hf_headers(token=token or False), json={})
        hf_raise_for_status(answer)
        return answer.json()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("asks")
    with own_registry_and_serve(root, TOKENS, lambda host: [host, "--plain-http"]) as (url, registry):
        yield Served(url, registry)


@pytest.fixture(autouse=True)
def hub_here(monkeypatch: pytest.MonkeyPatch, served: Served, tmp_path: Path) -> None:
    point_hub_at(monkeypatch, served.url, tmp_path / "hub")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)


def gated_repo(served: Served, name: str, gate: str) -> str:
    owner = served.api("owner-token")
    repo = owner.create_repo(f"acme/{name}").repo_id
    owner.upload_file(repo_id=repo, path_in_repo="README.md", path_or_fileobj=CARD)
    owner.upload_file(repo_id=repo, path_in_repo="config.json", path_or_fileobj=b'{"a": 1}')
    owner.update_repo_settings(repo, gated=gate)
    return repo


def reads(served: Served, repo: str, token: str, where: Path) -> bool:
    try:
        got = served.api(token).hf_hub_download(repo, "config.json", cache_dir=where)
    except GatedRepoError:
        return False
    return Path(got).read_bytes() == b'{"a": 1}'


def test_a_manual_gate_lets_a_caller_read_once_its_owner_accepts_and_no_other(served, tmp_path):
    repo = gated_repo(served, "manual", "manual")
    owner, bob, eve = (served.api(t) for t in ("owner-token", "bob-token", "eve-token"))
    info = bob.model_info(repo)  # the gate and its terms, shown to whoever reads it
    assert info.gated == "manual" and info.card_data["extra_gated_prompt"] == "You agree to cite the paper."
    assert not reads(served, repo, "bob-token", tmp_path / "before")

    assert served.ask(repo, "bob-token") == {"user": "bob", "status": "pending"}
    assert not reads(served, repo, "bob-token", tmp_path / "pending")
    assert [r.username for r in owner.list_pending_access_requests(repo)] == ["bob"]
    assert list(owner.list_accepted_access_requests(repo)) == []
    with pytest.raises(HfHubHTTPError) as not_owner:  # a reader decides nothing, not even its own
        bob.accept_access_request(repo, "bob")
    assert not_owner.value.response.status_code == 403
    with pytest.raises(HfHubHTTPError) as listing:
        list(bob.list_pending_access_requests(repo))
    assert listing.value.response.status_code == 403

    owner.accept_access_request(repo, "bob")
    assert [(r.username, r.status) for r in owner.list_accepted_access_requests(repo)] == [("bob", "accepted")]
    assert list(owner.list_pending_access_requests(repo)) == []
    assert reads(served, repo, "bob-token", tmp_path / "accepted")
    assert not reads(served, repo, "eve-token", tmp_path / "eve")  # another reader: never
    with pytest.raises(GatedRepoError):
        eve.auth_check(repo)
    bob.auth_check(repo)
    with pytest.raises(GatedRepoError) as anonymous:
        served.api(False).hf_hub_download(repo, "config.json", cache_dir=tmp_path / "anonymous")
    assert anonymous.value.response.status_code == 401

    owner.reject_access_request(repo, "bob", rejection_reason="no")
    assert [r.username for r in owner.list_rejected_access_requests(repo)] == ["bob"]
    assert not reads(served, repo, "bob-token", tmp_path / "rejected")
    assert served.ask(repo, "bob-token")["status"] == "rejected"  # asking again changes nothing

    owner.grant_access(repo, "eve")  # one who never asked
    assert reads(served, repo, "eve-token", tmp_path / "granted")
    owner.cancel_access_request(repo, "eve")  # back to pending
    assert [r.username for r in owner.list_pending_access_requests(repo)] == ["eve"]
    assert not reads(served, repo, "eve-token", tmp_path / "cancelled")
    with pytest.raises(HfHubHTTPError) as nobody:
        owner.accept_access_request(repo, "carol")  # no such request
    assert nobody.value.response.status_code == 400


def test_the_requests_live_in_the_registry_and_an_auto_gate_accepts_at_once(served, tmp_path):
    repo = gated_repo(served, "auto", "auto")
    assert not reads(served, repo, "eve-token", tmp_path / "before")
    assert served.ask(repo, "eve-token") == {"user": "eve", "status": "accepted"}
    assert reads(served, repo, "eve-token", tmp_path / "after")
    assert not reads(served, repo, "bob-token", tmp_path / "bob")
    record = httpx.get(f"{served.registry.url}/v2/{repo}/manifests/ocibridge-refs",
                       headers={"Accept": "application/vnd.oci.image.manifest.v1+json"}).json()
    layer = httpx.get(f"{served.registry.url}/v2/{repo}/blobs/{record['layers'][0]['digest']}").json()
    assert [(a["user"], a["status"]) for a in layer["accessRequests"]] == [("eve", "accepted")]


def test_an_ungated_repository_takes_no_requests_and_anonymous_callers_ask_nothing(served):
    owner = served.api("owner-token")
    repo = owner.create_repo("acme/open").repo_id
    with pytest.raises(HfHubHTTPError) as open_repo:
        served.ask(repo, "bob-token")
    assert open_repo.value.response.status_code == 400 and "not a gated repository" in str(open_repo.value)
    gated = gated_repo(served, "anon", "manual")
    with pytest.raises(HfHubHTTPError) as anonymous:
        served.ask(gated, None)
    assert anonymous.value.response.status_code == 401
    assert list(owner.list_pending_access_requests(gated)) == []


def test_the_model_page_shows_the_gate_its_terms_and_where_to_ask(served):
    repo = gated_repo(served, "paged", "manual")
    page = httpx.get(f"{served.url}/{repo}")
    assert page.status_code == 200
    assert "Gated (manual)" in page.text and f"/api/models/{repo}/user-access-request" in page.text
    assert "You agree to cite the paper." in page.text
