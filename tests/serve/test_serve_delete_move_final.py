"""Private means private (issue 85): a deleted repository stays deleted and a move is atomic to
its readers, through huggingface_hub and httpx against serve as a process over the real
registry, a fault proxy between them slowing the move so that its middle is seen.

- a repository made again over a deleted one of its name reaches none of the deleted one's
  commits, by commit id, abbreviated id or manifest digest (repo/recreated.py);
- a private or gated repository being moved is never readable at its new id by a reader the
  old one refused, at any moment of the move (writes/moving.py: its record first);
- a commit sent to a repository while it is being moved is refused (409), never acknowledged
  and then left behind in the deleted source (repo/branchlocks.py)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import huggingface_hub
import pytest
from huggingface_hub import HfApi
from huggingface_hub.errors import (
    EntryNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from serving import point_hub_at, serve_over
from support.faultproxy import FaultProxy, delay

from ocibridge.core.environment import SERVE_STATE_KEEP

TOKENS = ("alice-token user=alice write=alice/\n"
          "bob-token user=bob\n")
#: what each manifest written at a move's destination waits at the proxy: the move is seen midway
SLOW = 0.4
#: seconds serve believes a repository's record (its default is 5): a private or gated one's move waits it out
STATE_KEEP = 0.5

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@dataclass
class Served:
    url: str
    proxy: FaultProxy
    registry_url: str
    prefix: str  # the registry path serve's source is

    def api(self, token: str | bool | None) -> HfApi:
        return HfApi(endpoint=self.url, token=token)

    def digest(self, repo: str, tag: str) -> str | None:
        """The digest a registry tag of ``repo`` names, asked of the registry itself."""
        answer = httpx.head(f"{self.registry_url}/v2/{self.prefix}/{repo}/manifests/{tag}",
                            headers={"Accept": "application/vnd.oci.image.manifest.v1+json"})
        return answer.headers.get("docker-content-digest") if answer.status_code == 200 else None

    def slow_move_to(self, repo: str) -> None:
        """Every manifest written at ``repo`` (a move's copy of each tag) waits :data:`SLOW` seconds."""
        self.proxy.add("PUT", rf"/{self.prefix}/{repo}/manifests/", delay(SLOW), times=None)


@pytest.fixture(scope="module")
def served(registry, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("deletemove")
    prefix = f"deletemove/{uuid.uuid4().hex[:8]}"
    with FaultProxy(registry) as proxy, \
            serve_over(registry, root, TOKENS, lambda _host: [f"{proxy.host}/{prefix}", "--plain-http"],
                       **{SERVE_STATE_KEEP: str(STATE_KEEP)}) as url:
        yield Served(url, proxy, registry.url, prefix)


@pytest.fixture(autouse=True)
def hub(monkeypatch: pytest.MonkeyPatch, served: Served, tmp_path: Path) -> None:
    point_hub_at(monkeypatch, served.url, tmp_path / "hub")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)
    served.proxy.clear()


def test_a_repository_made_again_reaches_none_of_the_deleted_ones_commits(served, tmp_path):
    alice = served.api("alice-token")
    repo = alice.create_repo("alice/reborn").repo_id
    alice.upload_file(repo_id=repo, path_in_repo="secret.txt", path_or_fileobj=b"the deleted secret")
    old = alice.model_info(repo).sha
    digest = served.digest(repo, "latest")
    assert old is not None and digest is not None and digest.removeprefix("sha256:").startswith(old)
    alice.delete_repo(repo)
    alice.create_repo(repo)
    for revision in (old, old[:7], old[:12], digest):
        with pytest.raises((RevisionNotFoundError, EntryNotFoundError)):
            alice.hf_hub_download(repo, "secret.txt", revision=revision, cache_dir=tmp_path / revision[:12])
        with pytest.raises(RevisionNotFoundError):
            alice.model_info(repo, revision=revision)
        answer = httpx.get(f"{served.url}/{repo}/resolve/{revision}/secret.txt",
                           headers={"Authorization": "Bearer alice-token"})
        assert answer.status_code == 404 and b"the deleted secret" not in answer.content, revision
    # asked again (this serve keeps what it resolved): still nothing of it
    with pytest.raises(RevisionNotFoundError):
        alice.model_info(repo, revision=old)
    assert [c.title for c in alice.list_repo_commits(repo)] == ["initial commit"]
    # the commits made since are its own, by every name
    alice.upload_file(repo_id=repo, path_in_repo="fresh.txt", path_or_fileobj=b"made after")
    head = alice.model_info(repo).sha
    mine = served.digest(repo, "latest")
    assert head is not None and mine is not None
    assert old not in [c.commit_id for c in alice.list_repo_commits(repo)]
    for revision in (head, head[:7], mine):
        got = alice.hf_hub_download(repo, "fresh.txt", revision=revision, cache_dir=tmp_path / ("new" + revision[:12]))
        assert Path(got).read_bytes() == b"made after"
    # a repository moved onto the deleted name starts anew there too
    alice.delete_repo(repo)
    other = alice.create_repo("alice/elsewhere").repo_id
    alice.move_repo(from_id=other, to_id=repo)
    for revision in (old, digest, head, mine):
        with pytest.raises(RevisionNotFoundError):
            alice.model_info(repo, revision=revision)
    assert [c.title for c in alice.list_repo_commits(repo)] == ["initial commit"]


def watch(poll: Callable[[], list[str]]) -> tuple[threading.Event, list[str], threading.Thread]:
    """``poll`` in a thread until the event is set; what it found wrong, gathered."""
    stop = threading.Event()
    found: list[str] = []

    def run() -> None:
        while not stop.is_set():
            found.extend(poll())
            time.sleep(0.02)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return stop, found, thread


@pytest.mark.parametrize("hidden", ["private", "gated"])
def test_a_moved_repository_is_never_readable_at_its_new_id_by_one_the_old_one_refused(served, hidden, tmp_path):
    alice, bob = served.api("alice-token"), served.api("bob-token")
    repo = alice.create_repo(f"alice/{hidden}-from", private=hidden == "private").repo_id
    alice.upload_file(repo_id=repo, path_in_repo="secret.txt", path_or_fileobj=b"for alice only")
    if hidden == "gated":
        alice.update_repo_settings(repo, gated="auto")
    commit = alice.model_info(repo).sha
    new = f"alice/{hidden}-to"
    served.slow_move_to(new)
    bearer = {"Authorization": "Bearer bob-token"}

    def poll() -> list[str]:
        wrong = []
        for path in ("resolve/main/secret.txt", f"resolve/{commit}/secret.txt"):
            answer = httpx.get(f"{served.url}/{new}/{path}", headers=bearer)
            if answer.status_code == 200 or b"for alice only" in answer.content:
                wrong.append(f"{path}: {answer.status_code}")
        if hidden == "private":
            info = httpx.get(f"{served.url}/api/models/{new}", headers=bearer)
            if info.status_code != 404:
                wrong.append(f"model_info: {info.status_code}")
        return wrong

    stop, found, thread = watch(poll)
    try:
        alice.move_repo(from_id=repo, to_id=new)
    finally:
        stop.set()
        thread.join()
    assert served.proxy.rules[0].applied >= 3  # the move was slowed: polled all along
    assert found == []
    assert Path(alice.hf_hub_download(new, "secret.txt")).read_bytes() == b"for alice only"
    info = alice.model_info(new)
    assert (info.private, info.gated) == ((True, False) if hidden == "private" else (False, "auto"))
    assert poll() == []
    with pytest.raises(RepositoryNotFoundError if hidden == "private" else GatedRepoError):
        bob.hf_hub_download(new, "secret.txt", cache_dir=tmp_path / "bob")  # not alice's copy


def test_a_commit_sent_while_its_repository_moves_is_refused_never_acknowledged_and_lost(served):
    alice = served.api("alice-token")
    repo = alice.create_repo("alice/busy").repo_id
    alice.upload_file(repo_id=repo, path_in_repo="a.txt", path_or_fileobj=b"before")
    new = "alice/busy-moved"
    served.slow_move_to(new)
    failed: list[BaseException] = []

    def move() -> None:
        try:
            alice.move_repo(from_id=repo, to_id=new)
        except BaseException as e:  # noqa: BLE001 (said below)
            failed.append(e)

    mover = threading.Thread(target=move)
    mover.start()
    deadline = time.monotonic() + 30
    while served.digest(new, "latest") is None:  # main copied, the rest still to come
        assert time.monotonic() < deadline and mover.is_alive(), failed
        time.sleep(0.01)
    acked = None
    with pytest.raises(HfHubHTTPError) as refused:
        acked = alice.upload_file(repo_id=repo, path_in_repo="b.txt", path_or_fileobj=b"during")
    mover.join()
    assert failed == [] and acked is None
    assert refused.value.response.status_code == 409 and "being moved to" in str(refused.value)
    assert alice.list_repo_files(new) == [".gitattributes", "a.txt"]
    # asked again once the move is done, it lands where the repository is
    alice.upload_file(repo_id=new, path_in_repo="b.txt", path_or_fileobj=b"after")
    assert alice.list_repo_files(new) == [".gitattributes", "a.txt", "b.txt"]
