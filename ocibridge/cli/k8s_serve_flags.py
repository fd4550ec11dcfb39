"""``k8s serve``'s flags that are serve's own (``--verify-key``, ``--policy``, ``--concurrency``,
``--staging-budget``...): the files read here and carried in ConfigMaps, the values passed to the pods
as given (which pods take which: ocibridge/k8s/serveflags.py). Each value is read as serve reads
it at start, by the check the Python API runs (ocibridge/api/k8s_serve_values.py), so a value serve
would refuse is one error line now, not a pod that never becomes ready."""

from __future__ import annotations

import argparse

from ocibridge.api.k8s_types import COMMITTING, EVERY_POD, FACING, SWITCHES

#: each passed flag's metavar and help (the pods it goes to is said after it)
_PASSED: dict[str, tuple[str, str]] = {
    "--concurrency": ("N", "blobs in flight at once (serve's default 4)"),
    "--part-size": ("SIZE", "pull large blobs in parts of SIZE"),
    "--parts": ("N", "parts of one blob in flight at once"),
    "--limit-rate": ("RATE", "cap each pod's transfers together at RATE bytes per second"),
    "--upload-part-size": ("SIZE", "upload blobs in PATCH pieces of SIZE"),
    "--send-timeout": ("SECONDS", "seconds one write of an answer may take"),
    "--compare-budget": ("SIZE", "what one compare page may read from registries"),
    "--xet-min-size": ("SIZE", "offer files from this size over Xet ('off': plain downloads only)"),
    "--upstream-max-size": ("SIZE", "with --upstream: refuse an ingest whose files take more than SIZE"),
    "--upstream-quota-namespace": ("NAME", "with --upstream: count what the proxy fetches against NAME's quotas"),
    "--upstream-asks-per-client": ("N/PERIOD", "with --upstream: asks of the upstream one client's misses may cost "
                                               "(60/min, 5/s, off)"),
    "--audit-log": ("-", "each write (landed or refused) as a JSON line on the container's stdout, each pod's own "
                         "log (kubectl logs); '-' only: a file would go with an emptyDir cache"),
    "--no-access-log": ("", "do not log each request"),
    "--no-metrics": ("", "do not answer GET /metrics"),
    "--staging-budget": ("SIZE", "bytes uploads not yet committed may take in the cache"),
    "--staging-expiry": ("SECONDS", "an upload no commit names within this many seconds is removed"),
    "--lfs-multipart-min": ("SIZE", "LFS uploads of files from this size come in parts ('off': one PUT each)"),
    "--lfs-part-size": ("SIZE", "the size of those parts"),
    "--sbom-time": ("RFC3339", "with --sbom: the BOM's timestamp"),
    "--provenance-time": ("RFC3339", "with --provenance: the provenance's startedOn"),
    "--trust-forwarded": ("CIDR", "believe X-Forwarded-Host/-Proto from these peers, the Ingress controller's "
                                  "pods (repeatable)"),
}
_WHERE = {EVERY_POD: "every pod", COMMITTING: "the pod that commits: the writer with --replicas",
          FACING: "the pods users reach: the readers with --replicas"}


def add_serve_setting_flags(p: argparse.ArgumentParser) -> None:
    """The group of serve's own flags that ``k8s serve`` carries to the pods."""
    g = p.add_argument_group("serve's own flags, carried to the pods (docs/serve-kubernetes.md)")
    g.add_argument("--verify-key", action="append", default=[], metavar="PUB",
                   help="serve --verify-key: serve only models signed by this public key (repeatable); read here, "
                        "carried in a ConfigMap NAME-verify-keys mounted read-only on every pod")
    g.add_argument("--policy", metavar="FILE",
                   help="serve --policy: the containers policy.json every pod obeys, read and checked here, carried "
                        "in a ConfigMap NAME-policy (default: the image's /etc/containers/policy.json)")
    for group, where in _WHERE.items():
        for flag in group:
            metavar, what = _PASSED[flag]
            shown = f"serve {flag}: {what} ({where})"
            if flag in SWITCHES:
                g.add_argument(flag, action="store_true", help=shown)
            elif flag in FACING:
                g.add_argument(flag, action="append", metavar=metavar, help=shown)
            else:
                g.add_argument(flag, metavar=metavar, help=shown)


def serve_flags(args: argparse.Namespace) -> list[str]:
    """The passed flags given on ``k8s serve``'s line, as serve takes them."""
    flags: list[str] = []
    for flag in (*EVERY_POD, *COMMITTING, *FACING):
        value = getattr(args, flag[2:].replace("-", "_"))
        if value in (None, False, []):
            continue
        if flag in SWITCHES:
            flags.append(flag)
        else:
            flags += [word for each in (value if isinstance(value, list) else [value]) for word in (flag, each)]
    return flags

