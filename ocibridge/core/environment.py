"""Every ``OCIBRIDGE_*`` environment variable, with its default, and the one cache root.

Named here only (``tests/code/test_environment.py`` holds that), so a reader finds what can be set in
one place and two modules cannot read one setting two ways. Standard library only: the warm
``path`` start-up reads the cache root before anything heavier is imported.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple


class Variable(NamedTuple):
    name: str
    default: str  # what applies when it is unset, as the docs say it


CACHE = "OCIBRIDGE_CACHE"
#: the older spelling of :data:`CACHE`, read when that is unset (deprecated: docs/using.md)
CACHE_DEPRECATED = "OCIBRIDGE_CACHE_DIR"
OFFLINE = "OCIBRIDGE_OFFLINE"
STORE = "OCIBRIDGE_STORE"
DIGEST_CACHE = "OCIBRIDGE_DIGEST_CACHE"
SAMPLE_INDEX = "OCIBRIDGE_SAMPLE_INDEX"
#: the on-disk index of which repositories of a registry held a blob (stores/registry/blobindex.py)
BLOB_HOMES = "OCIBRIDGE_BLOB_HOMES"
UPLOAD_RESUME = "OCIBRIDGE_UPLOAD_RESUME"
USER_AGENT = "OCIBRIDGE_USER_AGENT"
REGISTRIES_CONF = "OCIBRIDGE_REGISTRIES_CONF"
CERTS_DIRS = "OCIBRIDGE_CERTS_DIRS"
MAX_RESPONSE_BYTES = "OCIBRIDGE_MAX_RESPONSE_BYTES"
MAX_TAGS = "OCIBRIDGE_MAX_TAGS"
MAX_INDEX_BYTES = "OCIBRIDGE_MAX_INDEX_BYTES"
MAX_EXPANSION_RATIO = "OCIBRIDGE_MAX_EXPANSION_RATIO"
MAX_GRAPH_DEPTH = "OCIBRIDGE_MAX_GRAPH_DEPTH"
MAX_GRAPH_NODES = "OCIBRIDGE_MAX_GRAPH_NODES"
LINKS_MAX_BYTES = "OCIBRIDGE_LINKS_MAX_BYTES"
#: the containers policy file every use of a model obeys (signing/containers_policy.py)
POLICY = "OCIBRIDGE_POLICY"
#: set by ``ocibridge mount`` for the process it starts: the descriptor of the caller's stderr
#: (lazymount/process.py); not a setting for users
MOUNT_STDERR_FD = "OCIBRIDGE_MOUNT_STDERR_FD"
#: serve's writer lease, in seconds (hubserver/replicas/leasetimes.py): how long it lasts
#: unrenewed, how often its holder renews it, how long a writer waits before reading it back
SERVE_LEASE_EXPIRY = "OCIBRIDGE_SERVE_LEASE_EXPIRY"
SERVE_LEASE_RENEW = "OCIBRIDGE_SERVE_LEASE_RENEW"
SERVE_LEASE_SETTLE = "OCIBRIDGE_SERVE_LEASE_SETTLE"
#: seconds serve believes what it read of a repository's record (private, gated, deleted:
#: hubserver/repo/repostates.py) and of a model's quarantine (hubserver/repo/quarantined.py)
SERVE_STATE_KEEP = "OCIBRIDGE_SERVE_STATE_KEEP"
#: bytes of inline commit lines serve holds at once, over every commit (hubserver/writeroutes/inlinebudget.py)
SERVE_INLINE_BUDGET = "OCIBRIDGE_SERVE_INLINE_BUDGET"
#: the token serve --upstream sends to the upstream Hub when no --upstream-token-file names one
SERVE_UPSTREAM_TOKEN = "OCIBRIDGE_UPSTREAM_TOKEN"
#: a name an HTTP proxy of the environment is asked to reach, which this machine cannot resolve
#: (so the address rule cannot check it), is sent to the proxy to resolve when set to 1 (core/proxiedcheck.py)
PROXY_RESOLVES = "OCIBRIDGE_PROXY_RESOLVES"
#: the largest compile cache ``warm load`` fetches, in bytes (warm/restore.py)
MAX_WARM_CACHE = "OCIBRIDGE_MAX_WARM_CACHE"
#: the password of the key ``--attest-key`` (a mirror job's ``attest_key``) names, so that it may differ
#: from the other key's in ``$COSIGN_PASSWORD`` (signing/__init__.py)
ATTEST_PASSWORD = "OCIBRIDGE_ATTEST_PASSWORD"

#: Every variable and its default (the numbers themselves live beside the code they bound).
VARIABLES = (
    Variable(CACHE, "$XDG_CACHE_HOME/ocibridge, else ~/.cache/ocibridge"),
    Variable(CACHE_DEPRECATED, "unset: the deprecated spelling of OCIBRIDGE_CACHE"),
    Variable(OFFLINE, "off"),
    Variable(STORE, "$XDG_DATA_HOME/ocibridge/store, else ~/.local/share/ocibridge/store"),
    Variable(DIGEST_CACHE, "on (0, false, no, off turn it off)"),
    Variable(SAMPLE_INDEX, "on (0, false, no, off turn it off)"),
    Variable(BLOB_HOMES, "on (0, false, no, off turn it off)"),
    Variable(UPLOAD_RESUME, "on (0 turns it off)"),
    Variable(USER_AGENT, "ocibridge/VERSION"),
    Variable(REGISTRIES_CONF, "$XDG_CONFIG_HOME/ocibridge/registries.toml, else ~/.config/..."),
    Variable(CERTS_DIRS, "/etc/docker/certs.d, /etc/containers/certs.d, ~/.config/containers/certs.d"),
    Variable(MAX_RESPONSE_BYTES, "stores/registry/bodies.py"),
    Variable(MAX_TAGS, "stores/registry/store.py"),
    Variable(MAX_INDEX_BYTES, "stores/layout.py"),
    Variable(MAX_EXPANSION_RATIO, "layers/reader.py, core/zipbound.py"),
    Variable(MAX_GRAPH_DEPTH, "core/graphbound.py"),
    Variable(MAX_GRAPH_NODES, "core/graphbound.py"),
    Variable(LINKS_MAX_BYTES, "64 GiB"),
    Variable(POLICY, "$HOME/.config/containers/policy.json, else /etc/containers/policy.json, else none"),
    Variable(MOUNT_STDERR_FD, "unset: set by ocibridge mount for its own process"),
    Variable(SERVE_LEASE_EXPIRY, "30 (seconds; at most 60)"),
    Variable(SERVE_LEASE_RENEW, "10 (seconds; at most a third of the expiry)"),
    Variable(SERVE_LEASE_SETTLE, "1 (seconds; at most half the renewal)"),
    Variable(SERVE_STATE_KEEP, "5 (seconds; at most 5)"),
    Variable(SERVE_INLINE_BUDGET, "268435456 (256 MiB)"),
    Variable(SERVE_UPSTREAM_TOKEN, "unset: no token sent to the upstream"),
    Variable(PROXY_RESOLVES, "off: a name this machine cannot resolve is not asked through the proxy"),
    Variable(MAX_WARM_CACHE, "68719476736 (64 GiB)"),
    Variable(ATTEST_PASSWORD, "unset: $COSIGN_PASSWORD"),
)


def cache_root() -> Path:
    """Where every cache of ocibridge lives (``pulls/``, ``models/``, ``uploads/``, the digest
    cache and content-sample index, ``carton-links/``): ``$OCIBRIDGE_CACHE``, else
    ``$OCIBRIDGE_CACHE_DIR``, else ``$XDG_CACHE_HOME/ocibridge``, else ``~/.cache/ocibridge``."""
    explicit = os.environ.get(CACHE) or os.environ.get(CACHE_DEPRECATED)
    if explicit:
        return Path(explicit)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ocibridge"


def switched_on(name: str, default: bool = True) -> bool:
    """A yes/no variable: ``0``, ``false``, ``no``, ``off`` say no, ``1``, ``true``, ``yes``,
    ``on`` say yes (any case), anything else is ``default``."""
    value = os.environ.get(name, "").strip().lower()
    if value in ("0", "false", "no", "off"):
        return False
    if value in ("1", "true", "yes", "on"):
        return True
    return default


def seconds_at_most(name: str, most: float) -> float:
    """``$name`` when it spells seconds above 0 and at most ``most`` (a test that must see a
    change within a second), else ``most``."""
    try:
        seconds = float(os.environ.get(name, ""))
    except ValueError:
        return most
    return seconds if 0 < seconds <= most else most
