"""huggingface_hub's own test suite, run against ``ocibridge serve`` on a fresh local registry.

    cd /work/main && .venv/bin/python -m bench.hub_suite --hub-src /work/hfhub-src \\
        --hub-python /work/hfvenv/bin/python [--ocibridge-ref HEAD] [--only 'EXPR'] [--out DIR]
    .venv/bin/python -m bench.hub_suite --resummarize /work/hubsuite-runs/STAMP   # summary again

The hub python is a venv of its own with the checkout installed (``pip install -e 'SRC[testing]'``,
plus pytest-timeout and torch for test_hub_mixin_pytorch); serve runs on this venv's python, from
the work tree or, with ``--ocibridge-ref``, from an export of that commit (others' uncommitted
edits left out). A full run takes 2-4 minutes while most tests stop at their first request.

Why: serve claims to answer the Hub's repository, file and commit API; the Hub client's own tests
(written against the Hub's CI server) are the most demanding outside check of that claim. This
harness makes the run reproducible and its count honest:

- a fresh ``docker-registry`` (tests/support/registry.py) and a fresh ``ocibridge serve`` of it
  (its own model cache, an accept-anything containers policy, the token file TOKEN_FILE below:
  the suite's three tokens, as the users the suite expects);
- a temporary copy of the checkout's ``tests/`` in which ``ENDPOINT_STAGING`` (and the literal
  CI URL in the selected files) is serve's URL; its pytest settings are the checkout's, with
  ``HUGGINGFACE_CO_STAGING=0`` and ``HF_ENDPOINT`` at serve, so bare ``HfApi()`` calls reach it
  too. The checkout itself is never written;
- the in-scope selection: IN_SCOPE_FILES minus EXCLUDE (topics serve does not claim, and tests
  that need huggingface.co), both counted in the summary;
- a small pytest plugin (PROBE_PLUGIN) that deselects EXCLUDE with its reasons, sends one
  ``GET /healthz?hub-suite-test=NODEID`` to serve before each test (so serve's access log can be
  cut into each test's requests, hf_xet's included), notes any request to another host, and sends
  REDIRECT_TO_SERVE (Hub API URLs huggingface_hub hard-codes to huggingface.co) to serve;
- ``results.json`` (test id -> outcome, first error line, serve's failing answers) and
  ``summary.md`` (counts, exclusions, failures grouped by cause, biggest first) in ``--out``,
  with serve's access log, stderr and audit log, the registry's log and pytest's output.

Serve and the registry are stopped at the end whatever happens (SIGTERM and Ctrl-C included).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from types import FrameType
from urllib.parse import quote, unquote

from tests.support.registry import RegistryProcess, free_port

ROOT = Path(__file__).resolve().parent.parent

#: serve's token file; {TOKEN}, {OTHER_TOKEN} and {ENTERPRISE_TOKEN} are read from the checkout's
#: tests/testing_constants.py (docs/serve.md, Tokens). As on the Hub: each user's namespace is its
#: own, anyone reads public repositories without a token; the suite's CI user writes everywhere
#: (hub-ci's user is flagged isHF and creates repositories in organisations it is not a member of).
# the test user's full name as the Hub's staging account says it (testing_constants.FULL_NAME), in
# the token file's own field for it (a space written %20), and its organisation with the full name
# the Hub shows (ORG_IN_FILE): what whoami answers
TOKEN_FILE = """\
{TOKEN} user={USER} write=* fullname={FULL_NAME_IN_FILE} orgs={ORG_IN_FILE}
{OTHER_TOKEN} user={OTHER_USER} write={OTHER_USER}/
{ENTERPRISE_TOKEN} user={ENTERPRISE_USER} write={ENTERPRISE_USER}/,{ENTERPRISE_ORG}/
anonymous read=*
"""

#: the CI user's organisation and its full name on the Hub's staging server: test_hf_api.py's
#: test_whoami_with_passing_token asserts them as literals (testing_constants.py has no constant
#: for them, as it has FULL_NAME for the user's)
CI_ORG, CI_ORG_FULL_NAME = "valid_org_hub", "Dummy Hub Org"

#: the suite's CI user, renamed: "__DUMMY_HUB_USER__" starts with "_", which no OCI repository
#: name may (distribution's path-component grammar, [a-z0-9]+(?:[._-][a-z0-9]+)*): a registry's limit
RENAMED_USER = "dummy-hub-user"

#: the files that talk to the Hub's repository, file and commit API (most hold offline unit tests
#: too: the summary counts the tests that reached serve apart)
IN_SCOPE_FILES = [
    "test_hf_api.py",
    "test_file_download.py",
    "test_snapshot_download.py",
    "test_hf_file_system.py",
    "test_repocard.py",
    "test_hub_mixin.py",
    "test_hub_mixin_pytorch.py",  # needs torch in the hub python, else its tests are skipped
    "test_xet_download.py",  # all `production` today: counted as excluded
    "test_xet_upload.py",
    "test_cli.py",
    "test_copy_files.py",
    "test_commit_scheduler.py",
    "test_cache_layout.py",
]

#: looked at and left out: none of their tests sent a request to the endpoint (mocked or pure unit
#: tests; ee0a4510); `--files` takes them
OFFLINE_FILES = [
    "test_commit_api.py", "test_upload_large_folder.py", "test_lfs.py", "test_xet_utils.py",
    "test_xet_progress_reporting.py", "test_upload_pipeline.py", "test_verification.py", "test_auth.py",
]


@dataclass(frozen=True)
class Exclusion:
    """Tests left out of scope: a regex over the node id (case-insensitive), markers, fixtures, or a
    regex over the test function's source."""

    group: str
    reason: str
    pattern: str = ""
    markers: tuple[str, ...] = ()
    fixtures: tuple[str, ...] = ()
    source: str = ""


