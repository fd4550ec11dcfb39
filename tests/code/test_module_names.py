"""A module's name says one thing: where two modules share a basename, they are the same concept
in two rooms (the API and the CLI halves of one command, one family's module and the protocol every
family implements), listed below with that concept. A new shared name fails here until it is
reviewed: either it joins the table, or one of the two is renamed. The names that once meant two
things (``door``, ``ingest``, ``created`` beside ``creates``, ...) stay retired."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "ocibridge"

#: every basename more than one module has, and the one concept all of them are about
SHARED: dict[str, str] = {
    "__main__": "the module run by ``python -m``",
    "durations": "durations as the command line writes them (``30d``), parsed and shown",
    "kind": "one line of the table of kinds: a format's module",
    "modelcache": "the model cache (on disk, and its commands)",
    "family": "an OCI model family (each family's module, and the protocol they implement)",
    "auth": "who a caller is: credentials kept, a page's login, a registry's challenges",
    "evidence": "evidence attached to a model: its AI-BOM, provenance and signatures",
    "mount": "a model as a read-only directory (the FUSE mount, its command, its Kubernetes layout)",
    "reader": "reading one source (a format's archive, a layer) as a verified stream",
    "bundle": "air-gap bundles: several models with their referrers in one file",
    "policy": "the policy on use every command that uses a model obeys",
    "serve": "the Hub's API over a registry (``ocibridge serve``)",
    "session": "what lasts across several calls: the connections and stores they share",
    "warm": "warm starts: compile caches kept as referrers of a model",
    "source": "a source format: what ``push`` reads",
    "store": "a Store: a place of content one copy moves between",
    "errors": "exceptions told as one line",
    "routes": "serve's HTTP routes of one protocol",
    "exporter": "a ModelPack artifact written back into one format",
    "manifest": "one format's own manifest file",
    "mapping": "one format's fields mapped onto ModelPack",
    "artifact": "an OCI artifact of one kind (a Hub snapshot, a scanned artifact, a compile cache)",
    "browse": "browsing a registry (API and CLI halves)",
    "completion": "shell completion scripts (API and CLI halves)",
    "convert": "converting between families (API and CLI halves)",
    "copy": "copying an artifact's graph between stores",
    "k8s": "Kubernetes output (API and CLI halves)",
    "mirror": "mirror jobs (API and CLI halves)",
    "registry_check": "what a registry supports (API and CLI halves)",
    "signing": "signing and verifying (API and CLI halves)",
    "inspect": "a readable summary of an artifact",
    "common": "what the modules of one package share",
    "options": "the options a call takes, as one typed value",
    "chunks": "chunk tables: a layer's digests per chunk",
    "attach": "attaching referrers (chunk tables, signatures) to a manifest",
    "files": "a model's files as a set (listed, scanned)",
    "history": "a branch's commits",
    "settings": "serve's flags as one frozen value",
    "client": "an HTTP client of one remote (a registry, an upstream Hub)",
    "upload": "uploads of blobs",
    "build": "a model's tree made before it is used (an image, a mount)",
    "target": "what opening a located reference gives",
    "formats": "file formats known by their bytes",
    "provenance": "SLSA provenance of what was built or moved",
    "ratelimit": "rate limits on a transfer",
    "report": "what a run found or did, as values",
}

#: names that once meant two things in this package, renamed apart: never again
RETIRED = {"door", "ingest", "created", "creates", "writers", "reborn", "regular", "states", "checked"}


def _modules() -> dict[str, list[tuple[str, str]]]:
    """Every module basename, with each module's path and the first line of its docstring."""
    names: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "__init__.py":
            continue
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        names[path.stem].append((str(path.relative_to(PACKAGE)), doc.split("\n", 1)[0]))
    return names


def test_every_shared_module_name_is_one_reviewed_concept():
    names = _modules()
    shared = {name: found for name, found in names.items() if len(found) > 1}
    unreviewed = {name: found for name, found in shared.items() if name not in SHARED}
    assert not unreviewed, "basenames shared by modules about different things? review each: " + "; ".join(
        f"{name}: " + " | ".join(f"{path}: {line}" for path, line in found) for name, found in unreviewed.items())
    stale = sorted(set(SHARED) - set(shared))
    assert not stale, f"no longer shared, drop from SHARED: {stale}"


def test_retired_names_are_not_used_again():
    used = sorted(name for name in _modules() if name in RETIRED)
    assert not used, f"module names retired for meaning two things: {used}"
    packages = sorted(p.name for p in PACKAGE.rglob("*") if p.is_dir() and p.name in {"writes"})
    assert not packages, f"the write routes' package is writeroutes/: {packages}"


def test_every_module_says_what_it_is_in_its_first_line():
    missing = [path for found in _modules().values() for path, line in found
               if not line.strip() and not path.endswith("__main__.py")]
    assert not missing, f"modules without a docstring's first line: {missing}"
