"""Loaded at start by a process a test runs with this folder first on PYTHONPATH: each HTTP client
made (httpx's, and huggingface_hub's httpx2 where it is installed) is written, with the module that
made it, as one line to the file OCIBRIDGE_TEST_CLIENTS names (a serve counted by a test)."""

import os
import sys

_WHERE = os.environ.get("OCIBRIDGE_TEST_CLIENTS")


def _counted(cls: type) -> None:
    original = cls.__init__

    def __init__(self, *args, **kwargs):  # noqa: N807 - the wrapped constructor
        caller = sys._getframe(1).f_globals.get("__name__", "?")
        with open(_WHERE, "a") as f:
            f.write(f"{cls.__module__}.{cls.__name__} {caller}\n")
        original(self, *args, **kwargs)

    cls.__init__ = __init__


if _WHERE:
    import httpx

    for _cls in (httpx.Client, httpx.AsyncClient):
        _counted(_cls)
    try:
        import httpx2  # huggingface_hub's own
    except ImportError:
        pass
    else:
        for _cls in (httpx2.Client, httpx2.AsyncClient):
            _counted(_cls)