#: first match wins; each group is counted in the summary
EXCLUDE = [
    Exclusion("production", "needs huggingface.co (marker `production`, fixture `api_prod`, ENDPOINT_PRODUCTION "
              "in the test): no route from here", markers=("production",), fixtures=("api_prod",),
              source=r"ENDPOINT_PRODUCTION"),
    Exclusion("PRs (class fixture)", "a class whose shared fixture makes a pull request before any test runs "
              "(TestListGitCommits; HfFileSystem's RO/RW suites: upload_file(create_pr=True) to their dataset repo)",
              pattern=r"TestListGitCommits|TestHfFileSystemRepository(RO|RW)"),
    Exclusion("discussions/PRs", "discussions and pull requests (refs/pr/N): not in serve's scope",
              pattern=r"discussion|pull_request|create_pr|_on_pr\b|_prs\b|special_ref"),
    Exclusion("buckets", "Hub storage buckets (by name or fixture)", pattern=r"bucket",
              fixtures=("bucket_write", "bucket_write_2", "bucket_with_files")),
    Exclusion("spaces", "Spaces (runtime, hardware, secrets, duplication)", pattern=r"(?<!name)space"),
    Exclusion("spaces (in the code)", "the test's own code makes or reads a Space repo",
              source=r"""(?<![`\w])repo_type\s*=\s*["']space["']|repo_factory\(\s*["']space|REPO_TYPE_SPACE"""),
    Exclusion("webhooks", "webhooks", pattern=r"webhook"),
    Exclusion("collections", "collections", pattern=r"collection"),
    Exclusion("likes/users/orgs", "likes, user and organization pages, Enterprise orgs (private by default)",
              pattern=r"TestActivityApi|TestUserApi|\blike|unlike|organization|enterprise", source=r"ENTERPRISE_"),
    Exclusion("inference/endpoints", "inference, Inference Endpoints and the catalog",
              pattern=r"inference|endpoint_image|set_parallelism"),
    Exclusion("jobs", "Jobs and their volumes", pattern=r"job|volume"),
    Exclusion("papers", "daily papers", pattern=r"paper"),
    Exclusion("oauth/login", "OAuth device flow and token refresh (login.huggingface.co flows)",
              pattern=r"oauth|device_code|devicecode|refresh_access_token|TokenAutoRefresh"),
    Exclusion("cli-skills", "CLI skills and extensions (GitHub, not the Hub)", pattern=r"skill|extension"),
    Exclusion("kernels", "kernel repos", pattern=r"kernel"),
]

#: the literal CI URL some selected files use instead of ENDPOINT_STAGING
STAGING_LITERAL = "https://hub-ci.huggingface.co"

#: Hub API requests huggingface_hub sends to a hard-coded host, not to its endpoint: the probe sends
#: them to serve's same path instead (repocard.py validates every card it pushes at huggingface.co)
REDIRECT_TO_SERVE = ["https://huggingface.co/api/validate-yaml"]

