"""What serve's log says of each request, and what it keeps out.

- A signed URL is a bearer credential for as long as it lasts (a xorb URL an hour, an upload URL
  its own life): its ``signature=`` is printed as ``signature=REDACTED``, so that whoever reads
  the log cannot replay it. The path and the other fields stay, to say what was read.
- The Xet dedupe protocol's "not held" answers (``GET {cas}/v1/chunks/...`` and ``POST
  {cas}/v1/xorb-grants/...`` answered 404: the client then sends the bytes) are the protocol's
  "no", asked for every upload: not failures, so not in the access log (``--debug`` shows them).
- uvicorn's own process lines ("Started server process", "Waiting for application startup",
  "Application startup complete", "Finished server process") are dropped: serve prints one start
  line of its own (:func:`.starting.banner`) naming what it serves.
- A body cut on purpose (:class:`CutSaid`: a streamed file whose fetch failed, said in one line
  where it is cut) is not said again as uvicorn's "Exception in ASGI application" traceback.
"""

from __future__ import annotations

import logging
import re

#: a signed URL's credential in a query (``signature=HEX``)
_SIGNATURE = re.compile(r"(?<=[?&]signature=)[^&\s]+")
#: the dedupe questions whose 404 means "not held: upload it"
_DEDUPE_MISS = re.compile(r"/v1/(chunks|xorb-grants)/")
_UVICORN_PROCESS_LINES = ("Started server process", "Waiting for application startup",
                          "Application startup complete", "Finished server process",
                          "Waiting for application shutdown", "Application shutdown complete")


def redacted(path: str) -> str:
    """``path`` with every ``signature=`` value replaced by ``REDACTED``."""
    return _SIGNATURE.sub("REDACTED", path)


class AccessLines(logging.Filter):
    """uvicorn's access log (``uvicorn.access``; its record's args are client, method, path,
    HTTP version, status): signatures redacted, dedupe misses left out unless ``debug``."""

    def __init__(self, debug: bool = False) -> None:
        super().__init__()
        self.debug = debug

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if not isinstance(args, tuple) or len(args) != 5:
            return True
        client, method, path, version, status = args
        if status == 404 and isinstance(path, str) and _DEDUPE_MISS.search(path) and not self.debug:
            return False
        if isinstance(path, str) and "signature=" in path:
            record.args = (client, method, redacted(path), version, status)
        return True


class CutSaid(Exception):
    """A response body cut on purpose (the client sees fewer bytes than its Content-Length), its
    reason logged in one line already."""


class ProcessLines(logging.Filter):
    """uvicorn's process lines (``uvicorn.error``), which serve's start line stands for, and its
    traceback of a :class:`CutSaid`."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info is not None and isinstance(record.exc_info[1], CutSaid):
            return False
        return not record.getMessage().startswith(_UVICORN_PROCESS_LINES)


def install(debug: bool = False) -> None:
    """Put the filters on uvicorn's loggers (after uvicorn configured its logging)."""
    logging.getLogger("uvicorn.access").addFilter(AccessLines(debug))
    logging.getLogger("uvicorn.error").addFilter(ProcessLines())
