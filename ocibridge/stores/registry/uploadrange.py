"""How many bytes the registry holds for an upload session, read from an answer's ``Range``.

Distribution answers ``Range: 0-(N-1)`` for N bytes (and "0-0" for both 0 and 1); some
registries answer ``0-N``. Which style a host uses is learnt from a chunk's answer one off the
bytes sent and remembered per host (:class:`.uploadpolicy.UploadPolicy`), so a later process
resuming a session reads its first status answer right. :mod:`.upload` asks these.
"""

from __future__ import annotations

import re

import httpx

from ocibridge.stores.registry.uploadpolicy import UploadPolicy


def range_end(value: str | None) -> int | None:
    """The bytes a registry says it holds, from an upload answer's ``Range: 0-N``; None when
    absent or unreadable. Distribution answers "0-0" for both 0 and 1 bytes (read as 0)."""
    m = re.match(r"^(?:bytes=)?0-([0-9]{1,19})$", (value or "").strip())
    if not m:
        return None
    end = int(m.group(1))
    return 0 if end == 0 else end + 1


def held(policy: UploadPolicy, response: httpx.Response) -> int | None:
    """The bytes an upload answer's ``Range`` says the registry holds, in the host's style."""
    end = range_end(response.headers.get("range"))
    if end is not None and end and policy.range_exclusive:
        end -= 1
    return end


def learn_style(policy: UploadPolicy, held: int | None, expected: int) -> int | None:
    """A chunk's answer one off the bytes sent, in the way the other Range style reads: that is
    this registry's style (remembered per host); returns the bytes held, read in that style."""
    if held is None:
        return None
    if held == expected:
        policy.range_confirmed()
    elif held == expected + 1 and not policy.range_exclusive:
        # ``Range: 0-N`` for N bytes (an end past the last byte), not distribution's
        # ``0-(N-1)``: read every later answer of this registry that way
        policy.exclusive_range_end()
        return held - 1
    elif held + 1 == expected and policy.range_exclusive and not policy.range_seen:
        policy.inclusive_range_end()  # remembered, but this registry answers as distribution
        return held + 1
    return held