PROBE_PLUGIN = r'''
"""Written by ocibridge's bench/hub_suite.py: deselects the exclusions, marks each test in serve's
access log, notes requests to other hosts."""
import inspect, json, os, re, urllib.parse, urllib.request
from collections import Counter

import pytest

_CFG = json.loads(open(os.environ["HUB_SUITE_PROBE"]).read())
_SERVE = _CFG["serve"]
_SERVE_HOST = urllib.parse.urlsplit(_SERVE).netloc
_OTHER = {}
_DESELECTED = []
_CURRENT = [None]
_REDIRECTED = Counter()


def _redirect(request):
    """A Hub API URL hard-coded to huggingface.co goes to serve's same path."""
    url = str(request.url)
    if url in _CFG["redirect"]:
        request.url = type(request.url)(_SERVE + urllib.parse.urlsplit(url).path)
        request.headers["Host"] = _SERVE_HOST
        _REDIRECTED[_CURRENT[0]] += 1


def _note(url):
    try:
        host = url.host if hasattr(url, "host") else urllib.parse.urlsplit(str(url)).hostname
        port = getattr(url, "port", None)
        netloc = f"{host}:{port}" if port else str(host)
    except Exception:
        return
    if netloc != _SERVE_HOST and _CURRENT[0] is not None:
        _OTHER.setdefault(_CURRENT[0], Counter())[netloc] += 1


#: the HTTP clients huggingface_hub has used (httpx2 from 2.x): each present one is watched
HTTP_CLIENTS = ("httpx", "httpx2")


def _patch_httpx(httpx):
    sync_handle = httpx.HTTPTransport.handle_request
    async_handle = httpx.AsyncHTTPTransport.handle_async_request

    def handle_request(self, request):
        _redirect(request)
        _note(request.url)
        return sync_handle(self, request)

    async def handle_async_request(self, request):
        _redirect(request)
        _note(request.url)
        return await async_handle(self, request)

    httpx.HTTPTransport.handle_request = handle_request
    httpx.AsyncHTTPTransport.handle_async_request = handle_async_request


def _patch_clients():
    """Watch every HTTP client present; none at all would leave requests to other hosts unseen,
    so the run stops saying so rather than count them as none."""
    import importlib
    watched = []
    for name in HTTP_CLIENTS:
        try:
            _patch_httpx(importlib.import_module(name))
        except ImportError:
            continue
        watched.append(name)
    if not watched:
        raise RuntimeError(f"hub_suite probe: none of {', '.join(HTTP_CLIENTS)} imports here: "
                           "requests to other hosts could not be noted")


_patch_clients()


@pytest.hookimpl(trylast=True)  # after -k: only what the run selected is counted
def _source(item):
    try:
        return inspect.getsource(item.function)
    except (AttributeError, OSError, TypeError):
        return ""


def pytest_collection_modifyitems(session, config, items):
    kept, dropped = [], []
    for item in items:
        markers = {m.name for m in item.iter_markers()}
        fixtures = set(getattr(item, "fixturenames", ()))
        group = None
        for rule in _CFG["exclude"]:
            if (rule["pattern"] and re.search(rule["pattern"], item.nodeid, re.IGNORECASE)) \
                    or markers & set(rule["markers"]) or fixtures & set(rule["fixtures"]) \
                    or (rule["source"] and re.search(rule["source"], _source(item))):
                group = rule["group"]
                break
        if group is None:
            kept.append(item)
        else:
            dropped.append(item)
            _DESELECTED.append([item.nodeid, group])
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def pytest_runtest_logstart(nodeid, location):
    _CURRENT[0] = nodeid
    url = _SERVE + "/healthz?hub-suite-test=" + urllib.parse.quote(nodeid, safe="")
    try:
        urllib.request.urlopen(url, timeout=5).read()
    except Exception:
        pass


def pytest_sessionfinish(session, exitstatus):
    with open(_CFG["out"], "w") as f:
        json.dump({"deselected": _DESELECTED, "other_hosts": _OTHER, "redirected": _REDIRECTED}, f, indent=1)
'''


# -- serve and the registry ------------------------------------------------------------------


@dataclass
class Serve:
    """One ``ocibridge serve`` child: its URL, its log files."""

    proc: subprocess.Popen[bytes]
    url: str
    access_log: Path
    stderr_log: Path

    def stop(self) -> None:
        if self.proc.poll() is not None:
            return
        self.proc.terminate()  # SIGTERM: requests in flight finish (30 s at most)
        try:
            self.proc.wait(timeout=40)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)


def snapshot_of(ref: str, into: Path) -> Path:
    """The tree of commit ``ref`` of this repository, exported to ``into`` (others' edits left out)."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def start_serve(registry_host: str, work: Path, out: Path, token_file: Path,
                serve_cmd: list[str], extra: list[str], source: Path) -> Serve:
    policy = work / "accept-anything-policy.json"
    policy.write_text('{"default": [{"type": "insecureAcceptAnything"}]}')
    env = {**os.environ, "OCIBRIDGE_CACHE": str(work / "ocibridge-cache"),
           "OCIBRIDGE_POLICY": str(policy),
           "OCIBRIDGE_REGISTRIES_CONF": str(work / "registries.toml")}
    env.pop("OCIBRIDGE_CACHE_DIR", None)
    for attempt in range(3):  # a free port can be taken between the probe and serve's bind
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        access_log, stderr_log = out / "serve-access.log", out / "serve-stderr.log"
        cmd = [*serve_cmd, registry_host, "--plain-http", "--listen", f"127.0.0.1:{port}",
               "--token-file", str(token_file), "--audit-log", str(out / "serve-audit.jsonl"), *extra]
        (out / "serve-command.txt").write_text(" ".join(cmd) + "\n")
        with access_log.open("ab") as so, stderr_log.open("ab") as se:
            # cwd first on sys.path: `-m ocibridge` is the tree at `source` (the editable finder comes after)
            proc = subprocess.Popen(cmd, stdout=so, stderr=se, stdin=subprocess.DEVNULL, env=env, cwd=source)
        served = Serve(proc, url, access_log, stderr_log)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(url + "/healthz", timeout=2) as r:
                    if r.status == 200:
                        return served
            except (OSError, urllib.error.URLError):
                pass
            time.sleep(0.1)
        served.stop()
        if attempt == 2:
            tail = stderr_log.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"serve did not answer /healthz (log {stderr_log}):\n{tail}")
    raise AssertionError("unreachable")


# -- the copy of the tests ---------------------------------------------------------------------


def hub_constants(hub_src: Path) -> dict[str, str]:
    """The string constants of the checkout's tests/testing_constants.py."""
    tree = ast.parse((hub_src / "tests" / "testing_constants.py").read_text())
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, str):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found[target.id] = node.value.value
    return found


