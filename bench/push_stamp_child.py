"""``python bench/push_stamp_child.py OUT ARGS...``: run ``ocibridge ARGS`` in this process and
write to OUT (JSON) when each request left (its request line, by the socket's first bytes), the
moment the first blob's ``PUT ?digest=`` was answered, the CPU seconds spent by the first
request and the first PATCH, and the moment the atexit handlers ran. Run by
:mod:`bench.push_stamps`, with the measured checkout first on PYTHONPATH.
"""

from __future__ import annotations

import time

START = time.time()

import atexit  # noqa: E402  (after the start stamp)
import json  # noqa: E402
import runpy  # noqa: E402
import socket  # noqa: E402
import sys  # noqa: E402
from typing import Any  # noqa: E402

METHODS = (b"HEAD ", b"GET ", b"POST ", b"PATCH ", b"PUT ", b"DELETE ")
stamps: dict[str, Any] = {"start": START, "requests": []}
awaited: list[int] = []  # the socket whose next read is the blob PUT's answer


def _note(sock: socket.socket, data: Any) -> None:
    head = bytes(memoryview(data)[:300]) if not isinstance(data, list) else bytes(memoryview(data[0])[:300])
    if not head.startswith(METHODS):
        return
    line = head.split(b"\r\n", 1)[0].decode("latin-1")
    now = time.time()
    if not stamps["requests"]:
        stamps["cpu_first"] = time.process_time()
    if line.startswith("PATCH ") and "cpu_patch" not in stamps:
        stamps["cpu_patch"] = time.process_time()
    stamps["requests"].append([now, line[:100]])
    if line.startswith("PUT ") and "/blobs/uploads/" in line and "digest=" in line and "blob_put" not in stamps:
        stamps["blob_put"] = now
        awaited.append(id(sock))


def _answered(sock: socket.socket) -> None:
    if awaited and awaited[0] == id(sock):
        stamps["blob_answered"] = time.time()
        awaited.clear()


_sendall, _send, _sendmsg = socket.socket.sendall, socket.socket.send, socket.socket.sendmsg
_recv, _recv_into = socket.socket.recv, socket.socket.recv_into


def sendall(self: socket.socket, data: Any, *rest: Any) -> Any:
    _note(self, data)
    return _sendall(self, data, *rest)


def send(self: socket.socket, data: Any, *rest: Any) -> Any:
    _note(self, data)
    return _send(self, data, *rest)


def sendmsg(self: socket.socket, buffers: Any, *rest: Any) -> Any:
    buffers = list(buffers)
    if buffers:
        _note(self, buffers[:1])
    return _sendmsg(self, buffers, *rest)


def recv(self: socket.socket, *args: Any) -> Any:
    data = _recv(self, *args)
    _answered(self)
    return data


def recv_into(self: socket.socket, *args: Any) -> Any:
    got = _recv_into(self, *args)
    _answered(self)
    return got


def _write() -> None:
    stamps["atexit"] = time.time()
    with open(OUT, "w") as f:
        json.dump(stamps, f)


if __name__ == "__main__":
    del sys.path[0]  # this script's folder: bench's modules must not stand in for anyone's
    OUT = sys.argv[1]
    socket.socket.sendall = sendall  # type: ignore[method-assign]
    socket.socket.send = send  # type: ignore[method-assign]
    socket.socket.sendmsg = sendmsg  # type: ignore[method-assign]
    socket.socket.recv = recv  # type: ignore[method-assign]
    socket.socket.recv_into = recv_into  # type: ignore[method-assign]
    atexit.register(_write)  # registered first: runs after every handler ocibridge registers
    sys.argv = ["ocibridge", *sys.argv[2:]]
    runpy.run_module("ocibridge", run_name="__main__", alter_sys=True)
