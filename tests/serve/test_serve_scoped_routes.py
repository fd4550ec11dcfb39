"""Who sees what, against serve as a process over the real registry (issue 61): a token read
scoped to ``acme`` sees ``acme`` and ``acme/...`` only, on every route of serve's route table
(walked, so a route added later cannot forget) and every page, and in every listing; a
repository outside its scope is answered exactly as a missing one. The token file is re-read
without a restart (a removed token and its page cookie stop within 10 s)."""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.routing import Match, Route
from test_serve_hostile import serve_process as hostile_serve

from ocibridge.cli import main
from tests.modelgen import make_bert_model
from tests.support.fixtures import new_repo

#: reader reads acme (and acme/...); writer writes (and reads) acme/; everyone reads all
TOKENS = "reader read acme reader\nwriter write acme/ writer\neveryone read * everyone\n"
IN, OUT, MISSING = ("acme/m", "acme"), ("secret/m", "secret"), ("secret/none", "nothere")


@dataclass
class Scoped:
    url: str
    prefix: str
    tokens: Path
    audit: Path
    routes: list[Route]
    client: httpx.Client | None = None  # the route walk's


@contextlib.contextmanager
def serve_process(root: Path, prefix: str, tokens: Path, *extra: str) -> Iterator[str]:
    """``ocibridge serve PREFIX --token-file TOKENS EXTRA`` as a process (test_serve_hostile's); its URL."""
    with hostile_serve(root, prefix, "--token-file", str(tokens), *extra) as (served, _):
        yield served.url


@pytest.fixture(scope="module")
def scoped(registry: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scoped]:
    root = tmp_path_factory.mktemp("scoped")
    prefix = f"{registry.host}/{new_repo('scoped')}"
    for repo in ("acme/m", "acme", "acme-evil/m", "secret/m", "secret"):
        model = make_bert_model(root / "models" / repo.replace("/", "_"))
        assert main(["push", str(model), f"{prefix}/{repo}:latest", "-q"]) == 0
    for repo in ("acme/m", "acme", "secret/m", "secret"):  # datasets of the same names, at their registry path
        files = make_bert_model(root / "datasets" / repo.replace("/", "_"))
        assert main(["push", str(files), f"{prefix}/datasets/{repo}:latest", "-q"]) == 0
    tokens = root / "tokens.txt"
    tokens.write_text(TOKENS)
    audit = root / "audit.jsonl"
    from ocibridge.api.serve import ServeOptions, create_app

    app = create_app(prefix, options=ServeOptions(tokens=tuple(TOKENS.splitlines())))
    try:
        routes = [r for r in app.routes if isinstance(r, Route)]
    finally:
        app.state.serve.close()
    with serve_process(root, prefix, tokens, "--audit-log", str(audit)) as url:
        yield Scoped(url, prefix, tokens, audit, routes)


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def login(url: str, token: str) -> httpx.Cookies:
    answer = httpx.post(f"{url}/ocibridge/login", data={"token": token, "next": "/"})
    assert answer.status_code == 303, answer.text
    return answer.cookies


#: a value for each path parameter of a route (a repo's org and name are the case's)
FILL = {"revision": "main", "path": "config.json", "kind": "branch", "ref": "dev", "spec": "main...main",
        "commit": "0" * 40, "version": "v1", "file_id": "0" * 64, "sha256": "0" * 64, "size": "1", "k": "0",
        "prefix": "default", "hash": "0" * 64, "rest": "x/y", "branch": "main",
        "status": "pending"}
#: the word after a repo id that only the catch-all route takes (GET: no route of that word reads)
VERB = "commit"


def concrete(route: Route, repo: tuple[str, str], kind: str = "models") -> str | None:
    """The route's path for the repository (ORG/NAME routes the first, NAME routes the second),
    a model's or (``kind``) a dataset's: a route of datasets' paths takes datasets only."""
    two = "{org:" in route.path
    org, name = (repo[0].split("/") if two else ("", repo[1]))
    kind = "datasets" if ":hub_dataset}" in route.path else kind
    values = {**FILL, "org": org, "name": name, "verb": VERB, "repo_type": kind}
    if "/tree/" in route.path:
        values["path"] = "extra"  # a directory of make_bert_model's
    return re.sub(r"{(\w+)(:[\w]+)?}", lambda m: values[m.group(1)], route.path)


def first_match(routes: list[Route], method: str, path: str) -> Route | None:
    for route in routes:
        scope = {"type": "http", "method": method, "path": path, "root_path": "", "query_string": b"", "headers": []}
        if route.matches(scope)[0] is Match.FULL:
            return route
    return None