def prepare_tests(hub_src: Path, work: Path, serve_url: str, files: list[str]) -> list[str]:
    """Copy tests/ and the pytest settings into ``work``, pointed at serve; returns the files changed."""
    shutil.copytree(hub_src / "tests", work / "tests")
    changed = []
    constants = work / "tests" / "testing_constants.py"
    text, n = re.subn(r'^ENDPOINT_STAGING\s*=.*$', f'ENDPOINT_STAGING = "{serve_url}"',
                      constants.read_text(), flags=re.MULTILINE)
    if n != 1:
        raise RuntimeError(f"ENDPOINT_STAGING not found once in {constants}")
    text, n = re.subn(r'^USER\s*=.*$', f'USER = "{RENAMED_USER}"', text, flags=re.MULTILINE)
    if n != 1:
        raise RuntimeError(f"USER not found once in {constants}")
    constants.write_text(text)
    changed.append(f"tests/testing_constants.py (ENDPOINT_STAGING; USER = {RENAMED_USER!r}: no OCI name starts with _)")
    for name in files:
        path = work / "tests" / name
        if path.exists() and STAGING_LITERAL in (body := path.read_text()):
            path.write_text(body.replace(STAGING_LITERAL, serve_url))
            changed.append(f"tests/{name} ({body.count(STAGING_LITERAL)}x {STAGING_LITERAL})")

    pyproject = (hub_src / "pyproject.toml").read_text()
    start = pyproject.index("[tool.pytest.ini_options]")
    end = pyproject.find("\n[", start + 1)
    section = pyproject[start:end if end != -1 else None]

    def addopts(m: re.Match[str]) -> str:
        keep = []
        for opt in m.group(1).split():
            if opt == "-sv":
                keep.append("-v")
            elif opt != "-s" and not opt.startswith(("--log-cli-level", "--durations")):
                keep.append(opt)
        return f'addopts = "{" ".join(keep)}"'

    section, n_opts = re.subn(r'^addopts\s*=\s*"([^"]*)"', addopts, section, flags=re.MULTILINE)
    section, n_env = re.subn(r'"HUGGINGFACE_CO_STAGING=1",',
                             f'"HUGGINGFACE_CO_STAGING=0",\n    "HF_ENDPOINT={serve_url}",', section)
    if n_opts != 1 or n_env != 1:
        raise RuntimeError("the checkout's [tool.pytest.ini_options] changed: addopts or env not found")
    (work / "pyproject.toml").write_text(section + "\n")
    return changed


# -- reading the results -----------------------------------------------------------------------

ACCESS = re.compile(r'"(?P<method>[A-Z]+) (?P<path>\S+) HTTP/[\d.]+" (?P<status>\d{3})')
MARKER = "/healthz?hub-suite-test="
REPO_KINDS = {"models", "datasets", "spaces", "kernels", "buckets"}
REPO_VERBS = {"revision", "tree", "paths-info", "refs", "commit", "commits", "preupload", "xet-read-token",
              "xet-write-token", "branch", "tag", "settings", "lfs-files", "discussions", "super-squash",
              "treesize", "auth-check", "resolve", "likers", "scan", "compare", "access-requests"}


def route_of(path: str) -> str:
    """A request path with repo ids, revisions and file paths replaced by placeholders."""
    segs = unquote(path.split("?", 1)[0]).strip("/").split("/")
    if segs[0] == "api" and len(segs) > 2 and segs[1] in REPO_KINDS:
        rest = segs[2:]
        idx = next((i for i in (1, 2) if i < len(rest) and rest[i] in REPO_VERBS), None)
        if idx is None:
            return f"/api/{segs[1]}/{{repo}}" + ("/…" if len(rest) > 2 else "")
        after = rest[idx + 1:]
        return f"/api/{segs[1]}/{{repo}}/{rest[idx]}" + ("/{rev}" if after else "") + \
            ("/{path}" if len(after) > 1 else "")
    if segs[0] == "api":
        return "/" + "/".join(segs[:3])
    if segs[0] == "xet":
        for i, s in enumerate(segs):
            if s in ("reconstructions", "reconstruction", "xorbs", "xorb", "shards", "shard", "chunks"):
                return "/xet/{commit}/{repo}/" + "/".join([*segs[i - 1:i + 1], "…"])
        return "/xet/…"
    for i, s in enumerate(segs[1:4], start=1):
        if s in ("resolve", "blob", "tree", "commits", "compare"):
            return "/" + ("datasets/" if segs[0] == "datasets" else "") + f"{{repo}}/{s}/{{rev}}/{{path}}"
        if s.endswith(".git"):
            return "/{repo}.git/" + "/".join(segs[i + 1:])
    return "/" + "/".join(re.sub(r"[0-9a-f]{7,}|\d+", "{id}", s) for s in segs)


