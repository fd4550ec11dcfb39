"""The ``datasets`` library's own Hub tests, run against ``ocibridge serve`` on a fresh local registry.

    .venv/bin/python -m bench.datasets_suite --datasets-git /work/.mirror/huggingface+datasets/repo \\
        --datasets-python /tmp/dsrc/venv/bin/python [--ocibridge-src /work/main] [--out DIR]
    .venv/bin/python -m bench.datasets_suite ... --serve-url http://HOST:PORT   # a serve already running
    .venv/bin/python -m bench.datasets_suite --print-token-file SRC             # the tokens such a serve needs
    .venv/bin/python -m bench.datasets_suite --resummarize DIR

``--datasets-src``: the library's source at the version ``--datasets-python`` imports (its
``tests/`` with ``conftest.py`` and ``fixtures/``: the sdist on PyPI lacks them, so a checkout or the
GitHub tag's tree), or ``--datasets-git``: a clone or mirror of the repository, whose tag of that
version the harness writes out itself. ``--datasets-python``: a python with that ``datasets`` and
what the selected test files import (docs/datasets-suite.md lists it).

As bench/hub_suite.py does for huggingface_hub: a fresh ``docker-registry`` and a fresh serve of it
(started from ``--ocibridge-src``, this tree by default, with this venv's python), a temporary copy
of the checkout's ``tests/`` in which only ``tests/fixtures/hub.py``'s endpoint and user constants
change (CI_HUB_ENDPOINT: serve; CI_HUB_USER: no OCI name starts with ``_``; the token stays, in
serve's token file), then the Hub tests (IN_SCOPE below) less the exclusions, each with its
reason, counted in ``summary.md`` beside each test's outcome. The checkout is never written.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import quote

from bench import hub_suite as hs
from tests.support.registry import RegistryProcess

#: the suite's CI user, renamed: "__DUMMY_DATASETS_USER__" starts with "_", which no OCI repository
#: name may (distribution's path-component grammar)
RENAMED_USER = "dummy-datasets-user"
TOKEN_FILE = """\
{CI_HUB_USER_TOKEN} user={USER} write=* fullname={FULL_NAME}
anonymous read=*
"""
#: the files holding the Hub tests: test_upstream_hub.py and those with integration-marked tests
#: or tests of the CI Hub's fixtures (tests/fixtures/hub.py)
FILES = [
    "test_upstream_hub.py", "test_load.py", "test_file_utils.py", "test_data_files.py", "test_hub.py",
    "test_inspect.py", "test_streaming_download_manager.py", "test_offline_util.py", "test_fingerprint.py",
    "test_arrow_dataset.py", "test_iterable_dataset.py", "test_distributed.py", "test_search.py",
    "packaged_modules/test_cache.py", "features/test_audio.py", "commands/test_test.py",
]
#: the fixtures of tests/fixtures/hub.py that reach the CI Hub (the endpoint this harness changes)
CI_FIXTURES = ["ci_hub_config", "set_ci_hub_access_token", "hf_api", "hf_token", "temporary_repo", "cleanup_repo",
               "hf_private_dataset_repo_txt_data", "hf_private_dataset_repo_zipped_txt_data",
               "hf_private_dataset_repo_zipped_img_data", "hf_gated_dataset_repo_txt_data"]


@dataclass(frozen=True)
class Exclusion:
    """Hub tests left out of scope: a regex over the node id, fixtures, or a regex over the source."""

    group: str
    reason: str
    pattern: str = ""
    fixtures: tuple[str, ...] = ()
    source: str = ""


#: first match wins (the first is the plugin's own test); a test neither integration-marked nor using a CI
#: fixture is no Hub test
EXCLUDE = [
    Exclusion("not the CI Hub", "integration-marked but no CI Hub fixture: public datasets and models of "
              "huggingface.co (rajpurkar/squad, hf-internal-testing/...), Google Drive files, Elasticsearch and FAISS, "
              "torch.distributed: nothing asked of the endpoint this harness changes"),
    Exclusion("buckets", "Hub storage buckets (not repositories)", pattern=r"bucket",
              fixtures=("temporary_bucket", "cleanup_bucket")),
    Exclusion("pull requests", "push_to_hub(create_pr=True), refs/pr/N: discussions and pull requests are not in "
              "serve's scope", pattern=r"pull_request|_pr\b", source=r"create_pr\s*=\s*True|refs/pr/"),
    Exclusion("parquet conversion", "refs/convert/parquet, the Hub's conversion bot", source=r"refs/convert"),
]

DOC_HEAD = """# The `datasets` library's Hub tests against serve

