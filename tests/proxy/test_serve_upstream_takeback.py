"""serve as a proxy of an upstream Hub: what the upstream takes back, the proxy takes back (a
repository fetched while public, then made private, gated or deleted by its owner, is refused here
at the next --upstream-fresh check, by branch and by commit id, as one never seen; an upstream that
does not answer changes nothing); the fetches one client starts are bounded (503 and Retry-After
past the bound); an upstream that wants a token serve was not given is unavailable, not "not
found", and the log says why. Real processes: the upstream is another ``ocibridge serve`` (it lets
no one in without its token) behind a counting fault proxy; the clients are huggingface_hub's own
and httpx."""

from __future__ import annotations

import concurrent.futures
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import huggingface_hub
import pytest
from huggingface_hub import HfApi
from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError
from serving import own_registry_and_serve, serve_over
from support.faultproxy import FaultProxy, delay, server_error
from support.registry import RegistryProcess

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

UP_TOKEN = "up-token"
READER = "reader-token"
PROBER = "prober-token"  # a client of its own for the spent-budget probe
TOKENS = f"{READER} user=carol read=*\n{PROBER} user=dave read=*\nanonymous read=*\n"
FRESH = 1.0
MOST, PER_CLIENT = 3, 2
ASKS = 2  # the asking proxy's asks of the upstream per client (an hour's: none come back during a test)


@dataclass
class Upstreamed:
    upstream: str
    counted: FaultProxy
    proxy: str  # with the upstream's token, re-checked every FRESH seconds, fetches bounded
    tokenless: str  # with no upstream token
    asking: str  # with the upstream's token, ASKS asks of the upstream per client and hour
    root: Path
    registry: RegistryProcess

    def landed(self, repo: str, commit: str, timeout: float = 60) -> None:
        """Once the proxy's fetch of ``commit`` landed (its place among the fetches under way free)."""
        until = time.monotonic() + timeout
        while f"ocibridge-upstream-{commit}" not in (httpx.get(f"{self.registry.url}/v2/taken/{repo}/tags/list")
                                                     .json().get("tags") or []):
            assert time.monotonic() < until, f"{repo}@{commit} never landed"
            time.sleep(0.1)

    def publish(self, repo: str, data: bytes = b"{}") -> str:
        up = HfApi(endpoint=self.upstream, token=UP_TOKEN)
        up.create_repo(repo)
        return up.upload_file(path_or_fileobj=data, path_in_repo="config.json", repo_id=repo).oid

    def log(self, which: str) -> str:
        return (self.root / which / "serve.log").read_text(errors="replace")


@pytest.fixture(scope="module")
def upstreamed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Upstreamed]:
    root = tmp_path_factory.mktemp("takeback")
    (root / "up-token.txt").write_text(UP_TOKEN + "\n")
    for d in ("proxy", "tokenless", "asking"):
        (root / d).mkdir()
    with own_registry_and_serve(root / "up", f"{UP_TOKEN} write\n", lambda host: [f"{host}/up", "--plain-http"]) \
            as (up, registry), FaultProxy(up) as counted:
        flags = ["--upstream", counted.url, "--upstream-token-file", str(root / "up-token.txt"),
                 "--upstream-fresh", str(FRESH), "--upstream-max-fetches", str(MOST),
                 "--upstream-max-fetches-per-client", str(PER_CLIENT)]
        with serve_over(registry, root / "proxy", TOKENS, lambda host: [f"{host}/taken", "--plain-http", *flags],
                        HF_HUB_DISABLE_XET="1") as proxy, \
                serve_over(registry, root / "tokenless", TOKENS,
                           lambda host: [f"{host}/bare", "--plain-http", "--upstream", counted.url],
                           HF_HUB_DISABLE_XET="1") as tokenless, \
                serve_over(registry, root / "asking", TOKENS,
                           lambda host: [f"{host}/asking", "--plain-http", "--upstream", counted.url,
                                         "--upstream-token-file", str(root / "up-token.txt"),
                                         "--upstream-asks-per-client", f"{ASKS}/h"],
                           HF_HUB_DISABLE_XET="1") as asking:
            yield Upstreamed(up, counted, proxy, tokenless, asking, root, registry)


@pytest.fixture(autouse=True)
def lfs_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)