@dataclass
class TestTraffic:
    """What one test asked of serve (from serve's access log)."""

    requests: int = 0
    failing: list[str] = field(default_factory=list)  # "METHOD route -> status", status >= 400
    last: str = ""  # the last request, whatever its status


def split_access_log(log: Path) -> dict[str, TestTraffic]:
    traffic: dict[str, TestTraffic] = defaultdict(TestTraffic)
    current = None
    for line in log.read_text(errors="replace").splitlines():
        m = ACCESS.search(line)
        if not m:
            continue
        path = m.group("path")
        if path.startswith(MARKER):
            current = unquote(path[len(MARKER):])
            traffic[current]  # noqa: B018 - a test that sent nothing still has an entry
            continue
        if current is None or path.startswith(("/healthz", "/api/agent-harnesses", "/v1/telemetry")):
            continue
        t = traffic[current]
        t.requests += 1
        t.last = f"{m.group('method')} {route_of(path)} -> {m.group('status')}"
        if int(m.group("status")) >= 400:
            t.failing.append(t.last)
    return traffic


def serve_exceptions(stderr_log: Path) -> Counter[str]:
    """The last line (the exception) of each traceback serve logged, with where it was raised."""
    found: Counter[str] = Counter()
    where = ""
    in_tb = False
    for line in stderr_log.read_text(errors="replace").splitlines():
        if line.startswith("Traceback"):
            in_tb, where = True, ""
        elif in_tb and line.startswith('  File "'):
            m = re.match(r'  File "(?P<f>[^"]+)", line (?P<n>\d+), in (?P<fn>\S+)', line)
            if m and "/ocibridge/" in m.group("f"):
                where = f"{m.group('f').split('/ocibridge/', 1)[1]}:{m.group('n')} {m.group('fn')}"
        elif in_tb and line and not line.startswith((" ", "During handling", "The above")):
            found[f"{line[:200]} ({where})" if where else line[:200]] += 1
            in_tb = False
    return found


def nodeid_of(classname: str, name: str) -> str:
    parts = classname.split(".")  # tests.test_x[.Class...]
    return "/".join(parts[:2]) + ".py" + "".join(f"::{c}" for c in parts[2:]) + f"::{name}"


def first_line(message: str) -> str:
    lines = [ln.strip() for ln in message.strip().splitlines() if ln.strip()]
    if not lines:
        return ""
    line = lines[0]
    if line.endswith(":") and len(lines) > 1:  # "BadRequestError: Bad request:" / the server's words
        line += " " + lines[1]
    return line[:400]


def normalize(line: str, serve_url: str) -> str:
    line = line.replace(serve_url, "{serve}")
    if line.startswith("failed on "):
        line = re.sub(r"^failed on (setup|teardown) with \"", "", line).removesuffix('"')
    # testing_utils.repo_name(): PREFIX-ID-TIMESTAMP (14 digits), maybe after a namespace
    line = re.sub(r"(?:[\w.-]+/)?[\w.-]+-\d{12,}\b", "{repo}", line)
    line = re.sub(r"/tmp/\S+", "{tmp}", line)
    line = re.sub(r"\b[0-9a-f]{12,}\b", "{hex}", line)
    line = re.sub(r"\b\d{3,}\b", "{n}", line)
    line = re.sub(r"0x[0-9a-f]+", "{addr}", line)
    return line[:200]


@dataclass
class Result:
    outcome: str
    error: str = ""
    phase: str = "call"
    serve_requests: int = 0
    serve_failing: list[str] = field(default_factory=list)
    serve_last: str = ""
    other_hosts: dict[str, int] = field(default_factory=dict)
    #: a setup error pytest reported again from a class or module fixture that failed in an earlier
    #: test (no request of its own): that earlier test's id
    inherited_from: str = ""


def read_junit(path: Path) -> dict[str, Result]:
    results: dict[str, Result] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        nodeid = nodeid_of(case.get("classname", ""), case.get("name", ""))
        result = Result("passed")
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                message = child.get("message", "") or (child.text or "")
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[child.tag]
                if result.outcome == "passed" or (result.outcome == "skipped" and outcome != "skipped"):
                    result = Result(outcome, first_line(message))
                    if message.startswith("failed on teardown"):
                        result.phase = "teardown"
                    elif message.startswith("failed on setup"):
                        result.phase = "setup"
        results[nodeid] = result
    return results


# -- the summary -------------------------------------------------------------------------------


def cause_of(result: Result, serve_url: str) -> str:
    """A failure's group: serve's last failing answer in the test, and the normalized error."""
    error = normalize(result.error, serve_url)
    failing = result.serve_failing
    if "Timeout (>" in error:
        return "pytest-timeout: the test did not finish" + (
            f" (last failing answer: {failing[-1]})" if failing else "")
    route = failing[-1] if failing else "no 4xx/5xx from serve"
    return f"{route} | {error}"


