"""The docs' examples, run as a reader runs them (issue 78): in a working directory whose ``tiny``
is a copy of the clone's ``examples/tiny-model`` (what the docs tell the reader to copy), with
``ocibridge``, ``python`` and every other program the blocks call taken from a virtualenv that holds
only what the doc's text says to install: ocibridge, the extras its ``pip install`` lines name
(``'ocibridge[serve]'``, ``-e '.[serve,k8s]'``) and the packages they name (``pip install
huggingface_hub transformers``), each with what it requires. Everything else the test virtualenv
holds is left out, so a block that needs an extra the doc never names fails here as it fails for
the reader ("needs cyclonedx-python-lib: pip install 'ocibridge[evidence]'").

The reader's virtualenv is made from the test one without a download: a new ``venv`` whose
site-packages links the test virtualenv's entries, less those of the distributions left out; its
``bin`` has the console scripts of the distributions kept (``ocibridge``, ``hf``)."""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata as md
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterable
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
DOCS_DIR = ROOT / "docs"
EXAMPLE_MODEL = ROOT / "examples" / "tiny-model"
FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)
#: what a block's language runs with: the reader's shell and the reader's ``python``
RUNNERS = {"sh": ["bash", "-euo", "pipefail", "-c"], "python": ["python", "-c"]}
#: ``pip install ARGS`` wherever the text says it (prose or a command)
PIP_INSTALL = re.compile(r"pip install ([^`\n;&|)]+)")
#: an extra, named as the text names one: ``'ocibridge[serve]'``, ``-e '.[serve,k8s]'``
EXTRA = re.compile(r"(?:ocibridge|(?<![\w\]])\.)\[([\w,\s-]+)\]")
#: a comment line of an ``sh`` block that holds a command the reader is meant to run: it would not run here
COMMENTED_COMMAND = re.compile(r"^\s*#\s*(?:then:\s*)?(?:ocibridge|python3?|curl|hf|HF_[A-Z_]+=\S*)\s")
#: what a fresh virtualenv holds besides what is installed into it
VENV_OWN = {"pip", "setuptools", "wheel"}
#: the pages serve.md indexes whose blocks run, in the order a reader's shell runs them: the first
#: pushes ``acme/tiny``, which the others read
SERVE_PAGES = ("serve-day.md", "serve-xet.md", "serve-publish.md", "serve-replicas.md", "serve-proxy.md",
               "serve-history.md", "serve-access.md", "serve-kubernetes.md", "serve-kubernetes-keys.md")


def doc_text(doc: str) -> str:
    return (DOCS_DIR / doc).read_text()


def runnable_blocks(doc: str) -> list[tuple[str, str, int]]:
    """(language, code, line) of every fenced ``sh`` and ``python`` block of ``docs/DOC``."""
    text = doc_text(doc)
    return [(m[1], m[2], text[: m.start()].count("\n") + 1)
            for m in FENCE.finditer(text) if m[1] in RUNNERS]


def commented_commands(doc: str) -> list[str]:
    """The lines of ``sh`` blocks that hold a command behind ``#``: "# then: python -c ..." is
    what the reader runs next, and a runner that skips comments never tries it."""
    return [f"docs/{doc}:{line + n}: {text.strip()}" for lang, code, line in runnable_blocks(doc) if lang == "sh"
            for n, text in enumerate(code.splitlines(), 1) if COMMENTED_COMMAND.match(text)]