Written by `python -m bench.datasets_suite --doc docs/datasets-suite.md` (bench/datasets_suite.py), as
bench/hub_suite.py runs huggingface_hub's own tests: a fresh `docker-registry`, a fresh `ocibridge serve`
of it started from `--ocibridge-src` (default: the tree the harness is in), and the `datasets` library's
`tests/` copied with only `tests/fixtures/hub.py`'s `CI_HUB_ENDPOINT` (serve) and `CI_HUB_USER` (no OCI
name starts with `_`) changed; the suite's token is in serve's token file (`--print-token-file SRC`
prints it, for a serve given by `--serve-url`).

In scope: every test of `tests/test_upstream_hub.py` and of the other files below that reaches the CI
Hub (a fixture of `tests/fixtures/hub.py`: `ci_hub_config`, `hf_api`, `hf_token`, `temporary_repo`,
the private and gated dataset repositories), less the groups the table names with their reasons.

The library's source must be the installed version's, with `tests/conftest.py`, `tests/utils.py` and
`tests/fixtures/` (PyPI's sdist lacks them): `--datasets-src` a tree of it, or `--datasets-git` a clone
or mirror of huggingface/datasets whose tag of the installed version the harness writes out (a file whose
blob the mirror lacks is left out: two mesh files of `tests/features/data` here). The python is a
venv of `datasets==5.0.1` (the mirror's latest tag) with `pytest pytest-datadir pytest-timeout Pillow absl-py decorator
zstandard lz4 py7zr rarfile aiohttp sqlalchemy "joblib<1.3.0"` (what the selected files import;
tests needing torch, torchcodec or soundfile skip themselves).
"""

PLUGIN = r'''
"""Written by ocibridge's bench/datasets_suite.py: keeps the Hub tests, deselects the exclusions,
marks each test in serve's access log."""
import inspect, json, os, re, urllib.parse, urllib.request
import pytest

_CFG = json.loads(open(os.environ["DATASETS_SUITE_PROBE"]).read())
_DESELECTED = []


def _source(item):
    try:
        return inspect.getsource(item.function)
    except (AttributeError, OSError, TypeError):
        return ""


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    kept, dropped = [], []
    ci = set(_CFG["ci_fixtures"])
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        source = _source(item)
        integration = item.get_closest_marker("integration") is not None
        reaches_ci = bool(fixtures & ci) or "CI_HUB_" in source
        group = None
        if not integration and not reaches_ci:
            group = "not a Hub test"
        elif not reaches_ci:
            group = "not the CI Hub"
        else:
            for rule in _CFG["exclude"]:
                if (rule["pattern"] and re.search(rule["pattern"], item.nodeid, re.IGNORECASE)) \
                        or fixtures & set(rule["fixtures"]) or (rule["source"] and re.search(rule["source"], source)):
                    group = rule["group"]
                    break
        (kept if group is None else dropped).append(item)
        if group is not None:
            _DESELECTED.append([item.nodeid, group])
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def pytest_runtest_logstart(nodeid, location):
    url = _CFG["serve"] + "/healthz?hub-suite-test=" + urllib.parse.quote(nodeid, safe="")
    try:
        urllib.request.urlopen(url, timeout=5).read()
    except Exception:
        pass


def pytest_sessionfinish(session, exitstatus):
    with open(_CFG["out"], "w") as f:
        json.dump({"deselected": _DESELECTED}, f, indent=1)
'''


def hub_fixture_constants(src: Path) -> dict[str, str]:
    """The string constants of the checkout's tests/fixtures/hub.py."""
    tree = ast.parse((src / "tests" / "fixtures" / "hub.py").read_text())
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            found.update({t.id: node.value.value for t in node.targets if isinstance(t, ast.Name)})
    return found


def token_file_text(src: Path) -> str:
    consts = hub_fixture_constants(src)
    return TOKEN_FILE.format(CI_HUB_USER_TOKEN=consts["CI_HUB_USER_TOKEN"], USER=RENAMED_USER,
                             FULL_NAME=quote(consts.get("CI_HUB_USER_FULL_NAME", "")))


def prepare_tests(src: Path, work: Path, serve_url: str) -> list[str]:
    """tests/ copied into ``work`` with the endpoint and user constants at serve; the changes made."""
    shutil.copytree(src / "tests", work / "tests")
    fixture = work / "tests" / "fixtures" / "hub.py"
    text = fixture.read_text()
    for name, value in (("CI_HUB_ENDPOINT", serve_url), ("CI_HUB_USER", RENAMED_USER)):
        text, n = re.subn(rf'^{name}\s*=.*$', f'{name} = "{value}"', text, flags=re.MULTILINE)
        if n != 1:
            raise RuntimeError(f"{name} not found once in {fixture}")
    fixture.write_text(text)
    pyproject = (src / "pyproject.toml").read_text()
    start = pyproject.index("[tool.pytest.ini_options]")
    end = pyproject.find("\n[", start + 1)
    (work / "pyproject.toml").write_text(pyproject[start:end if end != -1 else None] + "\n")
    return [f"tests/fixtures/hub.py (CI_HUB_ENDPOINT = serve; CI_HUB_USER = {RENAMED_USER!r})"]


def tag_tree(git_dir: Path, tag: str, into: Path) -> Path:
    """The tree of ``tag`` of the datasets repository at ``git_dir`` (a clone or a bare mirror)
    written to ``into``; a file whose blob the mirror lacks (large test data) is left out."""
    listed = subprocess.run(["git", "-C", str(git_dir), "ls-tree", "-r", "-z", tag], capture_output=True,
                            check=True).stdout.split(b"\0")
    for entry in filter(None, listed):
        meta, path = entry.split(b"\t", 1)
        mode, kind, sha = meta.split()
        if kind != b"blob" or mode == b"120000" or b".." in path.split(b"/"):
            continue
        blob = subprocess.run(["git", "-C", str(git_dir), "cat-file", "blob", sha.decode()], capture_output=True)
        if blob.returncode != 0:
            continue
        target = into / path.decode()
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(blob.stdout)
    return into


def run(args: argparse.Namespace, out: Path) -> dict[str, str]:
    py = args.datasets_python.absolute()
    probe = subprocess.run([str(py), "-c", "import datasets, huggingface_hub; print(datasets.__version__); "
                            "print(huggingface_hub.__version__)"], capture_output=True, text=True, check=True)
    ds_version, hub_version = probe.stdout.split()[:2]
    if args.datasets_src is None:  # the installed version's tag, from the repository --datasets-git names
        args.datasets_src = tag_tree(args.datasets_git, ds_version, out / "datasets-src")
    src = args.datasets_src.resolve()
    said = re.search(r'version="([^"]+)"', (src / "setup.py").read_text())
    if said is None or said.group(1) != ds_version:
        raise SystemExit(f"{src} is datasets {said.group(1) if said else '?'}, {py} imports {ds_version}: "
                         "the tests must be the installed version's")
    work = Path(tempfile.mkdtemp(prefix="datasets-suite-"))
    registry: RegistryProcess | None = None
    serve: hs.Serve | None = None
    serve_url, serve_cmd = args.serve_url, "given: --serve-url"
    t0 = time.monotonic()
    try:
        with hs.terminate_as_interrupt():
            if serve_url is None:
                registry = RegistryProcess(work / "registry", log_level="warn")
                token_file = work / "tokens.txt"
                token_file.write_text(token_file_text(src))
                source = args.ocibridge_src.resolve()
                serve = hs.start_serve(registry.host, work, out, token_file,
                                       [sys.executable, "-m", "ocibridge", "serve"], args.serve_arg, source)
                serve_url, serve_cmd = serve.url, (out / "serve-command.txt").read_text().strip()
            changed = prepare_tests(src, work / "suite", serve_url)
            (work / "suite" / "datasets_suite_probe.py").write_text(PLUGIN)
            cfg = work / "probe.json"
            rules = [{"group": e.group, "pattern": e.pattern, "fixtures": list(e.fixtures), "source": e.source}
                     for e in EXCLUDE[1:]]
            cfg.write_text(json.dumps({"serve": serve_url, "out": str(out / "probe.json"), "ci_fixtures": CI_FIXTURES,
                                       "exclude": rules}))
            env = {k: v for k, v in os.environ.items()
                   if not k.startswith(("HF_", "HUGGINGFACE_", "OCIBRIDGE_", "PYTHONPATH", "VIRTUAL_ENV"))}
            env.update({"PYTHONPATH": str(work / "suite"), "DATASETS_SUITE_PROBE": str(cfg),
                        "HF_HOME": str(work / "hf-home"), "HF_XET_CACHE": str(work / "xet-cache"),
                        "HF_XET_CLIENT_RETRY_BASE_DELAY": "100ms"})
            cmd = [str(py), "-m", "pytest", "-c", str(work / "suite" / "pyproject.toml"), "--rootdir",
                   str(work / "suite"), "-p", "no:cacheprovider", "-p", "datasets_suite_probe",
                   f"--junitxml={out / 'junit.xml'}", "-o", "junit_logging=no", "-rfEs", f"--timeout={args.timeout}",
                   *(["-k", args.only] if args.only else []), *args.pytest_arg,
                   *[f"tests/{f}" for f in FILES if (src / "tests" / f).exists()]]
            (out / "pytest-command.txt").write_text(" ".join(cmd) + "\n")
            print(f"datasets_suite: serve {serve_url}; pytest log {out / 'pytest.log'}", file=sys.stderr)
            rc = hs.run_pytest(cmd, env, work / "suite", out / "pytest.log")
    finally:
        if serve is not None:
            serve.stop()
        if registry is not None:
            shutil.copy(registry.log_file, out / "registry.log")
            registry.stop()
        if not args.keep_work:
            shutil.rmtree(work, ignore_errors=True)
    return {"datasets_version": ds_version, "hub_version": hub_version, "serve_url": serve_url,
            "serve_command": serve_cmd, "changed": "; ".join(changed), "pytest_exit": str(rc),
            "ocibridge_tree": f"{args.ocibridge_src} at {hs.git_commit(args.ocibridge_src)}" if args.serve_url is None
            else "a serve given by URL", "duration": f"{(time.monotonic() - t0) / 60:.1f} min",
            "started": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "command": " ".join(["python -m bench.datasets_suite", *sys.argv[1:]])}


def server_words(junit: Path) -> dict[str, str]:
    """Each failure's first line, with the server's own words where huggingface_hub's error opens with
    only its request id (``BadRequestError: (Request ID: …)``, the answer's message lines below)."""
    import xml.etree.ElementTree as ET

    found = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        for child in case:
            lines = [ln.strip() for ln in (child.get("message") or "").splitlines() if ln.strip()]
            if child.tag in ("failure", "error") and lines and "(Request ID:" in lines[0] and len(lines) > 1:
                found[hs.nodeid_of(case.get("classname", ""), case.get("name", ""))] = \
                    f"{lines[0].split(':', 1)[0]}: {' '.join(lines[1:3])}"[:400]
    return found


def report(out: Path, doc: Path | None = None) -> int:
    """results.json and summary.md of the run kept in ``out`` (and the docs page ``doc``); the counts printed."""
    meta = json.loads((out / "meta.json").read_text())
    if not (out / "junit.xml").exists():
        raise SystemExit(f"pytest wrote no junit xml (exit {meta['pytest_exit']}); see {out / 'pytest.log'}")
    results = hs.read_junit(out / "junit.xml")
    for nodeid, words in server_words(out / "junit.xml").items():
        results[nodeid].error = words
    log = out / "serve-access.log"
    traffic = hs.split_access_log(log) if log.exists() else {}
    for nodeid, r in results.items():
        t = traffic.get(nodeid)
        if t is not None:
            r.serve_requests, r.serve_failing, r.serve_last = t.requests, t.failing, t.last
    hs.inherit_setup_failures(results, meta["serve_url"])  # a session fixture's requests, given to its tests
    deselected = json.loads((out / "probe.json").read_text())["deselected"] if (out / "probe.json").exists() else []
    (out / "results.json").write_text(json.dumps(
        {k: {"outcome": r.outcome, "error": r.error, "serve_failing": r.serve_failing[:5], "serve_last": r.serve_last}
         for k, r in sorted(results.items())}, indent=1) + "\n")
    counts = Counter(r.outcome for r in results.values())
    ran = counts["passed"] + counts["failed"] + counts["error"]
    share = f"{100 * counts['passed'] / ran:.1f} %" if ran else "-"
    by_group = Counter(g for _, g in deselected)
    lines = [f"# datasets {meta['datasets_version']} (huggingface_hub {meta['hub_version']}) against ocibridge serve "
             f"({meta['ocibridge_tree']})", "",
             f"- run {meta['started']}, {meta['duration']}; `{meta['command']}`",
             f"- serve: `{meta['serve_command']}`; pytest exit {meta['pytest_exit']}",
             f"- tests copied with these changes: {meta['changed']}", "",
             "| in scope | passed | failed | errors | skipped | passed of those run |", "|---|---|---|---|---|---|",
             f"| {counts.total()} | {counts['passed']} | {counts['failed']} | {counts['error']} | {counts['skipped']} "
             f"| {share} |", "", "## Out of scope", "", "| group | tests | reason |", "|---|---|---|",
             f"| not a Hub test | {by_group['not a Hub test']} | neither integration-marked nor using a CI Hub "
             "fixture (offline unit tests of the same files) |"]
    lines += [f"| {e.group} | {by_group[e.group]} | {e.reason} |" for e in EXCLUDE]
    lines += ["", "## Each test in scope", "", "| test | outcome | first error line | serve's first 4xx/5xx |",
              "|---|---|---|---|"]
    for nodeid, r in sorted(results.items()):
        error = hs.normalize(r.error, meta["serve_url"]).replace("|", "/")
        lines.append(f"| `{nodeid}` | {r.outcome} | {error} | {r.serve_failing[0] if r.serve_failing else ''} |")
    lines += ["", "## Each test out of scope", ""]
    lines += [f"- `{nodeid}`: {group}" for nodeid, group in sorted(deselected) if group != "not a Hub test"]
    text = "\n".join(lines) + "\n"
    (out / "summary.md").write_text(text)
    if doc is not None:  # the docs page: how to run it, then this run's summary
        run_text = text.replace("\n## ", "\n### ").replace("# datasets ", "## This run: datasets ", 1)
        doc.write_text(DOC_HEAD + "\n" + run_text)
        print(f"datasets_suite: wrote {doc}")
    print(text.split("## Out of scope")[0])
    print(f"datasets_suite: {out / 'summary.md'} (pytest exit {meta['pytest_exit']})")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--resummarize", type=Path, metavar="DIR", help="only write summary.md again from DIR")
    ap.add_argument("--print-token-file", type=Path, metavar="SRC",
                    help="print the token file a serve given by --serve-url needs for the checkout SRC")
    ap.add_argument("--datasets-src", type=Path, help="the datasets library's source tree (with tests/)")
    ap.add_argument("--datasets-git", type=Path, help="instead: a clone or mirror of huggingface/datasets, whose "
                    "tag of the installed version is written into --out")
    ap.add_argument("--datasets-python", type=Path, help="a python importing that version of datasets")
    ap.add_argument("--ocibridge-src", type=Path, default=hs.ROOT,
                    help="the ocibridge tree serve runs from (default: this one), e.g. the merged checkout")
    ap.add_argument("--serve-url", help="a serve already running (its token file: --print-token-file)")
    ap.add_argument("--only", help="a pytest -k expression within the selection")
    ap.add_argument("--out", type=Path, help="default /work/datasets-suite-runs/<timestamp>")
    ap.add_argument("--timeout", type=int, default=180, help="seconds per test (pytest-timeout)")
    ap.add_argument("--serve-arg", action="append", default=[], help="an extra argument for serve (repeatable)")
    ap.add_argument("--pytest-arg", action="append", default=[], help="an extra argument for pytest (repeatable)")
    ap.add_argument("--doc", type=Path, help="also write the summary as this docs page (docs/datasets-suite.md)")
    ap.add_argument("--keep-work", action="store_true", help="keep the temporary copy of tests and caches")
    args = ap.parse_args(argv)
    if args.resummarize:
        return report(args.resummarize, args.doc)
    if args.print_token_file:
        print(token_file_text(args.print_token_file), end="")
        return 0
    if (args.datasets_src is None) == (args.datasets_git is None) or args.datasets_python is None:
        ap.error("--datasets-python and one of --datasets-src and --datasets-git are required")
    out = (args.out or Path("/work/datasets-suite-runs") / datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ"))
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    (out / "meta.json").write_text(json.dumps(run(args, out), indent=1) + "\n")
    return report(out, args.doc)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("datasets_suite: interrupted (serve and the registry were stopped)", file=sys.stderr)
        sys.exit(130)
