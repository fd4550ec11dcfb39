"""Private means private (issue 85): serve keeps each repository's refs record (private, gated,
deleted, its branches and tags) as a registry tag, and read any failure to read it as "no
record", so a registry that answered that one tag with 503 (a rate limit, an outage) opened a
private or gated repository to every reader, and a ``create_branch`` meanwhile rewrote the
record without ``private``, so it stayed open after the outage. Now a record not read refuses
what needs it (503 with Retry-After) and no write rewrites a record it could not read. A fault
proxy between serve and the registry answers 503 for the record's manifest only; the clients
are huggingface_hub and httpx against serve in this process."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import huggingface_hub
import pytest
from huggingface_hub import HfApi
from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError, RepositoryNotFoundError
from serving import Served, hub_retries_at_once, point_hub_at, serving
from support.faultproxy import FaultProxy, status

from ocibridge.hubserver.access import Denied
from ocibridge.hubserver.failures import failure_of
from ocibridge.hubserver.repo import refsrecord
from ocibridge.hubserver.repo.publishing import Publishing
from ocibridge.hubserver.repo.refsrecord import RecordUnread
from ocibridge.oci.bookkeeping import REFS_TAG

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

TOKENS = ("alice-token user=alice write=alice/", "bob-token user=bob")
SECRET, GATED, KEPT = "alice/secret", "alice/gated", "alice/kept"
BYTES = b"the weights no one else may read\n"
#: seconds serve believes a record it read (short here: the outage meets no record read before it)
KEEP = 0.5


@dataclass
class Outage:
    served: Served
    proxy: FaultProxy

    def api(self, token: str) -> HfApi:
        return HfApi(endpoint=self.served.url, token=token)

    def get(self, path: str, token: str) -> httpx.Response:
        return httpx.get(f"{self.served.url}{path}", headers={"authorization": f"Bearer {token}"})

    @contextlib.contextmanager
    def down(self) -> Iterator[None]:
        """The registry answers 503 (Retry-After: 0, so serve's own retries take no time) for
        every read of a refs record's manifest, and for nothing else (the proxy's log of
        requests begins here)."""
        self.proxy.clear()
        for method in ("GET", "HEAD"):
            self.proxy.add(method, rf"/manifests/{REFS_TAG}$", status(503, retry_after=0), times=None)
        time.sleep(KEEP)  # what serve read before is no longer believed
        try:
            yield
        finally:
            self.proxy.clear()
        assert self.proxy.rules == []


@pytest.fixture(scope="module")
def outage(registry) -> Iterator[Outage]:
    with FaultProxy(registry) as proxy, \
            serving([f"{proxy.host}/test/{uuid.uuid4().hex[:8]}"], tokens=TOKENS, publish=Publishing()) as served:
        served.catalog.states.keep = KEEP
        alice = HfApi(endpoint=served.url, token="alice-token")
        for repo in (SECRET, GATED, KEPT):
            alice.create_repo(repo, private=repo != GATED)
            alice.upload_file(repo_id=repo, path_in_repo="weights.bin", path_or_fileobj=BYTES)
        for repo in (GATED, KEPT):
            alice.update_repo_settings(repo, gated="auto")
        yield Outage(served, proxy)


@pytest.fixture(autouse=True)
def lfs_only(monkeypatch: pytest.MonkeyPatch, outage: Outage, tmp_path: Path) -> None:
    point_hub_at(monkeypatch, outage.served.url, tmp_path / "hub")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)
    # huggingface_hub's downloads wait Retry-After (and 1 s) 5 times before they give up: 1 s, not serve's 5,
    # and its waits here are short (the outage lasts while it retries)
    monkeypatch.setattr(refsrecord, "RETRY_AFTER", 1)
    hub_retries_at_once(monkeypatch)


def refused_for_now(answer: httpx.Response) -> None:
    """The Hub's "try again later": 503 with Retry-After, none of the file's bytes."""
    assert answer.status_code == 503, answer.text
    assert int(answer.headers["retry-after"]) > 0
    assert "refs record" in answer.json()["error"] and BYTES not in answer.content


def test_a_private_repository_stays_hidden_while_its_record_cannot_be_read(outage, tmp_path):
    bob, alice = outage.api("bob-token"), outage.api("alice-token")
    login = httpx.post(f"{outage.served.url}/ocibridge/login", data={"token": "bob-token", "next": "/"})
    jar = {"ocibridge_session": login.cookies["ocibridge_session"]}
    with outage.down():
        with pytest.raises(HfHubHTTPError) as hidden:
            bob.model_info(SECRET)
        assert hidden.value.response.status_code in (404, 503)
        refused_for_now(outage.get(f"/api/models/{SECRET}", "bob-token"))
        refused_for_now(outage.get(f"/{SECRET}/resolve/main/weights.bin", "bob-token"))
        # listings leave out a repository whose record was not read (it may be private), for everyone
        assert SECRET not in [m.id for m in bob.list_models(search="secret")]
        assert SECRET not in [m.id for m in alice.list_models(search="secret")]
        assert SECRET not in httpx.get(f"{outage.served.url}/models?search=secret", cookies=jar).text
        page = httpx.get(f"{outage.served.url}/{SECRET}", cookies=jar)
        assert page.status_code == 503 and int(page.headers["retry-after"]) > 0 and BYTES not in page.content
    # at once after the outage: nothing derived from the failed reads was kept
    with pytest.raises(RepositoryNotFoundError):
        bob.model_info(SECRET)
    assert alice.model_info(SECRET).private is True
    assert Path(alice.hf_hub_download(SECRET, "weights.bin", cache_dir=tmp_path / "alice")).read_bytes() == BYTES


def test_a_gated_repositorys_files_are_refused_while_its_record_cannot_be_read(outage, tmp_path):
    bob = outage.api("bob-token")
    with outage.down():
        with pytest.raises(LocalEntryNotFoundError) as refused:  # how huggingface_hub words a 503 it gave up on
            bob.hf_hub_download(GATED, "weights.bin", cache_dir=tmp_path / "bob")
        cause = refused.value.__cause__
        assert isinstance(cause, HfHubHTTPError) and cause.response.status_code == 503
        assert not list((tmp_path / "bob").rglob("weights.bin"))
        refused_for_now(outage.get(f"/{GATED}/resolve/main/weights.bin", "bob-token"))
        refused_for_now(outage.get(f"/api/models/{GATED}/xet-read-token/main", "bob-token"))
    answer = outage.get(f"/{GATED}/resolve/main/weights.bin", "bob-token")
    assert answer.status_code == 403 and answer.headers["x-error-code"] == "GatedRepo"


def test_no_write_rewrites_a_record_it_could_not_read(outage):
    """``create_branch``, ``create_tag`` and ``update_repo_settings`` each read the record,
    change it and write it whole: during the outage each is refused before it writes, and after
    it the repository is as private and gated as it was, with no ref made."""
    alice, bob = outage.api("alice-token"), outage.api("bob-token")
    with outage.down():
        for write in (lambda: alice.create_branch(KEPT, branch="dev"),
                      lambda: alice.create_tag(KEPT, tag="v1"),
                      lambda: alice.update_repo_settings(KEPT, gated="manual")):
            with pytest.raises(HfHubHTTPError) as refused:
                write()
            assert refused.value.response.status_code == 503
            assert int(refused.value.response.headers["retry-after"]) > 0
        puts = outage.proxy.requests_matching("PUT", rf"/manifests/{REFS_TAG}$")
    assert puts == []  # not one record written
    info = alice.model_info(KEPT)
    assert (info.private, info.gated) == (True, "auto")
    refs = alice.list_repo_refs(KEPT)
    assert ([b.name for b in refs.branches], refs.tags) == (["main"], [])
    with pytest.raises(RepositoryNotFoundError):
        bob.model_info(KEPT)
    alice.create_branch(KEPT, branch="dev")  # the registry back: the write is taken, the record kept
    info = alice.model_info(KEPT)
    assert (info.private, info.gated) == (True, "auto")


def test_a_move_that_cannot_copy_the_record_copies_nothing(outage):
    """``move_repo`` copies the old repository's tags to the new id: the refs record first, so a
    registry that fails it (here the copy's read of it, after the move's own read passed) leaves
    no public copy of a private repository behind."""
    alice, bob = outage.api("alice-token"), outage.api("bob-token")
    old, new = "alice/moving", "alice/moved"
    alice.create_repo(old, private=True)
    outage.proxy.add(None, rf"/{old}/manifests/{REFS_TAG}$", status(503, retry_after=0), times=None, skip=1)
    try:
        with pytest.raises(HfHubHTTPError) as failed:
            alice.move_repo(old, new)
        assert failed.value.response.status_code >= 500
    finally:
        outage.proxy.clear()
    with pytest.raises(RepositoryNotFoundError):
        bob.model_info(new)
    assert alice.model_info(old).private is True


def test_every_record_serve_cannot_read_is_the_hubs_503_with_retry_after():
    """The refs record's and the token file's (access.py refuses every token while it is
    broken): both asked again after a while, as huggingface_hub's retries read it."""
    for error in (RecordUnread("acme/m: not read"), Denied(503, "serve cannot read its token file now")):
        failure = failure_of(error)
        assert (failure.status, failure.retry_after is not None and failure.retry_after > 0) == (503, True)
    assert failure_of(Denied(403, "no")).retry_after is None
