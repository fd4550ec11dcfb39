"""Private means private (issue 85): what serve granted for Xet (a read token, the xorb URLs a
reconstruction names) ends within seconds once its holder may no longer read the repository:
made private, gated, deleted, or the token removed from the token file. Tried across replicas:
the change goes through one serve, the grants were made by another over the same registry, which
shares nothing else, and must see it within the refs record's freshness (:data:`KEEP`, 0.5 s here). Real
processes, huggingface_hub for the changes, raw HTTP for the grants (hf_xet's requests)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import huggingface_hub
import pytest
from huggingface_hub import HfApi
from serving import own_registry_and_serve, serve_over

from ocibridge.core.environment import SERVE_STATE_KEEP
from ocibridge.hubserver.repo.repostates import KEEP

TOKENS = ("alice-token user=alice write=alice/\n"
          "bob-token user=bob\n"  # reads every public repository, none of alice's private ones
          "carol-token user=carol private=alice/\n")  # reads alice's private ones, on their gates' lists
#: how long a grant is asked again after a change: a bound on a change never seen, not a speed (a
#: grant may work for the refs record's freshness, KEEP, after the change)
BOUND = KEEP + 60
REFUSED = (401, 403, 404)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@dataclass
class Replicas:
    writer: str  # where the changes go
    reader: str  # where the grants are made and used
    reader_tokens: Path  # the reader replica's token file


@pytest.fixture(scope="module")
def replicas(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replicas]:
    root = tmp_path_factory.mktemp("xet-revoke")
    other = tmp_path_factory.mktemp("xet-revoke-replica")

    def sources(host: str) -> list[str]:
        return [host, "--plain-http"]

    with own_registry_and_serve(root, TOKENS, sources) as (writer, registry), \
            serve_over(registry, other, TOKENS, sources, **{SERVE_STATE_KEEP: "0.5"}) as reader:
        yield Replicas(writer, reader, other / "tokens.txt")


@pytest.fixture(autouse=True)
def lfs_uploads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)


@dataclass
class Granted:
    """What hf_xet holds for one file: the CAS URL, its token, a xorb URL of its plan."""

    cas: str
    token: str
    name: str
    xorb: str

    def plan(self) -> httpx.Response:
        return httpx.get(f"{self.cas}/v2/reconstructions/{self.name}",
                         headers={"Authorization": f"Bearer {self.token}"})

    def fetch(self) -> int:
        return httpx.get(self.xorb, headers={"Range": "bytes=0-99"}).status_code


def granted(url: str, repo: str, token: str) -> Granted:
    """A Xet read token for ``repo``'s weights, asked of ``url`` as huggingface_hub and hf_xet do."""
    bearer = {"Authorization": f"Bearer {token}"}
    head = httpx.head(f"{url}/{repo}/resolve/main/weights.bin", headers=bearer)
    assert head.status_code == 200, head.text
    grant = httpx.get(head.headers["x-xet-refresh-route"], headers=bearer)
    assert grant.status_code == 200, grant.text
    cas, xet_token = grant.headers["x-xet-cas-url"], grant.headers["x-xet-access-token"]
    got = Granted(cas, xet_token, head.headers["x-xet-hash"], "")
    plan = got.plan()
    assert plan.status_code == 200, plan.text
    got.xorb = next(iter(plan.json()["xorbs"].values()))[0]["url"]
    assert got.fetch() == 206
    return got


def weights_repo(replicas: Replicas, name: str) -> str:
    alice = HfApi(endpoint=replicas.writer, token="alice-token")
    repo = alice.create_repo(name).repo_id
    alice.upload_file(repo_id=repo, path_in_repo="weights.bin", path_or_fileobj=os.urandom(200_000))
    return repo


def refused_within_bound(*grants: Granted) -> None:
    """Once each grant's plan and xorb URL are refused; fails if they never are (:data:`BOUND`)."""
    deadline = time.monotonic() + BOUND
    while True:
        answers = [(g.plan().status_code, g.fetch()) for g in grants]
        if all(plan in REFUSED and xorb in REFUSED for plan, xorb in answers):
            return
        assert time.monotonic() < deadline, f"the grants were never refused after the change: {answers}"
        time.sleep(0.25)


def still_reads(got: Granted) -> None:
    plan = got.plan()
    assert plan.status_code == 200, plan.text
    assert got.fetch() == 206
    fresh = next(iter(plan.json()["xorbs"].values()))[0]["url"]
    assert httpx.get(fresh, headers={"Range": "bytes=0-99"}).status_code == 206


def test_a_repository_made_private_ends_the_xet_grants_of_readers_without_private_scope(replicas):
    repo = weights_repo(replicas, "turned-private")
    old, fresh = granted(replicas.reader, repo, "bob-token"), granted(replicas.reader, repo, "bob-token")
    allowed = granted(replicas.reader, repo, "carol-token")
    HfApi(endpoint=replicas.writer, token="alice-token").update_repo_settings(repo, private=True)
    refused_within_bound(old, fresh)
    still_reads(allowed)  # carol's private prefix covers it
    assert httpx.get(f"{replicas.reader}/api/models/{repo}/xet-read-token/main",
                     headers={"Authorization": "Bearer bob-token"}).status_code == 404  # and no new grant


def test_a_gate_ends_the_xet_grants_of_readers_off_its_list(replicas):
    repo = weights_repo(replicas, "turned-gated")
    old, fresh = granted(replicas.reader, repo, "bob-token"), granted(replicas.reader, repo, "bob-token")
    allowed = granted(replicas.reader, repo, "carol-token")
    HfApi(endpoint=replicas.writer, token="alice-token").update_repo_settings(repo, gated="manual")
    refused_within_bound(old, fresh)
    assert old.plan().headers.get("x-error-code") == "GatedRepo"
    still_reads(allowed)


def test_a_deleted_repository_ends_every_xet_grant(replicas):
    repo = weights_repo(replicas, "deleted")
    grants = [granted(replicas.reader, repo, t) for t in ("bob-token", "carol-token", "alice-token")]
    HfApi(endpoint=replicas.writer, token="alice-token").delete_repo(repo)
    refused_within_bound(*grants)


def test_a_removed_token_ends_its_xet_grants_and_no_others(replicas):
    repo = weights_repo(replicas, "token-removed")
    bob, carol = granted(replicas.reader, repo, "bob-token"), granted(replicas.reader, repo, "carol-token")
    replicas.reader_tokens.write_text(TOKENS.replace("bob-token user=bob\n", ""))
    try:
        refused_within_bound(bob)
        still_reads(carol)
    finally:
        replicas.reader_tokens.write_text(TOKENS)
