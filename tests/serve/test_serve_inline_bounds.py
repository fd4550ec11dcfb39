"""Inline commit lines are bounded together (issue 85): every commit's base64 ``file`` lines
held at once come out of one budget ($OCIBRIDGE_SERVE_INLINE_BUDGET). 16 concurrent commits of
one 6 MiB file each (an 8 MiB line) against serve as a process over the real registry, started
with a 40 MiB budget: each lands or is refused with a 503 and Retry-After, serve's peak resident
memory grows by at most 96 MiB (the budget and 56 MiB of slack: 64 MiB measured; without the
budget every line was held at once: 187 MiB), and what it holds after is as bounded (40 MiB
measured, 109 MiB without). The budget's own
rules (first come first served, all of a reservation at once, refusal past its wait) are tried
directly."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from serve_processes import ServeProcess

from ocibridge.hubserver.writeroutes.inlinebudget import RETRY_AFTER, InlineBudget, InlineBusy

MIB = 1024 * 1024
BUDGET = 40 * MIB
COMMITS = 16
CONTENT = 6 * MIB
#: what serve's peak may grow by: the budget, and slack for publishing each commit's staged file
PEAK_GROWTH = BUDGET + 56 * MIB
AUTH = {"Authorization": "Bearer writer-token"}


@pytest.fixture(scope="module")
def served(registry, tmp_path_factory) -> Iterator[ServeProcess]:
    prefix = f"{registry.host}/p85/{uuid.uuid4().hex[:8]}"
    serve = ServeProcess(tmp_path_factory.mktemp("inline"), (prefix,),
                         env={"OCIBRIDGE_SERVE_INLINE_BUDGET": str(BUDGET)}).start()
    try:
        yield serve
    finally:
        serve.stop()
    assert "Traceback" not in serve.log.read_text(errors="replace")


def rss(serve: ServeProcess, field: str) -> int:
    assert serve.proc is not None
    for line in Path(f"/proc/{serve.proc.pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(field)


def commit_body(path: str, content: bytes) -> bytes:
    lines = ({"key": "header", "value": {"summary": f"add {path}"}},
             {"key": "file", "value": {"path": path, "encoding": "base64",
                                       "content": base64.b64encode(content).decode()}})
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def create(url: str, repo: str) -> None:
    org, name = repo.split("/")
    made = httpx.post(f"{url}/api/repos/create", json={"name": name, "organization": org}, headers=AUTH, timeout=60)
    assert made.status_code == 200, made.text


def test_concurrent_inline_commits_are_held_within_the_budget(served):
    url = served.url
    repos = [f"acme/inline-{i}" for i in range(COMMITS)]
    for repo in repos:
        create(url, repo)
    # one small commit first: serve's code paths are warm before the baseline is read
    warm = httpx.post(f"{url}/api/models/{repos[0]}/commit/main", content=commit_body("warm.txt", b"warm"),
                      headers=AUTH, timeout=60)
    assert warm.status_code == 200, warm.text
    before = rss(served, "VmHWM")
    bodies = {repo: commit_body("weights.bin", os.urandom(CONTENT)) for repo in repos}

    def send(repo: str) -> httpx.Response:
        return httpx.post(f"{url}/api/models/{repo}/commit/main", content=bodies[repo], headers=AUTH, timeout=120)

    with ThreadPoolExecutor(COMMITS) as pool:
        answers = list(pool.map(send, repos))
    peak = rss(served, "VmHWM")
    after = rss(served, "VmRSS")
    landed = [a for a in answers if a.status_code == 200]
    refused = [a for a in answers if a.status_code != 200]
    assert landed, [a.text for a in answers]
    for answer in refused:  # the documented refusal, nothing else
        assert answer.status_code == 503 and answer.headers["Retry-After"] == str(RETRY_AFTER), answer.text
    assert peak - before <= PEAK_GROWTH, (peak - before) / MIB
    assert after - before <= PEAK_GROWTH, (after - before) / MIB
    for answer, repo in zip(answers, repos, strict=True):
        if answer.status_code == 200:
            got = httpx.get(f"{url}/{repo}/resolve/main/weights.bin", headers=AUTH, timeout=60)
            assert got.status_code == 200 and len(got.content) == CONTENT


def test_the_budget_serves_in_order_all_at_once_and_refuses_past_its_wait():
    async def scenario() -> None:
        budget = InlineBudget(total=100, wait=0.3)
        assert await budget.take(60) == 60
        order: list[str] = []

        async def ask(name: str, size: int) -> None:
            await budget.take(size)
            order.append(name)

        big = asyncio.create_task(ask("big", 70))  # does not fit beside the 60 held: waits its turn
        await asyncio.sleep(0.05)
        small = asyncio.create_task(ask("small", 10))  # would fit, but comes after big
        await asyncio.sleep(0.05)
        assert order == [] and budget.held == 60
        budget.give(60)
        await asyncio.gather(big, small)
        assert order == ["big", "small"] and budget.held == 80
        with pytest.raises(InlineBusy, match="retry in"):
            await budget.take(50)  # 20 free, for 0.3 s: refused, holding nothing
        assert budget.held == 80
        budget.give(80)
        assert await budget.take(500) == 100  # more than the whole budget: the whole budget

    asyncio.run(scenario())
