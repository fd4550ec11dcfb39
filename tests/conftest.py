"""Shared pytest fixtures. Registry fixtures live in tests/support (see support/fixtures.py)."""

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from browser import browser  # noqa: F401 - the session's one headless Chromium
from serving import publishing_serve  # noqa: F401 - one plain publishing serve: test_serve_publish.py, _hffs, ...
from support import default_trust, rewritten
from support.fixtures import (  # noqa: F401
    auth_registry,
    containerd,
    fault_proxy,
    mtls_registry,
    podman,
    registry,
    registry2,
    stalling_server,
    tls_registry,
    token_registry,
    unique_repo,
)
from upstream_proxy import proxied  # noqa: F401 - one upstream and proxy for test_serve_upstream{,_refusals,_shared}.py

# Between tests (and in threads a test leaves running, a server of a module's fixture) there is
# a cache root too, and it is never the user's: each test then sets its own (_own_pull_cache).
os.environ["OCIBRIDGE_CACHE"] = tempfile.mkdtemp(prefix="ocibridge-tests-cache-")
atexit.register(shutil.rmtree, os.environ["OCIBRIDGE_CACHE"], True)
# A serve that writes takes the writer lease at its first write: it writes the lease, waits
# ``settle`` (1 s by default) and reads it back. Every serve of the suite (in this process:
# serving.py; or a process, which inherits the variable) waits 0.2 s, as the lease tests do:
# one registry on loopback lands each write at once. The tests of the lease set their own times.
os.environ.setdefault("OCIBRIDGE_SERVE_LEASE_SETTLE", "0.2")
default_trust.install()  # one default SSL context for this process's httpx clients, not one a request


@pytest.fixture(autouse=True)
def _fresh_blob_homes(_own_pull_cache):
    """Where blobs live is process-wide knowledge (cross-repository mounts), kept on disk under
    the cache root: each test starts without what earlier tests uploaded, so its upload counts
    are its own (its cache root, and so its index, is its own: never the user's)."""
    from ocibridge.stores.registry.blobhomes import BLOB_HOMES

    BLOB_HOMES.forget_in_process()
    yield


@pytest.fixture(autouse=True)
def _own_registry_settings(tmp_path, monkeypatch):
    """What the client learns about a registry (upload form, body cap: uploadpolicy.py) goes
    to the settings file: each test has its own, never the user's, and starts knowing nothing."""
    monkeypatch.setenv("OCIBRIDGE_REGISTRIES_CONF", str(tmp_path / "registries.toml"))


@pytest.fixture(autouse=True)
def _own_pull_cache(tmp_path, monkeypatch):
    """Pulls into directories and archives go through a content cache (ocibridge.transfer.pullcache):
    each test has its own, never the user's."""
    monkeypatch.setenv("OCIBRIDGE_CACHE", str(tmp_path / "ocibridge-cache"))
    monkeypatch.delenv("OCIBRIDGE_CACHE_DIR", raising=False)


@pytest.fixture(autouse=True)
def _own_containers_policy(tmp_path_factory, monkeypatch):
    """Every use of a model obeys the containers policy file (docs/signing.md): the tests obey
    one that accepts anything, never the machine's /etc/containers/policy.json or the user's;
    tests of the policy name their own."""
    path = tmp_path_factory.getbasetemp() / "accept-anything-policy.json"
    if not path.exists():
        path.write_text('{"default": [{"type": "insecureAcceptAnything"}]}')
    monkeypatch.setenv("OCIBRIDGE_POLICY", str(path))


@pytest.fixture(autouse=True, scope="session")
def _own_xet_cache(tmp_path_factory):
    """hf_xet, huggingface_hub's downloader, keeps caches and logs under HF_XET_CACHE (read when
    its one session per process starts): a test run writes none into the home directory. Its
    retries of a 5xx answer pause 0.1 s, not 3 s and more (the tests that refuse a blob)."""
    saved = {k: os.environ.get(k) for k in ("HF_XET_CACHE", "HF_XET_CLIENT_RETRY_BASE_DELAY")}
    os.environ["HF_XET_CACHE"] = str(tmp_path_factory.mktemp("xet-cache"))
    os.environ["HF_XET_CLIENT_RETRY_BASE_DELAY"] = "100ms"
    yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