def _answers(proxy: str, repo: str, commit: str) -> list[tuple[int, str, str]]:
    """What an anonymous reader is answered for ``repo`` by branch and by commit (the id as REPO)."""
    said = []
    for url in (f"{proxy}/api/models/{repo}", f"{proxy}/api/models/{repo}/revision/{commit}",
                f"{proxy}/{repo}/resolve/main/config.json", f"{proxy}/{repo}/resolve/{commit}/config.json"):
        answer = httpx.get(url)
        said.append((answer.status_code, answer.headers.get("x-error-code", ""),
                     answer.headers.get("x-error-message", "").replace(repo, "REPO")))
    return said


def test_a_repository_the_upstream_makes_private_or_deletes_is_refused_here_as_one_never_seen(
        upstreamed: Upstreamed, tmp_path: Path):
    up = HfApi(endpoint=upstreamed.upstream, token=UP_TOKEN)
    api = HfApi(endpoint=upstreamed.proxy, token=False)
    commits = {repo: upstreamed.publish(repo) for repo in ("owner/private", "owner/bycommit", "owner/deleted")}
    for repo, commit in commits.items():  # public: fetched for anyone, by branch and by commit
        assert api.model_info(repo).sha == commit
        api.hf_hub_download(repo, "config.json", revision=commit, cache_dir=tmp_path / "before")
        upstreamed.landed(repo, commit)
    never = upstreamed.publish("owner/never-asked")
    up.update_repo_settings("owner/never-asked", private=True)
    up.update_repo_settings("owner/private", private=True)
    up.update_repo_settings("owner/bycommit", private=True)
    up.delete_repo("owner/deleted")
    time.sleep(FRESH + 0.2)  # past --upstream-fresh
    # read by commit id only: that read asks the upstream too
    with pytest.raises(RepositoryNotFoundError):
        api.hf_hub_download("owner/bycommit", "config.json", revision=commits["owner/bycommit"],
                            cache_dir=tmp_path / "after")
    with pytest.raises(RepositoryNotFoundError):
        api.model_info("owner/private")
    with pytest.raises(RepositoryNotFoundError):
        HfApi(endpoint=upstreamed.proxy, token=READER).hf_hub_download("owner/deleted", "config.json",
                                                                       cache_dir=tmp_path / "deleted")
    for repo, commit in commits.items():  # every route, by branch and by commit: as one never seen here
        assert _answers(upstreamed.proxy, repo, commit) == _answers(upstreamed.proxy, "owner/never-asked", never)
    for repo in commits:  # nor listed, nor its refs told
        with pytest.raises(RepositoryNotFoundError):
            api.list_repo_refs(repo)
    assert not {m.id for m in api.list_models(search="owner/")} & set(commits)
    log = upstreamed.log("proxy")
    for repo in commits:
        assert len(re.findall(rf"upstream: {repo}: .*refused here too", log)) == 1, log

    # made public again at the upstream: served again at the next check
    up.update_repo_settings("owner/private", private=False)
    time.sleep(FRESH + 0.2)
    assert api.model_info("owner/private").sha == commits["owner/private"]
    assert "owner/private" in {m.id for m in api.list_models(search="owner/")}
    assert "owner/private: the upstream gives it again" in upstreamed.log("proxy")


def test_a_repository_the_upstream_gates_is_refused_here_and_an_outage_leaves_what_was_fetched(
        upstreamed: Upstreamed, tmp_path: Path):
    up = HfApi(endpoint=upstreamed.upstream, token=UP_TOKEN)
    api = HfApi(endpoint=upstreamed.proxy, token=READER)
    gated, steady = upstreamed.publish("owner/gated"), upstreamed.publish("owner/steady")
    for repo, commit in (("owner/gated", gated), ("owner/steady", steady)):
        assert api.model_info(repo).sha == commit
        upstreamed.landed(repo, commit)
    up.update_repo_settings("owner/gated", gated="auto")
    time.sleep(FRESH + 0.2)
    with pytest.raises(GatedRepoError) as refused:
        api.hf_hub_download("owner/gated", "config.json", revision=gated, cache_dir=tmp_path / "g")
    assert "--upstream-allow-gated" in refused.value.response.headers["x-error-message"]
    # the upstream cut off: what was fetched is answered as last fetched, saying so
    down = upstreamed.counted.add(None, r"^/api/models/owner/steady/", server_error(503), times=None)
    try:
        answer = httpx.get(f"{upstreamed.proxy}/api/models/owner/steady", timeout=60)
        assert answer.status_code == 200 and answer.json()["sha"] == steady
        assert answer.headers["warning"].startswith("110 - ")
        got = api.hf_hub_download("owner/steady", "config.json", revision=steady, cache_dir=tmp_path / "s")
        assert Path(got).read_bytes() == b"{}"
    finally:
        down.times = down.applied


