"""``--debug``: every HTTP request on stderr, with what could be a secret taken out.

The registry client's log layer (``ocibridge.http``) and httpx itself (other downloads) log one
line per request at INFO (method, URL, status). Authorization headers are not in it, but URLs
can be: a blob redirect to object storage carries a signature in its query, and a
token endpoint may carry a refresh token. Query values whose names look secret are replaced.
"""

from __future__ import annotations

import logging
import re
import sys

_SECRET_QUERY = re.compile(
    r"(?i)([?&][^=&#\s]*(?:signature|token|secret|password|credential|key|sig|auth)[^=&#\s]*=)[^&#\s\"']*")
_USERINFO = re.compile(r"(://)[^/@\s]+@")


#: the registry client's log layer (stores/registry/transport.py), httpx's own and httpx2's (the
#: fork huggingface_hub sends the Hub's requests with), and how many ranged parts a pull keeps in
#: flight (stores/part_governor.py)
REQUEST_LOGGERS = ("ocibridge.http", "httpx", "httpx2", "ocibridge.parts")


def redact(text: str) -> str:
    """``text`` with secret-looking query values and URL user-info replaced by ``REDACTED``."""
    return _USERINFO.sub(r"\1REDACTED@", _SECRET_QUERY.sub(r"\1REDACTED", text))


class _Redacting(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact(record.getMessage())
        record.args = None
        return True


def enable_request_log(stream: object = None) -> None:
    """Send the request lines to stderr as ``ocibridge: debug: …``, redacted."""
    handler = logging.StreamHandler(stream or sys.stderr)  # type: ignore[arg-type]  # any writable text stream
    handler.setFormatter(logging.Formatter("ocibridge: debug: %(message)s"))
    handler.addFilter(_Redacting())
    for name in REQUEST_LOGGERS:
        logger = logging.getLogger(name)
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
