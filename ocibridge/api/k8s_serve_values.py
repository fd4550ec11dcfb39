"""The values of serve's flags that ``k8s serve`` passes to the pods (``--concurrency 8``,
``--staging-budget 100G``...), read as ``ocibridge serve`` reads them at start: a value serve would
refuse is one error line before any document is written, in serve's words, whether it came from
the command line or from :func:`ocibridge.api.k8s_serve.k8s_serve` (the command calls that, which calls
this). Which pods take which flag: ocibridge/k8s/serveflags.py."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ocibridge.errors import UsageError
from ocibridge.k8s.serveflags import SWITCHES, PodFlags, pod_flags

if TYPE_CHECKING:
    from ocibridge.api.k8s_types import K8sServeOptions

#: the passed flags serve's parser reads as numbers (its argparse types; the others stay text)
NUMBERS: dict[str, Callable[[str], float]] = {"--concurrency": int, "--parts": int, "--send-timeout": float,
                                              "--staging-expiry": float}
#: the words that turn a size flag off (``--xet-min-size off``)
OFF = ("off", "none", "no")


def checked_pod_flags(k8s: K8sServeOptions) -> PodFlags | None:
    """``k8s.serve_flags`` sorted by the pods they go to (:func:`pod_flags`), each value checked as
    serve checks it beside what it goes with (``--upstream``, ``--sbom``, ``--provenance``); None:
    none given. Raises :class:`UsageError` in serve's words for a value serve would refuse."""
    from ocibridge.api.serve import ServeOptions, check_serve_options

    found = pod_flags(k8s.serve_flags)
    if found is None:
        return None
    given = _given(found.args())
    number = {flag: _number(flag, given[flag][-1]) for flag in NUMBERS if flag in given}
    text = {flag: values[-1] for flag, values in given.items() if values}  # as argparse: the last one counts
    if number.get("--concurrency", 1) < 1:
        raise UsageError("--concurrency must be at least 1")
    for flag in ("--upload-part-size", "--part-size", "--limit-rate"):
        size(flag, text.get(flag), 0)
    if number.get("--parts", 1) < 1:
        raise UsageError("--parts must be at least 1")
    if not (k8s.sbom or k8s.provenance) and ("--sbom-time" in text or "--provenance-time" in text):
        raise UsageError("--attest-key, --sbom-time and --provenance-time go with --sbom or --provenance")
    defaults = ServeOptions()
    options = ServeOptions(
        staging_budget=size("--staging-budget", text.get("--staging-budget"), defaults.staging_budget),
        xet_min_size=size_or_off("--xet-min-size", text.get("--xet-min-size"), defaults.xet_min_size),
        lfs_multipart_min=size_or_off("--lfs-multipart-min", text.get("--lfs-multipart-min"),
                                      defaults.lfs_multipart_min),
        lfs_part_size=size("--lfs-part-size", text.get("--lfs-part-size"), defaults.lfs_part_size),
        trust_forwarded=tuple(given.get("--trust-forwarded", defaults.trust_forwarded)),
        compare_budget=size("--compare-budget", text.get("--compare-budget"), defaults.compare_budget),
        send_timeout=number.get("--send-timeout", defaults.send_timeout),
        staging_expiry=number.get("--staging-expiry", defaults.staging_expiry), upstream=k8s.upstream,
        upstream_max_size=None if "--upstream-max-size" not in text else size("--upstream-max-size",
                                                                               text["--upstream-max-size"], 0),
        upstream_quota_namespace=text.get("--upstream-quota-namespace"),
        upstream_asks_per_client=text.get("--upstream-asks-per-client"))
    check_serve_options(options)
    return found


def size(flag: str, text: str | None, default: int) -> int:
    """A ``SIZE`` flag (``500K``, ``20M``, ``1G``) as serve reads it, or ``default`` when not given."""
    from ocibridge.core.terminal import parse_bytes

    if text is None:
        return default
    try:
        return parse_bytes(text)
    except ValueError as e:
        raise UsageError(f"{flag}: {e}") from None


def size_or_off(flag: str, text: str | None, default: int | None) -> int | None:
    """A ``SIZE`` flag that ``off`` turns off (None), as serve reads it."""
    if text is not None and text.lower() in OFF:
        return None
    return size(flag, text, default or 0) or None


def _given(words: Sequence[str]) -> dict[str, list[str]]:
    """Each flag's values in the order given (a switch: no value); ``words`` as :class:`PodFlags` keeps them."""
    given: dict[str, list[str]] = {}
    rest = list(words)
    while rest:
        flag = rest.pop(0)
        given.setdefault(flag, [])
        if flag not in SWITCHES:
            given[flag].append(rest.pop(0))
    return given


def _number(flag: str, text: str) -> float:
    kind = NUMBERS[flag]
    try:
        return kind(text)
    except ValueError:
        raise UsageError(f"argument {flag}: invalid {kind.__name__} value: {text!r}") from None
