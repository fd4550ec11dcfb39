"""A registry that misbehaves on purpose (issue 13, classes 4 and 5): bodies without bounds, odd
header values, unparsable realms, stacked encodings. Each answer ends in one error line and exit 1,
never a traceback, and nothing is held in memory beyond the cap."""

from __future__ import annotations

import gzip
import http.server
import os
import subprocess
import sys
from collections.abc import Callable, Iterator

import pytest
from support.tiny_http import Answer, TinyServer, send

from ocibridge.core.httpheaders import header_int


class HostileRegistry(TinyServer):
    """A loopback HTTP server answering /v2/ with 200 and everything else with ``answer``."""

    def __init__(self, answer: Answer) -> None:
        self.paths: list[str] = []

        def route(handler: http.server.BaseHTTPRequestHandler) -> None:
            self.paths.append(handler.path)
            if handler.path == "/v2/":
                send(handler, 200, b"")
            else:
                answer(handler)

        super().__init__(route)


@pytest.fixture
def hostile() -> Iterator[Callable[[Answer], HostileRegistry]]:
    servers: list[HostileRegistry] = []

    def start(answer: Answer) -> HostileRegistry:
        servers.append(HostileRegistry(answer))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def ocibridge(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    proc = subprocess.run([sys.executable, "-m", "ocibridge", *args], capture_output=True, text=True,
                          timeout=60, env={**os.environ, **(env or {})})
    return proc.returncode, proc.stdout, proc.stderr


def _one_error_line(code: int, err: str) -> str:
    assert code == 1, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ocibridge: error: "), err
    return lines[0]


def test_a_tag_list_larger_than_the_cap_is_refused(hostile) -> None:
    tags = b'{"name":"m","tags":[' + b",".join(b'"t%06d"' % i for i in range(200_000)) + b"]}"
    server = hostile(lambda h: send(h, 200, tags, {"Content-Type": "application/json"}))
    code, _, err = ocibridge("tags", f"{server.host}/m", env={"OCIBRIDGE_MAX_RESPONSE_BYTES": "1048576"})
    line = _one_error_line(code, err)
    assert "answer larger than 1048576 bytes, refused" in line and "OCIBRIDGE_MAX_RESPONSE_BYTES" in line
    code, out, err = ocibridge("tags", f"{server.host}/m")  # the default cap (16 MiB) takes it
    assert code == 0 and len(out.splitlines()) == 200_000


def test_a_gzip_bomb_is_capped_by_its_decoded_size(hostile) -> None:
    bomb = gzip.compress(b"\0" * (64 << 20), compresslevel=9)  # 64 MiB of zeros in ~64 KiB
    assert len(bomb) < 100_000
    server = hostile(lambda h: send(h, 200, bomb, {"Content-Type": "application/json", "Content-Encoding": "gzip"}))
    code, _, err = ocibridge("tags", f"{server.host}/m")
    assert "answer larger than 16777216 bytes, refused" in _one_error_line(code, err)


def test_an_error_body_without_bounds_is_capped(hostile) -> None:
    # Retry-After: 0: the client's 5 retries of the 500 (each body capped) without its backoff's ~8 s
    server = hostile(lambda h: send(h, 500, b"x" * (3 << 20), {"Retry-After": "0"}))
    code, _, err = ocibridge("tags", f"{server.host}/m", env={"OCIBRIDGE_MAX_RESPONSE_BYTES": "1048576"})
    assert "larger than 1048576 bytes" in _one_error_line(code, err)


@pytest.mark.parametrize("realm", ["http://[::1", "ftp://auth.example/token", "no scheme at all", ""])
def test_a_realm_that_does_not_parse_is_one_line(hostile, realm: str) -> None:
    challenge = f'Bearer realm="{realm}",service="x"'
    server = hostile(lambda h: send(h, 401, b"{}", {"WWW-Authenticate": challenge}))
    code, _, err = ocibridge("tags", f"{server.host}/m")
    assert "is not an http(s) URL" in _one_error_line(code, err)


def test_400_stacked_content_encodings_are_one_line(hostile) -> None:
    server = hostile(lambda h: send(h, 200, b"not gzip at all", {"Content-Encoding": ", ".join(["gzip"] * 400)}))
    code, _, err = ocibridge("tags", f"{server.host}/m")
    _one_error_line(code, err)


@pytest.mark.parametrize("value", ["\u00b2", "\u00b9\u00b2", "1e3", "-5", "+3", "99999999999999999999999"])
def test_header_numbers_are_ascii_digits_only(value: str) -> None:
    assert header_int(value) is None


def test_header_numbers_parse_what_rfc_9110_writes() -> None:
    assert header_int(" 42 ") == 42 and header_int("0") == 0 and header_int(None) is None


def test_retry_after_in_superscript_digits_is_ignored_not_a_crash(hostile) -> None:
    answers = iter([429, 404])

    def answer(h: http.server.BaseHTTPRequestHandler) -> None:
        send(h, next(answers, 404), b"", {"Retry-After": "\u00b2"})

    server = hostile(answer)
    code, _, err = ocibridge("tags", f"{server.host}/m")
    line = _one_error_line(code, err)
    assert "no such repository" in line  # the 404 after the ignored Retry-After, said as such


def test_a_newline_in_a_registry_error_message_prints_no_line_of_its_own(hostile) -> None:
    """A server's error text could otherwise forge a line ('pulled ... into DIR') after ours."""
    body = b'{"errors":[{"code":"DENIED","message":"no\\npulled sha256:0 into /home: 1 files"}]}'
    server = hostile(lambda h: send(h, 403, body, {"Content-Type": "application/json"}))
    code, _, err = ocibridge("tags", f"{server.host}/m")
    line = _one_error_line(code, err)
    assert "DENIED: no pulled sha256:0 into /home: 1 files" in line