# -- tests write nowhere in the checkout (issue 90): its state before the session and after --------
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _checkout_state() -> dict[str, str] | None:
    """Each changed or untracked (not ignored) path of the checkout and a digest of its bytes;
    None outside a git checkout (an unpacked release)."""
    import hashlib
    import subprocess

    try:
        listed = subprocess.run(["git", "-C", _ROOT, "status", "--porcelain", "-z", "--untracked-files=all"],
                                capture_output=True, check=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    state = {}
    for entry in filter(None, listed.decode("utf-8", "surrogateescape").split("\0")):
        path = os.path.join(_ROOT, entry[3:])
        try:
            with open(path, "rb") as f:
                state[entry[3:]] = entry[:2] + hashlib.sha256(f.read()).hexdigest()
        except OSError:
            state[entry[3:]] = entry[:2]
    return state


def _compile_the_package() -> None:
    """ocibridge's bytecode, written where an import reads it (``__pycache__``, ignored by git),
    before the workers start. An installed wheel has it; the checkout's editable install has it
    only where an earlier import wrote it, and never where ``PYTHONDONTWRITEBYTECODE`` is set:
    then each of the suite's thousands of ``ocibridge`` and ``serve`` processes compiled every
    module it imports from source (a tenth of a second to a second a process). A tree that
    cannot be written is left as it is."""
    import compileall

    compileall.compile_dir(os.path.join(_ROOT, "ocibridge"), quiet=2)


def pytest_sessionstart(session):
    if not os.environ.get("PYTEST_XDIST_WORKER"):  # the controller (or a run without workers) only
        _compile_the_package()
        if getattr(session.config.option, "numprocesses", None):  # workers to come: -n N
            rewritten.write_bytecode(session.config, Path(_ROOT) / "tests")
        session.config.stash[_BEFORE] = _checkout_state()


def pytest_sessionfinish(session, exitstatus):
    before = session.config.stash.get(_BEFORE, None)
    if os.environ.get("PYTEST_XDIST_WORKER") or before is None:
        return
    after = _checkout_state() or {}
    touched = sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
    if touched:
        print(f"\nthe tests changed the checkout (they write nowhere in it): {', '.join(touched[:10])}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


_BEFORE = pytest.StashKey[dict]()


#: ``./scripts/test --no-root`` sets it: the tests that start a private containerd (root only) are
#: left out, said in the header and counted as deselected; nothing else is
NO_ROOT = "OCIBRIDGE_TEST_NO_ROOT"


def pytest_report_header(config):
    if os.environ.get(NO_ROOT) == "1":
        return [f"{NO_ROOT}=1: the tests that start a private containerd (it needs root) are left out; "
                "the full suite is ./scripts/test as root"]
    return []


def pytest_collection_modifyitems(config, items):
    if os.environ.get("PYTEST_XDIST_WORKER"):
        heavy_files_first(items)
    if os.environ.get(NO_ROOT) != "1":
        return
    left_out = [item for item in items if "containerd" in item.fixturenames]
    if left_out:
        items[:] = [item for item in items if "containerd" not in item.fixturenames]
        config.hook.pytest_deselected(items=left_out)


# -- the order pytest-xdist hands files to its workers ---------------------------------------------
#: the suite's heaviest files, heaviest first (seconds and path a line)
HEAVY_FILES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "heavy_files.txt")


def heavy_files_first(items) -> None:
    """Each worker's collection (its order is the order the files are handed out in) with the files
    of heavy_files.txt first, heaviest first; each file's tests keep their order. The worker that
    takes the last file then takes a light one: left to xdist (most tests first), a heavy file of
    few tests came last and the other worker idled until it ended."""
    with open(HEAVY_FILES) as listing:
        rows = [line.split(maxsplit=1) for line in listing if line.strip() and not line.startswith("#")]
    rank = {path.strip(): n for n, (_seconds, path) in enumerate(rows)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    """The controller hands out files in the workers' collection order (heavy_files_first), not
    sorted by their count of tests (pytest-xdist's --loadscope-reorder, on by default)."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False