def inherit_setup_failures(results: dict[str, Result], serve_url: str) -> None:
    """Give a setup error without requests the requests of the first test of its module that failed
    with the same error (pytest reports a failed class/module fixture again for each test)."""
    first: dict[tuple[str, str], str] = {}
    for nodeid, r in results.items():  # junit order: the order the tests ran
        if r.outcome != "error":
            continue
        key = (nodeid.split("::", 1)[0], normalize(r.error, serve_url))
        if r.serve_requests:
            first.setdefault(key, nodeid)
        elif key in first:
            origin = results[first[key]]
            r.inherited_from, r.serve_failing, r.serve_last = first[key], origin.serve_failing, origin.serve_last


def write_summary(out: Path, results: dict[str, Result], deselected: list[list[str]], meta: dict[str, str],
                  serve_url: str, exceptions: Counter[str]) -> str:
    counts = Counter(r.outcome for r in results.values())
    online = Counter(r.outcome for r in results.values() if r.serve_requests or r.inherited_from)
    offline = Counter(r.outcome for r in results.values() if not (r.serve_requests or r.inherited_from))

    def row(label: str, c: Counter[str]) -> str:
        return f"| {label} | {c.total()} | {c['passed']} | {c['failed']} | {c['error']} | {c['skipped']} |"

    lines = [f"# huggingface_hub {meta['hub_version']} ({meta['hub_commit']}) against ocibridge serve "
             f"({meta['ocibridge_tree']})", "",
             f"- run {meta['started']}, {meta['duration']}; `{meta['command']}`",
             f"- serve: `{meta['serve_command']}`; pytest exit {meta['pytest_exit']}",
             f"- tests copied with these changes: {meta['changed']}",
             f"- the suite's environment: `{meta.get('client_env', '')}`", "",
             "| tests | count | passed | failed | errors | skipped |", "|---|---|---|---|---|---|",
             row("in scope", counts),
             row("reached serve (or shared a fixture that did)", online),
             row("no request to serve (offline unit tests)", offline), "",
             f"Excluded: {len(deselected)} (below). 'Reached serve' is read from serve's access log, cut at "
             "each test's marker request (hf_xet's requests included).", ""]
    lines += ["## Excluded", "", "| group | tests | reason |", "|---|---|---|"]
    by_group = Counter(g for _, g in deselected)
    for rule in EXCLUDE:
        lines.append(f"| {rule.group} | {by_group.get(rule.group, 0)} | {rule.reason} |")
    redirected = meta.get("redirected", "")
    if redirected:
        lines += ["", f"Sent to serve instead of huggingface.co ({', '.join(REDIRECT_TO_SERVE)}): {redirected}"]
    other = {k: r.other_hosts for k, r in results.items() if r.other_hosts}
    if other:
        lines += ["", f"Tests that asked another host than serve ({len(other)}): " +
                  ", ".join(f"`{k}` ({', '.join(v)})" for k, v in list(other.items())[:10])]
    skips = Counter(normalize(r.error, serve_url) for r in results.values() if r.outcome == "skipped")
    lines += ["", "## Skipped", ""] + [f"- {n} × {reason}" for reason, n in skips.most_common()]

    groups: dict[str, list[str]] = defaultdict(list)
    for nodeid, r in results.items():
        if r.outcome in ("failed", "error"):
            groups[cause_of(r, serve_url)].append(nodeid)
    lines += ["", "## Failures by cause (serve's last 4xx/5xx in the test | the test's error)", ""]
    for i, (cause, ids) in enumerate(sorted(groups.items(), key=lambda kv: -len(kv[1])), start=1):
        own = [k for k in ids if not results[k].inherited_from]
        answers = Counter(a for k in own for a in set(results[k].serve_failing))
        lasts = Counter(results[k].serve_last for k in own if results[k].serve_last)
        inherited = sum(1 for k in ids if results[k].inherited_from)
        lines += [f"### {i}. {len(ids)} × {cause}", ""]
        lines += [f"- `{k}` ({results[k].outcome}{', in ' + results[k].phase if results[k].phase != 'call' else ''})"
                  for k in ids[:3]]
        if answers:
            lines.append("- serve's 4xx/5xx in these tests: " +
                         "; ".join(f"{a} ({n})" for a, n in answers.most_common(6)))
        if lasts:
            lines.append("- the last request of each test: " +
                         "; ".join(f"{a} ({n})" for a, n in lasts.most_common(4)))
        if inherited:
            lines.append(f"- {inherited} of these: the same class/module fixture failed again (its requests counted "
                         "once, in the first test)")
        lines.append("")
    if exceptions:
        lines += ["## serve's unhandled exceptions (serve-stderr.log)", ""]
        lines += [f"- {n} × {e}" for e, n in exceptions.most_common(15)]
    text = "\n".join(lines) + "\n"
    (out / "summary.md").write_text(text)
    return text


# -- the run -----------------------------------------------------------------------------------


def run_pytest(cmd: list[str], env: dict[str, str], cwd: Path, log: Path) -> int:
    with log.open("wb") as f:
        proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=f, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            return proc.wait()
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()


