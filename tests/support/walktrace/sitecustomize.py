"""Loaded at start by a process a test runs with this folder first on PYTHONPATH: the walk of a
request through serve, as two stacks written as JSON lines to the file OCIBRIDGE_TEST_WALK names:

- ``hop``: the request's coroutine chain where a route hands the catalog to a worker thread (the
  call of anyio's ``to_thread.run_sync``, with the name of the function handed over, or of
  the one a ``functools.partial`` handed over calls);
- ``ask``: the worker thread's stack where the upstream session sends a request (its URL).

Each stack is its frames' (file, function), outermost first, ocibridge's files only."""

import json
import os
import sys
import threading

_WHERE = os.environ.get("OCIBRIDGE_TEST_WALK")
_lock = threading.Lock()


def _stack(frame):
    frames = []
    while frame is not None:
        name = frame.f_code.co_filename
        if "/ocibridge/" in name:
            frames.append((name[name.rindex("/ocibridge/") + 1:], frame.f_code.co_name))
        frame = frame.f_back
    return frames[::-1]


def _write(kind, what, frame):
    with _lock, open(_WHERE, "a") as f:
        f.write(json.dumps({"kind": kind, "what": what, "stack": _stack(frame)}) + "\n")


def _profile(frame, event, arg):
    if event != "call":
        return
    code = frame.f_code
    if code.co_name == "run_sync" and code.co_filename.endswith("anyio/to_thread.py"):
        func = frame.f_locals.get("func")
        named = getattr(func, "func", func)  # a functools.partial: the function it calls
        _write("hop", getattr(named, "__name__", repr(func)), frame.f_back)
    elif code.co_name == "get" and code.co_filename.endswith("hubserver/upstream/session.py"):
        _write("ask", str(frame.f_locals.get("url")), frame)


if _WHERE:
    sys.setprofile(_profile)
    threading.setprofile(_profile)