def named_installs(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """The ocibridge extras and the other packages ``text`` says to install."""
    extras = {e.strip() for m in EXTRA.finditer(text) for e in m[1].split(",")}
    packages: set[str] = set()
    for m in PIP_INSTALL.finditer(text):
        for word in m[1].split():
            word = word.strip("'\"")
            if re.fullmatch(r"[A-Za-z][\w.-]*", word) and word != "ocibridge":
                packages.add(canonicalize_name(word))
    known = set(md.metadata("ocibridge").get_all("Provides-Extra") or [])
    return frozenset(extras & known), frozenset(packages)


def _closure(roots: Iterable[tuple[str, frozenset[str]]]) -> set[str]:
    """The distributions (canonical names) that installing ``roots`` (name, extras) brings."""
    env = default_environment()
    seen: set[tuple[str, frozenset[str]]] = set()
    kept: set[str] = set()
    todo = list(roots)
    while todo:
        name, extras = todo.pop()
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        try:
            requires = md.requires(name) or []
        except md.PackageNotFoundError:
            continue  # not installed here (another platform's): a fresh venv would lack it too
        kept.add(canonicalize_name(name))
        for line in requires:
            try:
                req = Requirement(line)
            except InvalidRequirement:
                continue
            if req.marker is None or any(req.marker.evaluate({**env, "extra": e}) for e in (extras or {""})):
                todo.append((canonicalize_name(req.name), frozenset(req.extras)))
    return kept


def kept_distributions(doc: str) -> set[str]:
    extras, packages = named_installs(doc_text(doc))
    return _closure([("ocibridge", extras), *((p, frozenset()) for p in packages)]) | VENV_OWN


@functools.cache
def _owners() -> dict[str, frozenset[str]]:
    """Each top-level entry of site-packages -> the distributions whose files are in it (read once
    a process: every distribution's file list, seconds, was read again for each virtualenv made)."""
    owners: dict[str, set[str]] = {}
    for dist in md.distributions():
        name = canonicalize_name(dist.metadata["Name"])
        for f in dist.files or []:
            parts = Path(str(f)).parts
            if parts and parts[0] != "..":
                owners.setdefault(parts[0], set()).add(name)
    return {entry: frozenset(names) for entry, names in owners.items()}


def reader_venv(base: Path, doc: str) -> Path:
    """A virtualenv holding what ``docs/DOC`` says to install (made once per set, under ``base``)."""
    return venv_holding(base, kept_distributions(doc))


def plain_venv(base: Path) -> Path:
    """A virtualenv holding ``pip install ocibridge`` with no extra: the README's install."""
    return venv_holding(base, _closure([("ocibridge", frozenset())]) | VENV_OWN)


def venv_holding(base: Path, kept: set[str]) -> Path:
    """A virtualenv holding the distributions ``kept`` (made once per set, under ``base``)."""
    key = hashlib.sha256(",".join(sorted(kept)).encode()).hexdigest()[:12]
    venv = base / f"reader-{key}"
    if (venv / "ready").exists():
        return venv
    if venv.exists():
        shutil.rmtree(venv)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    source = Path(sysconfig.get_paths()["purelib"])
    target = venv / source.relative_to(sys.prefix)
    assert target.is_dir(), target
    owners = _owners()
    for entry in source.iterdir():
        who = owners.get(entry.name)
        if who is None or who & kept:  # nobody's (a .pth of the venv's own), or a kept one's
            (target / entry.name).symlink_to(entry)
    python = venv / "bin" / "python"
    for ep in md.entry_points(group="console_scripts"):
        if ep.dist is None or canonicalize_name(ep.dist.metadata["Name"]) not in kept:
            continue
        module, _, attr = ep.value.partition(":")
        script = venv / "bin" / ep.name
        script.write_text(f"#!{python}\nimport sys\nfrom {module} import {attr.split('.')[0]}\n"
                          f"sys.argv[0] = {ep.name!r}\nsys.exit({attr}())\n")
        script.chmod(0o755)
    (venv / "ready").write_text("\n".join(sorted(kept)) + "\n")
    return venv


def reader_env(tmp_path: Path, venvs: Path, doc: str, registry_prefix: str) -> tuple[Path, dict[str, str]]:
    """A working directory holding ``tiny`` (a copy of examples/tiny-model), and the environment
    of a reader who activated the virtualenv the doc's text makes, with a private store, cache
    and docker config, and ``$REGISTRY``."""
    work = tmp_path / "work"
    work.mkdir()
    shutil.copytree(EXAMPLE_MODEL, work / "tiny")
    venv = reader_venv(venvs, doc)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update({
        "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "VIRTUAL_ENV": str(venv),
        "REGISTRY": registry_prefix,
        "OCIBRIDGE_STORE": str(tmp_path / "store"),
        "DOCKER_CONFIG": str(tmp_path / "docker"),
        "HF_HOME": str(tmp_path / "hf-home"),  # the reader's own: huggingface_hub's caches and token
    })
    env.pop("HF_HUB_CACHE", None)
    return work, env


def run_block(lang: str, code: str, work: Path, env: dict[str, str], timeout: int = 300) -> subprocess.CompletedProcess:
    argv = [str(Path(env["VIRTUAL_ENV"]) / "bin" / "python"), "-c"] if lang == "python" else RUNNERS[lang]
    return subprocess.run([*argv, code], cwd=work, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="session")
def reader_venvs(tmp_path_factory) -> Path:
    """Where the readers' virtualenvs are made, once per set of installs, for the session."""
    return tmp_path_factory.mktemp("reader-venvs")


@pytest.fixture
def doc_env(tmp_path, registry, unique_repo, reader_venvs):
    """``doc_env(DOC)``: a working directory with ./tiny and the environment of a reader of
    ``docs/DOC``, ``$REGISTRY`` a fresh repository prefix of the registry."""
    def make(doc: str) -> tuple[Path, dict[str, str]]:
        return reader_env(tmp_path, reader_venvs, doc, f"{registry.host}/{unique_repo}")
    return make