def test_one_client_asking_for_many_unknown_repositories_at_once_starts_a_bounded_number_of_fetches(
        upstreamed: Upstreamed):
    repos = [f"many/r{i:02d}" for i in range(40)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:  # made at the upstream at once
        list(pool.map(upstreamed.publish, repos))
    # the fetches started keep their listings on the way until every other ask was answered (all of
    # them in while those fetches run; 30 s at most)
    answered = threading.Event()
    slow = upstreamed.counted.add("GET", r"^/api/models/many/r\d+/tree/", delay(30, answered), times=None)
    pid = _serve_pid(upstreamed.root / "proxy")
    baseline, peak, asking = _threads(pid), [0], threading.Event()

    def ask(repo: str) -> httpx.Response:
        return httpx.get(f"{upstreamed.proxy}/api/models/{repo}/revision/main", timeout=120)

    def watch() -> None:
        while not asking.is_set():
            peak[0] = max(peak[0], _threads(pid))
            time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=40) as pool:
            asks = [pool.submit(ask, repo) for repo in repos]
            until = time.monotonic() + 30
            while sum(a.done() for a in asks) < len(repos) - PER_CLIENT and time.monotonic() < until:
                time.sleep(0.02)
            answered.set()
            answers = [a.result() for a in asks]
        time.sleep(1)  # the fetches started go on: their threads too
    finally:
        answered.set()
        asking.set()
        watcher.join()
        slow.times = slow.applied
    # serve's threads: the requests' pool (40 at most) and a thread and 4 file workers a fetch started
    assert peak[0] <= baseline + 40 + PER_CLIENT * 5 + 8, (baseline, peak)
    started = {r.path.split("/tree/")[0] for r in upstreamed.counted.requests
               if r.path.startswith("/api/models/many/") and "/tree/" in r.path}
    assert 1 <= len(started) <= PER_CLIENT, started
    busy = [a for a in answers if a.status_code == 503]
    assert len(busy) == len(repos) - len(started)
    assert {a.status_code for a in answers} == {200, 503}
    for answer in busy:  # the Hub's error form, with when to ask again
        assert int(answer.headers["retry-after"]) > 0
        assert "--upstream-max-fetches-per-client" in answer.headers["x-error-message"]
        assert "--upstream-max-fetches-per-client" in answer.json()["error"]


@pytest.mark.parametrize("spellings", [
    ("Bearer " + READER, "bearer " + READER, "BEARER  " + READER),  # one token, spelled three ways
    ("Basic YTpi", "Basic Yzpk", "Token e"),  # read as no token (the anonymous line's): the address's
], ids=["one-token", "no-token"])
def test_a_client_is_not_a_new_one_for_each_way_it_writes_its_authorization(upstreamed: Upstreamed,
                                                                            spellings: tuple[str, ...]):
    which = "token" if spellings[0].startswith("Bearer") else "none"
    repos = [f"spelled-{which}/r{i}" for i in range(len(spellings))]
    commits = [upstreamed.publish(repo) for repo in repos]
    listed = threading.Event()  # the fetches started hold their listings until every ask was answered
    slow = upstreamed.counted.add("GET", rf"^/api/models/spelled-{which}/r\d/tree/", delay(30, listed), times=None)
    try:
        with concurrent.futures.ThreadPoolExecutor(len(repos)) as pool:
            asks = [pool.submit(httpx.get, f"{upstreamed.proxy}/api/models/{repo}/revision/main",
                                headers={"Authorization": said}, timeout=120)
                    for repo, said in zip(repos, spellings, strict=True)]
            concurrent.futures.wait(asks, timeout=30, return_when=concurrent.futures.FIRST_COMPLETED)
            listed.set()
            answers = [a.result() for a in asks]
    finally:
        listed.set()
        slow.times = slow.applied
    busy = [a for a in answers if a.status_code == 503]
    assert len(busy) == len(spellings) - PER_CLIENT, [(a.status_code, a.text[:200]) for a in answers]
    assert "--upstream-max-fetches-per-client" in busy[0].headers["x-error-message"]
    for repo, commit, answer in zip(repos, commits, answers, strict=True):  # the others' places free again
        if answer.status_code == 200:
            upstreamed.landed(repo, commit)


def _serve_pid(root: Path) -> int:
    """The serve process whose token file is under ``root``."""
    wanted = str(root / "tokens.txt").encode()
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and wanted in (entry / "cmdline").read_bytes().split(b"\0"):
                return int(entry.name)
        except OSError:
            continue
    raise AssertionError(f"no serve process over {root}")