def repo_routes(routes: list[Route]) -> list[tuple[Route, str]]:
    """Every route of the table that names a repository, with the method it is asked with."""
    found = []
    for route in routes:
        if "{name:" not in route.path:
            continue
        methods = sorted(route.methods or ())
        found.append((route, "GET" if "GET" in methods else methods[0]))
    return found


def ask(s: Scoped, route: Route, method: str, repo: tuple[str, str], token: str,
        cookies: httpx.Cookies, kind: str = "models") -> httpx.Response:
    """The route asked for the repository with ``token`` and the page cookie ``cookies`` alone
    (by the walk's one client: its connection kept for the hundreds of questions asked)."""
    path = concrete(route, repo, kind)
    assert path is not None
    assert first_match(s.routes, method, path) is route, f"{method} {path} is not {route.path}'s"
    body = b'{"paths": ["config.json"]}' if method == "POST" else None
    headers = {**auth(token), "content-type": "application/json"}
    assert s.client is not None
    s.client.cookies = cookies  # what an answer set is forgotten: each question carries the login's cookie
    return s.client.request(method, s.url + path, content=body, headers=headers, timeout=60)


GRANTED = ("/xet/", "/xet-write/")  # their own grants (a Xet token, a signed URL): no bearer token is read


def same(a: httpx.Response, b: httpx.Response, names: tuple[tuple[str, str], tuple[str, str]]) -> bool:
    """Two answers alike but for the repository each names."""
    def shown(r: httpx.Response, repo: tuple[str, str]) -> tuple[int, str | None, str]:
        return r.status_code, r.headers.get("x-error-code"), r.text.replace(repo[0], "REPO").replace(repo[1], "REPO")

    return shown(a, names[0]) == shown(b, names[1])


def test_every_route_and_page_hides_what_a_token_may_not_read(scoped):
    s = scoped
    walked = repo_routes(s.routes)
    assert len(walked) > 40  # the API's, Xet's, the pages'
    reader, everyone = login(s.url, "reader"), login(s.url, "everyone")
    with httpx.Client() as s.client:
        walk_every_route(s, walked, reader, everyone)


def walk_every_route(s: Scoped, walked: list[tuple[Route, str]], reader: httpx.Cookies,
                     everyone: httpx.Cookies) -> None:
    assert sum(":hub_dataset}" in route.path for route, _ in walked) > 10  # datasets' file, Xet and page routes
    # the API's routes are walked for models and for datasets (/api/models/..., /api/datasets/...)
    cases = [(route, method, kind) for route, method in walked
             for kind in (("models", "datasets") if ":hub_api_type}" in route.path else ("models",))]
    for route, method, kind in cases:
        where = f"{method} {route.path} ({kind})"
        inside = ask(s, route, method, IN, "reader", reader, kind)
        outside = ask(s, route, method, OUT, "reader", reader, kind)
        if route.path.startswith(GRANTED):
            assert outside.status_code in (401, 403, 404), where  # no grant: nobody's bytes
            continue
        assert outside.status_code == 404, (where, outside.status_code, outside.text[:200])
        assert inside.headers.get("x-error-code") != "RepoNotFound", (where, inside.text[:200])
        # out of scope, held or not, answer alike: existence does not leak
        nothing = ask(s, route, method, MISSING, "reader", reader, kind)
        assert same(outside, nothing, (OUT, MISSING)), (where, outside.text[:200], nothing.text[:200])
        if method != "GET" or re.search(r"{(verb|rest):", route.path) or "xet-write-token" in route.path \
                or route.path.endswith("/auth-check/write") or "/user-access-request/" in route.path:
            # a write's question (an owner's: the access requests' lists): a reader is refused
            continue
        if route.path.endswith(("/resolve/{revision:hub_part}", "/raw/{revision:hub_part}")):  # no path: EntryNotFound
            assert inside.headers.get("x-error-code") == "EntryNotFound", where
        else:
            assert inside.status_code == 200, (where, inside.status_code, inside.text[:200])
        # a read of a hidden repository is answered as one of a repository no source holds
        missing = ask(s, route, method, MISSING, "everyone", everyone, kind)
        assert same(outside, missing, (OUT, MISSING)), (where, outside.text[:200], missing.text[:200])