def git_commit(path: Path) -> str:
    try:
        sha = subprocess.run(["git", "-C", str(path), "rev-parse", "--short=10", "HEAD"],
                             capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(path), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return sha + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C, so serve and the registry are stopped either way."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--resummarize", type=Path, metavar="DIR",
                    help="only write results.json and summary.md again from the run kept in DIR")
    ap.add_argument("--hub-src", type=Path, help="a huggingface_hub checkout (work tree)")
    ap.add_argument("--hub-python", type=Path,
                    help="a python with that checkout installed (pip install -e 'SRC[testing]')")
    ap.add_argument("--only", help="a pytest -k expression within the in-scope selection")
    ap.add_argument("--files", help="comma-separated test files instead of IN_SCOPE_FILES")
    ap.add_argument("--out", type=Path, help="default /work/hubsuite-runs/<timestamp>")
    ap.add_argument("--timeout", type=int, default=120, help="seconds per test (pytest-timeout)")
    ap.add_argument("--serve-arg", action="append", default=[], help="an extra argument for serve (repeatable)")
    ap.add_argument("--pytest-arg", action="append", default=[], help="an extra argument for pytest (repeatable)")
    ap.add_argument("--ocibridge-ref", help="serve the tree of this commit (e.g. HEAD) instead of the work tree, "
                    "so others' uncommitted edits are left out")
    ap.add_argument("--no-xet", action="store_true",
                    help="HF_HUB_DISABLE_XET=1: uploads and downloads over LFS and resolve (xet-marked tests still "
                    "use Xet: the suite's conftest forces it)")
    ap.add_argument("--keep-work", action="store_true", help="keep the temporary copy of tests and caches")
    args = ap.parse_args(argv)
    if args.resummarize:
        return report(args.resummarize)
    if args.hub_src is None or args.hub_python is None:
        ap.error("--hub-src and --hub-python are required")
    if any(a.startswith(("-n", "--numprocesses", "--dist")) for a in args.pytest_arg):
        ap.error("the tests run one at a time: serve's access log is cut at each test's marker request")

    hub_src, hub_python = args.hub_src.resolve(), args.hub_python.absolute()
    started = datetime.now(timezone.utc)
    out = (args.out or Path("/work/hubsuite-runs") / started.strftime("%Y%m%dT%H%M%SZ")).resolve()
    out.mkdir(parents=True, exist_ok=True)
    files = args.files.split(",") if args.files else IN_SCOPE_FILES

    probe = subprocess.run([str(hub_python), "-c", "import huggingface_hub, importlib.util as u; "
                            "print(huggingface_hub.__version__); print(huggingface_hub.__file__); "
                            "print(bool(u.find_spec('pytest_timeout'))); print(bool(u.find_spec('hf_xet')))"],
                           capture_output=True, text=True, check=True).stdout.split("\n")
    hub_version, hub_file, has_timeout, has_xet = probe[0], probe[1], probe[2] == "True", probe[3] == "True"
    if not Path(hub_file).resolve().is_relative_to(hub_src):
        raise SystemExit(f"{hub_python} imports huggingface_hub from {hub_file}, not from {hub_src}")
    if not has_xet:
        print("hub_suite: hf_xet is not installed in the hub python: xet-marked tests will be skipped",
              file=sys.stderr)

    consts = hub_constants(hub_src)
    ocibridge_ref_sha = ""
    if args.ocibridge_ref:
        ocibridge_ref_sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=10", args.ocibridge_ref],
                                           capture_output=True, text=True, check=True).stdout.strip()
    work = Path(tempfile.mkdtemp(prefix="hub-suite-"))
    registry: RegistryProcess | None = None
    serve: Serve | None = None
    t0 = time.monotonic()
    try:
        with terminate_as_interrupt():
            registry = RegistryProcess(work / "registry", log_level="warn")
            token_file = work / "tokens.txt"
            token_file.write_text(TOKEN_FILE.format(**{**consts, "USER": RENAMED_USER,
                                                       "FULL_NAME_IN_FILE": quote(consts.get("FULL_NAME", "")),
                                                       "ORG_IN_FILE": f"{CI_ORG}:{quote(CI_ORG_FULL_NAME)}"}))
            source = snapshot_of(args.ocibridge_ref, work / "ocibridge-src") if args.ocibridge_ref else ROOT
            serve = start_serve(registry.host, work, out, token_file,
                                [sys.executable, "-m", "ocibridge", "serve"], args.serve_arg, source)
            changed = prepare_tests(hub_src, work / "suite", serve.url, files)
            (work / "suite" / "hub_suite_probe.py").write_text(PROBE_PLUGIN)
            probe_cfg = work / "probe.json"
            probe_out = out / "probe.json"
            probe_cfg.write_text(json.dumps({
                "serve": serve.url, "out": str(probe_out), "redirect": REDIRECT_TO_SERVE,
                "exclude": [{"group": e.group, "pattern": e.pattern, "markers": list(e.markers),
                             "fixtures": list(e.fixtures), "source": e.source} for e in EXCLUDE]}))
            env = {k: v for k, v in os.environ.items()  # nothing of this shell's Hub or ocibridge settings
                   if not k.startswith(("HF_", "HUGGINGFACE_", "OCIBRIDGE_", "PYTHONPATH", "VIRTUAL_ENV"))}
            env.update({
                "PYTHONPATH": str(work / "suite"), "HUB_SUITE_PROBE": str(probe_cfg),
                "HF_ENDPOINT": serve.url, "HUGGINGFACE_CO_STAGING": "0",
                "HF_HOME": str(work / "hf-home"), "HF_XET_CACHE": str(work / "xet-cache"),
                # hf_xet retries a 5xx after 0.1 s, not 3 s and more (as ocibridge's own suite)
                "HF_XET_CLIENT_RETRY_BASE_DELAY": "100ms",
            })
            if args.no_xet:
                env["HF_HUB_DISABLE_XET"] = "1"
            junit = out / "junit.xml"
            cmd = [str(hub_python), "-m", "pytest", "-c", str(work / "suite" / "pyproject.toml"),
                   "--rootdir", str(work / "suite"), "-p", "no:cacheprovider", "-p", "hub_suite_probe",
                   f"--junitxml={junit}", "-o", "junit_logging=no", "-rfEs",
                   *([f"--timeout={args.timeout}"] if has_timeout else []),
                   *(["-k", args.only] if args.only else []), *args.pytest_arg,
                   *[f"tests/{f}" for f in files]]
            (out / "pytest-command.txt").write_text(" ".join(cmd) + "\n")
            print(f"hub_suite: serve {serve.url} on registry {registry.host}; pytest log {out / 'pytest.log'}",
                  file=sys.stderr)
            rc = run_pytest(cmd, env, work / "suite", out / "pytest.log")
    finally:
        if serve is not None:
            serve.stop()
        if registry is not None:
            shutil.copy(registry.log_file, out / "registry.log")
            registry.stop()
        if not args.keep_work:
            shutil.rmtree(work, ignore_errors=True)
    duration = time.monotonic() - t0
    assert serve is not None

    meta = {"hub_version": hub_version, "hub_commit": git_commit(hub_src), "serve_url": serve.url,
            "ocibridge_tree": f"commit {args.ocibridge_ref} = {ocibridge_ref_sha}" if args.ocibridge_ref
            else f"work tree at {git_commit(ROOT)}, uncommitted edits included",
            "started": started.strftime("%Y-%m-%d %H:%M UTC"), "duration": f"{duration / 60:.1f} min",
            "command": " ".join(["python -m bench.hub_suite", *(argv if argv is not None else sys.argv[1:])]),
            "serve_command": (out / "serve-command.txt").read_text().strip(), "changed": "; ".join(changed),
            "pytest_exit": str(rc),
            "client_env": " ".join(f"{k}={v}" for k, v in sorted(env.items())
                                   if k.startswith(("HF_", "HUGGINGFACE_")))}
    (out / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    return report(out)


def report(out: Path) -> int:
    """results.json and summary.md of the run kept in ``out`` (``--resummarize`` does only this)."""
    meta: dict[str, str] = json.loads((out / "meta.json").read_text())
    serve_url = meta["serve_url"]
    if not (out / "junit.xml").exists():
        raise SystemExit(f"pytest wrote no junit xml (exit {meta['pytest_exit']}); see {out / 'pytest.log'}")
    results = read_junit(out / "junit.xml")
    traffic = split_access_log(out / "serve-access.log")
    probe_out = out / "probe.json"
    probe_data = json.loads(probe_out.read_text()) if probe_out.exists() else {}
    probe_data = {"deselected": [], "other_hosts": {}, "redirected": {}, **probe_data}
    for nodeid, r in results.items():
        t = traffic.get(nodeid)
        if t is not None:
            r.serve_requests, r.serve_failing, r.serve_last = t.requests, t.failing, t.last
        r.other_hosts = probe_data["other_hosts"].get(nodeid, {})
    inherit_setup_failures(results, serve_url)
    (out / "results.json").write_text(json.dumps(
        {k: {"outcome": r.outcome, "error": r.error, "phase": r.phase, "serve_requests": r.serve_requests,
             "serve_failing": r.serve_failing[-5:], "serve_last": r.serve_last,
             "fixture_failed_in": r.inherited_from, "other_hosts": r.other_hosts}
         for k, r in sorted(results.items())}, indent=1) + "\n")
    meta["redirected"] = ", ".join(f"`{k}` ({n})" for k, n in probe_data["redirected"].items())
    summary = write_summary(out, results, probe_data["deselected"], meta, serve_url,
                            serve_exceptions(out / "serve-stderr.log"))
    print(summary.split("## Excluded")[0])
    print(f"hub_suite: {out / 'summary.md'} (pytest exit {meta['pytest_exit']})")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("hub_suite: interrupted (serve and the registry were stopped)", file=sys.stderr)
        sys.exit(130)
