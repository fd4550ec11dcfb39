"""A streamed request body given as batches of views (:class:`.streams.Batched`), written
straight onto the request's plain socket: each batch one chunk of the chunked encoding, its
framing and views in one ``sendmsg``, so its bytes are not copied into a read, nor joined with
the framing by h11, nor passed through httpcore one piece at a time. Over TLS (or a connection
this process did not open) the batches go through httpx as bytes, joined, as any body does.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable, Iterator, Sequence

import httpcore

from ocibridge.core.fsutil import IOV_MAX
from ocibridge.stores.registry.options import ByteBudget
from ocibridge.stores.registry.tracked import plain_socket_writing

_END = b"\r\n"


def chunked_body(batches: Iterable[Sequence[memoryview]], budget: ByteBudget | None,
                 straight: bool = True) -> Iterator[bytes]:
    """The body of a request whose ``Transfer-Encoding`` is chunked (httpx's for an iterator):
    asked for once its headers are out, it writes the batches onto their socket itself and
    yields nothing; h11 then ends the body (``0\\r\\n\\r\\n``) only once the batches ended, so
    a batch iterator that raises leaves the request cut. ``budget``: the ``--limit-rate``
    budget the bytes written here take from (those yielded take from it in its layer).
    ``straight`` False: yielded, as for a client whose own layers read the bodies it sends."""
    sock = plain_socket_writing() if straight else None
    for batch in batches:
        if sock is None:
            yield b"".join(batch)
            continue
        size = sum(len(view) for view in batch)
        if not size:
            continue  # an empty chunk would end the body
        if budget is not None:
            budget.take(size)
        send_all(sock, [b"%x\r\n" % size, *batch, _END])


def send_all(sock: socket.socket, parts: list[bytes | memoryview]) -> None:
    """Send ``parts`` in order, in as few ``sendmsg`` calls as the socket takes; a failure as
    httpcore's own write reports it (a write error, or its timeout)."""
    views = [memoryview(part).cast("B") for part in parts]
    at = 0
    try:
        while at < len(views):
            sent = sock.sendmsg(views[at:at + IOV_MAX])
            while at < len(views) and sent >= len(views[at]):
                sent -= len(views[at])
                at += 1
            if sent:
                views[at] = views[at][sent:]
    except TimeoutError as e:
        raise httpcore.WriteTimeout(e) from e
    except OSError as e:
        raise httpcore.WriteError(e) from e