def test_listings_show_only_what_a_token_reads(scoped):
    s = scoped
    listed = httpx.get(f"{s.url}/api/models", headers=auth("reader")).json()
    assert sorted(m["id"] for m in listed) == ["acme", "acme/m"]
    searched = httpx.get(f"{s.url}/api/models?search=m", headers=auth("reader")).json()
    assert sorted(m["id"] for m in searched) == ["acme", "acme/m"]
    everything = httpx.get(f"{s.url}/api/models", headers=auth("everyone")).json()
    assert {"secret/m", "acme-evil/m"} <= {m["id"] for m in everything}
    catalog = httpx.get(f"{s.url}/models?search=e", cookies=login(s.url, "reader")).text
    assert "acme/m" in catalog and "secret" not in catalog and "acme-evil" not in catalog
    assert "2 models matching" in catalog  # the others are not counted either
    assert "5 models" in httpx.get(f"{s.url}/models", cookies=login(s.url, "everyone")).text
    # datasets: their own listing, by the ids the Hub shows, under the same scopes
    datasets = httpx.get(f"{s.url}/api/datasets", headers=auth("reader")).json()
    assert sorted(d["id"] for d in datasets) == ["acme", "acme/m"] and "modelId" not in datasets[0]
    every = httpx.get(f"{s.url}/api/datasets", headers=auth("everyone")).json()
    assert sorted(d["id"] for d in every) == ["acme", "acme/m", "secret", "secret/m"]
    page = httpx.get(f"{s.url}/datasets", cookies=login(s.url, "everyone")).text
    assert "4 datasets" in page and 'href="/datasets/secret/m"' in page


@pytest.mark.parametrize("revision", ["a..b", "ocibridge-commit-x", "x%7E1"], ids=["dots", "bookkeeping", "tilde"])
def test_a_revision_no_ref_may_be_named_tells_no_more_of_a_hidden_repository_than_main_does(scoped, revision: str):
    """A name no ref can have (git's rules, serve's own tags) is answered for a repository no source
    holds as any revision is (not found, the repository), as it is for one the reader may not read:
    a "no revision" there would tell the hidden one from the missing one."""
    s = scoped
    for route in ("/api/models/{r}/revision/{v}", "/api/models/{r}/tree/{v}", "/{r}/resolve/{v}/config.json"):
        hidden = httpx.get(s.url + route.format(r=OUT[0], v=revision), headers=auth("reader"))
        missing = httpx.get(s.url + route.format(r=MISSING[0], v=revision), headers=auth("everyone"))
        assert same(hidden, missing, (OUT, MISSING)), (route, hidden.text[:200], missing.text[:200])
        assert missing.headers.get("x-error-code") == "RepoNotFound", (route, missing.text[:200])
        held = httpx.get(s.url + route.format(r=OUT[0], v=revision), headers=auth("everyone"))
        assert held.headers.get("x-error-code") == "RevisionNotFound", (route, held.text[:200])  # a name it lacks


def test_a_prefix_without_a_slash_is_no_prefix_of_a_longer_org(scoped):
    """Issue 62's red-team line: ``acme`` reads acme/m, never acme-evil/m (404, as missing)."""
    s = scoped
    assert httpx.get(f"{s.url}/api/models/acme/m", headers=auth("reader")).status_code == 200
    evil = httpx.get(f"{s.url}/api/models/acme-evil/m", headers=auth("reader"))
    assert evil.status_code == 404 and evil.headers["x-error-code"] == "RepoNotFound"
    evil = httpx.get(f"{s.url}/api/models/acme-evil/m", headers=auth("writer"))
    assert evil.status_code == 404


def wait_for(check: Any, what: str, seconds: float = 120) -> None:
    """Until ``check()`` holds (fails after ``seconds``, naming ``what`` was never seen: a bound for
    a change never seen, not a speed: the file is looked at every second)."""
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"never seen: {what}"
        time.sleep(0.2)


def test_the_token_file_is_read_again_without_a_restart(scoped):
    s = scoped
    s.tokens.write_text(TOKENS + "leaving read acme/ leaving\n")

    def reads(token: str) -> int:
        return httpx.get(f"{s.url}/api/models/acme/m", headers=auth(token)).status_code

    wait_for(lambda: reads("leaving") == 200, "the added token read")
    cookie = login(s.url, "leaving")
    assert httpx.get(f"{s.url}/acme/m", cookies=cookie).status_code == 200
    tmp = s.tokens.with_suffix(".new")
    tmp.write_text(TOKENS)  # as an editor saves: a new file renamed over the old
    os.replace(tmp, s.tokens)
    wait_for(lambda: reads("leaving") == 401, "the removed token refused")
    page = httpx.get(f"{s.url}/acme/m", cookies=cookie)
    assert page.status_code == 303 and "/ocibridge/login" in page.headers["location"]  # its cookie ended too
    assert reads("reader") == 200  # the others never stopped
