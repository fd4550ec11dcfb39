"""Regular and LFS files as the Hub tells them apart (issue 75): a commit carries small files
inline, a line at a time; serve in-process (tests/serving.py) over the real registry, writing
commits as ``ocibridge serve`` does."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from serving import Served, serving
from test_serve_hostile import send_until_refused, status_of

from ocibridge.hubserver.writes.publishing import Publishing

MIB = 1024 * 1024
TOKENS = ("writer write * ci-bot", "reader")
WRITE = {"Authorization": "Bearer writer"}
READ = {"Authorization": "Bearer reader"}


def line(key: str, value: Any) -> bytes:
    return json.dumps({"key": key, "value": value}).encode() + b"\n"


def inline(path: str, data: bytes) -> bytes:
    return line("file", {"path": path, "content": base64.b64encode(data).decode(), "encoding": "base64"})


def commit(s: Served, body: bytes, repo: str = "acme/m") -> httpx.Response:
    return httpx.post(f"{s.url}/api/models/{repo}/commit/main", content=line("header", {"summary": "kinds"}) + body,
                      headers=WRITE, timeout=120)


def resolve(s: Served, path: str, repo: str = "acme/m") -> httpx.Response:
    return httpx.get(f"{s.url}/{repo}/resolve/main/{path}", headers=READ, timeout=60)


@pytest.fixture
def served(registry: Any, unique_repo: str) -> Iterator[Served]:
    with serving([f"{registry.host}/{unique_repo}"], tokens=TOKENS, publish=Publishing()) as s:
        made = httpx.post(f"{s.url}/api/repos/create", json={"name": "m", "organization": "acme"}, headers=WRITE)
        assert made.status_code == 200, made.text
        yield s


def test_a_commit_carries_files_inline_past_two_mib(served):
    """A commit's body is read a line at a time, each inline file staged as it comes: one of
    9 MiB and one of 5 MiB in a 19 MiB body land (the 2 MiB every other body may be was 413)."""
    big, other = b"a" * 9 * MIB + b"\n", os.urandom(5 * MIB)
    answer = commit(served, inline("big.txt", big) + inline("sub/other.bin", other))
    assert answer.status_code == 200, answer.text
    assert resolve(served, "big.txt").content == big
    assert resolve(served, "sub/other.bin").content == other


def test_a_commit_line_past_its_limit_is_refused_without_reading_the_rest(served):
    """One line of a commit is at most 16 MiB (a 10 MiB file in base64 and its path): a longer
    one is a 400 once 16 MiB of it came, the rest of the body never read; nothing is committed."""
    from ocibridge.hubserver.writes.commits import LINE_MAX

    assert commit(served, inline("a.txt", b"a\n")).status_code == 200
    port = int(served.url.rsplit(":", 1)[1])
    head = (b"POST /api/models/acme/m/commit/main HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer writer\r\n"
            b"Content-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n")
    start = line("header", {"summary": "endless"}) + b'{"key": "file", "value": {"path": "b.txt", "content": "'
    chunk = b"%x\r\n%s\r\n" % (MIB, b"Q" * MIB)
    sent, answer = send_until_refused(port, head + b"%x\r\n%s\r\n" % (len(start), start), chunk, 1024 * MIB)
    assert status_of(answer) == 400 and b"longer than" in answer, answer[:300]
    assert sent < LINE_MAX + 64 * MIB  # what the kernel's buffers hold besides
    tree = httpx.get(f"{served.url}/api/models/acme/m/tree/main", headers=READ).json()
    assert [e["path"] for e in tree] == ["a.txt"]


def test_a_commit_of_more_operations_than_the_hub_takes_is_refused(served):
    from ocibridge.hubserver.writes.commits import OPERATIONS_MAX

    many = b"".join(line("deletedFile", {"path": f"f{n}.txt"}) for n in range(OPERATIONS_MAX + 1))
    answer = commit(served, inline("a.txt", b"a\n") + many)
    assert answer.status_code == 400 and f"at most {OPERATIONS_MAX} operations" in answer.json()["error"]