def _threads(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"^Threads:\s+(\d+)", status, re.MULTILINE).group(1))  # type: ignore[union-attr]


def test_an_upstream_that_wants_a_token_serve_was_not_given_is_unavailable_and_the_log_says_why(
        upstreamed: Upstreamed):
    upstreamed.publish("owner/wants-token")
    for _ in range(2):
        answer = httpx.get(f"{upstreamed.tokenless}/api/models/owner/wants-token")
        assert answer.status_code == 503, (answer.status_code, answer.text)
        assert int(answer.headers["retry-after"]) > 0
        assert "--upstream-token-file" in answer.headers["x-error-message"]
    with pytest.raises(huggingface_hub.errors.HfHubHTTPError) as unavailable:
        HfApi(endpoint=upstreamed.tokenless, token=False).model_info("owner/wants-token")
    assert unavailable.value.response.status_code == 503
    said = [line for line in upstreamed.log("tokenless").splitlines() if "answered 401 and no token was sent" in line]
    assert len(said) == 1, said


def test_the_bound_over_all_clients_holds_and_a_fetch_that_ends_frees_its_place():
    from ocibridge.hubserver.upstream.fetchbounds import FetchBounds, FetchesBusy

    bounds = FetchBounds(most=3, per_client=2)
    first = bounds.admit("address:a", "a/1")
    bounds.admit("address:a", "a/2")
    with pytest.raises(FetchesBusy, match=r"\(--upstream-max-fetches-per-client\)"):
        bounds.admit("address:a", "a/3")
    bounds.admit("token:b", "b/1")
    with pytest.raises(FetchesBusy, match=r"\(--upstream-max-fetches\)"):
        bounds.admit("token:c", "c/1")
    first()
    first()  # ended once: a second call frees nothing more
    bounds.admit("token:c", "c/1")
    with pytest.raises(FetchesBusy, match=r"\(--upstream-max-fetches\)"):
        bounds.admit("address:a", "a/3")
    assert FetchesBusy.retry_after > 0


def test_the_fetch_bounds_are_flags_of_serve_and_k8s_serve_checked_as_serve_checks_them():
    from ocibridge.api.k8s_types import K8sServeOptions
    from ocibridge.errors import UsageError

    flags = K8sServeOptions(upstream_max_fetches=8, upstream_max_fetches_per_client=1).upstream_policy_flags()
    assert flags == ("--upstream-max-fetches", "8", "--upstream-max-fetches-per-client", "1")
    assert K8sServeOptions().upstream_policy_flags() == ()
    with pytest.raises(UsageError, match="--upstream-max-fetches-per-client 0: expected a number of fetches"):
        K8sServeOptions(upstream_max_fetches_per_client=0).upstream_wanted("http://up", others_given=(),
                                                                           tokens=False, token_flag="--token-file")
    with pytest.raises(UsageError, match="go with --upstream URL"):
        K8sServeOptions(upstream_max_fetches=2).upstream_wanted(None, others_given=(), tokens=False,
                                                                token_flag="--token-file")


def test_one_client_past_its_upstream_asks_is_the_hubs_429_from_serve_and_another_still_asks(
        upstreamed: Upstreamed):
    def asked(name: str) -> int:
        return len(upstreamed.counted.requests_matching("GET", f"^/api/models/askers/{name}/"))

    reader = {"Authorization": f"Bearer {READER}"}
    for i in range(ASKS):  # misses (at neither serve nor the upstream): each one ask of the upstream
        miss = httpx.get(f"{upstreamed.asking}/api/models/askers/r{i}", headers=reader, timeout=60)
        assert miss.status_code == 404 and asked(f"r{i}") == 1, (miss.status_code, miss.text[:300])
    spent = httpx.get(f"{upstreamed.asking}/api/models/askers/r{ASKS}", headers=reader, timeout=60)
    assert spent.status_code == 429, (spent.status_code, spent.text[:300])
    assert int(spent.headers["retry-after"]) >= 1
    assert "--upstream-asks-per-client" in spent.headers["x-error-message"]
    assert asked(f"r{ASKS}") == 0  # serve answered it: the upstream was not asked
    # another client (no token: its address) in the same second: its own budget, the upstream asked
    other = httpx.get(f"{upstreamed.asking}/api/models/askers/other", timeout=60)
    assert asked("other") == 1 and other.status_code == 401, (other.status_code, other.text[:300])  # the Hub's
    # "not found" to a client without a token


