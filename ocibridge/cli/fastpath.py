"""``ocibridge path REF`` of a model the cache holds, before the CLI is built.

The full CLI imports every command's module and builds its parser (~0.3 s under load); a warm
``path`` is read from two small files and, for a tag, one HEAD (:mod:`ocibridge.cache.warm`).
Only the plain forms are taken here: ``path REF`` with ``--offline``, ``--json``,
``--include``/``--exclude``. Any other flag (``--verify-key``, ``--hf``, transport flags,
``--debug``), a policy file asking for a check of REF, a cache that cannot answer, or anything
unexpected goes to the full CLI.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

_REPEATED = ("--include", "--exclude")


def _parse(argv: Sequence[str]) -> tuple[str, bool, bool, dict[str, list[str]]] | None:
    """(REF, offline, json, {--include: [...], --exclude: [...]}) of a plain ``path`` command line."""
    if len(argv) < 2 or argv[0] != "path":
        return None
    ref: str | None = None
    offline = as_json = False
    globs: dict[str, list[str]] = {flag: [] for flag in _REPEATED}
    words = iter(argv[1:])
    for word in words:
        flag, eq, value = word.partition("=")
        if word == "--offline":
            offline = True
        elif word == "--json":
            as_json = True
        elif flag in _REPEATED:
            taken = value if eq else next(words, None)
            if not taken:
                return None
            globs[flag].append(taken)
        elif word.startswith("-") or ref is not None:
            return None
        else:
            ref = word
    return None if ref is None else (ref, offline, as_json, globs)


def answer(argv: Sequence[str]) -> int | None:
    """Print the answer and return 0, or None: the full CLI is to run the command."""
    parsed = _parse(argv)
    if parsed is None:
        return None
    ref, offline, as_json, globs = parsed
    from ocibridge.cache.records import offline_from_env
    from ocibridge.cache.warm import warm_path
    from ocibridge.kinds.locate import Role, locate

    try:
        located = locate(ref, Role.MODEL)
        from ocibridge.signing.use import needs_checking

        if needs_checking(located, None):  # the policy file asks for a check: the full CLI makes it
            return None
        where = warm_path(located, offline=offline or offline_from_env(),
                          include=globs["--include"], exclude=globs["--exclude"])
    except KeyboardInterrupt:  # as the full CLI says it (and exits) on Ctrl-C
        import sys

        from ocibridge.core.interrupt import EXIT_INTERRUPTED

        print("ocibridge: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception:  # noqa: BLE001 - the full CLI then runs, and reports whatever it is as one line
        return None
    if where is None:
        return None
    if as_json:
        print(json.dumps({"path": str(where), "reference": ref}, indent=2, sort_keys=True))
    else:
        from ocibridge.core.terminal import printable

        print(printable(str(where)))
    return 0
