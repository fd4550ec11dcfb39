"""Error, redirect and retried answers are read only as far as their reason (issue 13 class 4).

The bodies of a 404, a 5xx or a redirect used to be read whole by httpx, decoded a network chunk
at a time: a half-megabyte gzip behind a 404 held 1 GiB, a retried 503 several. A gzip inside a
gzip expands ~1000 x 1000 in one decode call. These tests measure the peak of Python allocations
(tracemalloc) while the hostile answer is read.
"""

from __future__ import annotations

import gzip
import tracemalloc
import zlib
from collections.abc import Callable

import httpx
import pytest

from ocibridge.errors import RegistryError
from ocibridge.stores.registry.bodies import ERROR_BODY_BYTES, read_bounded, read_prefix
from tests.hostile import test_hostile_servers as _servers
from tests.hostile.test_hostile_servers import _one_error_line, ocibridge
from tests.support.tiny_http import send as _send

hostile = _servers.hostile  # the loopback misbehaving-registry fixture, shared

DIGEST = "sha256:" + "a" * 64


def _zeros_gzip(decoded: int) -> bytes:
    """gzip of ``decoded`` zero bytes, built without holding them."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b"\0" * (1 << 20)
    parts = [z.compress(block) for _ in range(decoded >> 20)]
    return b"".join([*parts, z.flush()])


# 256 MiB inside gzip inside gzip: a few hundred bytes on the wire
NESTED_BOMB = gzip.compress(_zeros_gzip(256 << 20), compresslevel=9)


def _peak_while(read: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        read()
    except RegistryError:
        pass
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


def _streamed(host: str) -> httpx.Response:
    client = httpx.Client()
    return client.send(client.build_request("GET", f"http://{host}/v2/m/tags/list"), stream=True)


@pytest.mark.parametrize("reader", ["prefix", "bounded"])
def test_a_nested_gzip_bomb_never_expands_in_memory(hostile, reader: str) -> None:
    assert len(NESTED_BOMB) < 2_000
    server = hostile(lambda h: _send(h, 404, NESTED_BOMB, {"Content-Encoding": "gzip, gzip"}))
    response = _streamed(server.host)
    if reader == "prefix":
        peak = _peak_while(lambda: read_prefix(response))
        assert response.content == b"\0" * ERROR_BODY_BYTES
    else:
        peak = _peak_while(lambda: read_bounded(response, "tags", limit=1 << 20))
    assert peak < 8 << 20, peak


def _manifest_head(h) -> None:
    """A HEAD of the tag answered as a registry would: a manifest of DIGEST."""
    h.send_response(200)
    h.send_header("Content-Length", "100")
    h.send_header("Content-Type", "application/vnd.oci.image.manifest.v1+json")
    h.send_header("Docker-Content-Digest", DIGEST)
    h.end_headers()


def test_a_404_manifest_with_a_bomb_is_one_line(hostile) -> None:
    def answer(h) -> None:
        if h.command == "HEAD":  # the tag resolves; the GET of the manifest is the hostile one
            _manifest_head(h)
            return
        _send(h, 404, NESTED_BOMB, {"Content-Encoding": "gzip, gzip"})

    server = hostile(answer)
    code, _, err = ocibridge("inspect", f"{server.host}/m:v1")
    assert _one_error_line(code, err) == f"ocibridge: error: {server.host}/m: manifest {DIGEST} not found"


def test_a_body_that_does_not_decode_is_a_decoding_error(hostile) -> None:
    server = hostile(lambda h: _send(h, 500, b"not gzip", {"Content-Encoding": "gzip"}))
    response = _streamed(server.host)
    assert read_prefix(response) == b""
    response = _streamed(server.host)
    with pytest.raises(httpx.DecodingError):
        read_bounded(response, "tags")


def test_a_manifest_that_is_a_nested_gzip_bomb_is_refused_at_the_manifest_cap(hostile) -> None:
    def answer(h) -> None:
        if h.command == "HEAD":
            _manifest_head(h)
            return
        _send(h, 200, NESTED_BOMB, {"Content-Encoding": "gzip, gzip",
                                    "Content-Type": "application/vnd.oci.image.manifest.v1+json"})

    server = hostile(answer)
    code, _, err = ocibridge("inspect", f"{server.host}/m:v1")
    assert _one_error_line(code, err) == f"ocibridge: error: {server.host}/m: manifest {DIGEST} is too large"


def test_an_unknown_content_encoding_label_is_read_as_is(hostile) -> None:
    server = hostile(lambda h: _send(h, 200, b'{"ok":1}', {"Content-Encoding": "UTF-8"}))
    assert read_bounded(_streamed(server.host), "tags") == b'{"ok":1}'