def test_a_spent_budget_answers_a_private_upstream_repository_as_a_name_at_neither(upstreamed: Upstreamed):
    """Past its asks a client is answered the same 429 for a private upstream repository it may not
    see as for a name at neither: the ask is charged before the upstream says which it is, so a
    client that spends its budget learns nothing of what exists."""
    up = HfApi(endpoint=upstreamed.upstream, token=UP_TOKEN)
    up.create_repo("hidden/secret", private=True)
    up.upload_file(path_or_fileobj=b"{}", path_in_repo="config.json", repo_id="hidden/secret")
    prober = {"Authorization": f"Bearer {PROBER}"}

    def said(repo: str, *paths: str) -> list[tuple[int, str, str]]:
        answers = [httpx.get(f"{upstreamed.asking}{path.format(repo=repo)}", headers=prober, timeout=60)
                   for path in paths]
        return [(a.status_code, a.headers.get("x-error-code", ""),
                 a.headers.get("x-error-message", "").replace(repo, "REPO")) for a in answers]

    info, resolve = "/api/models/{repo}", "/{repo}/resolve/main/config.json"
    first = said("hidden/secret", info), said("probers/r0", info)  # with asks left (ASKS 2): one each
    assert first[0] == first[1] and first[0][0][0] == 404, first  # the same "not found"
    for i in range(ASKS + 1):  # what is left of its asks spent on names at neither
        spent = httpx.get(f"{upstreamed.asking}/api/models/probers/spend{i}", headers=prober, timeout=60)
        if spent.status_code == 429:
            break
        assert spent.status_code == 404, (spent.status_code, spent.text[:300])
    assert spent.status_code == 429, (spent.status_code, spent.text[:300])
    asked = len(upstreamed.counted.requests_matching("GET", "^/api/models/hidden/secret"))
    hidden, nowhere = said("hidden/secret", info, resolve), said("probers/r1", info, resolve)
    assert hidden == nowhere and {status for status, _, _ in hidden} == {429}, (hidden, nowhere)
    assert len(upstreamed.counted.requests_matching("GET", "^/api/models/hidden/secret")) == asked  # not asked


def test_the_asks_budget_refills_at_its_rate_and_its_flag_is_checked_as_serve_checks_it():
    from ocibridge.api.serve import ServeOptions, check_serve_options
    from ocibridge.errors import UsageError
    from ocibridge.hubserver.upstream.askbudget import AskBudgets, AsksSpent, parse_ask_rate

    now = [0.0]
    rate = parse_ask_rate("2/min")
    assert rate is not None and str(rate) == "2/min" and parse_ask_rate("off") is None
    budgets = AskBudgets(rate, clock=lambda: now[0])
    budgets.take("address:a", "a/1")
    budgets.take("address:a", "a/2")
    with pytest.raises(AsksSpent, match=r"2/min already \(--upstream-asks-per-client\)") as spent:
        budgets.take("address:a", "a/3")
    assert spent.value.retry_after == 30  # one ask back after half a minute
    budgets.take("token:b", "b/1")  # another client: its own bucket
    budgets.take("", "serve's own")  # no client: not counted
    now[0] = 30.0
    budgets.take("address:a", "a/3")
    with pytest.raises(AsksSpent):
        budgets.take("address:a", "a/4")
    for bad in ("60", "0/min", "x/min", "5/fortnight", "-1/s"):
        with pytest.raises(UsageError, match=f"--upstream-asks-per-client {bad}: expected asks per period"):
            parse_ask_rate(bad)
    with pytest.raises(UsageError, match="--upstream-asks-per-client goes with --upstream"):
        check_serve_options(ServeOptions(upstream_asks_per_client="5/s"))


def test_the_asks_budgets_keep_a_bounded_number_of_clients_the_least_recently_seen_forgotten(monkeypatch):
    from ocibridge.hubserver.upstream import askbudget

    monkeypatch.setattr(askbudget, "MOST_CLIENTS", 3)
    rate = askbudget.parse_ask_rate("1/h")  # no bucket refills within the test: none is full again
    assert rate is not None
    budgets = askbudget.AskBudgets(rate, clock=lambda: 0.0)
    budgets.take("address:spender", "a/1")
    for n in range(50):  # a client changing addresses: each a new bucket, spent at once
        budgets.take(f"address:10.0.0.{n}", "b/1")
        with pytest.raises(askbudget.AsksSpent):  # the spender, seen again, is the most recent: kept spent
            budgets.take("address:spender", "a/2")
    assert len(budgets) == 3
