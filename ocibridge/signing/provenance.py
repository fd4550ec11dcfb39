"""SLSA provenance v1 (https://slsa.dev/provenance/v1) of what ocibridge builds or moves.

One build type per operation (``https://ocibridge.dev/slsa/{push,convert,copy,mirror,publish}/v1``);
``externalParameters`` are what the user gave (the source, the flags that change the result);
``resolvedDependencies`` what was read, each by digest: the model's files (a push), the source
manifest (convert, copy, mirror), the Hub repository at its revision, the carton model hash, the
Ollama manifest. The builder is ocibridge, with its version.

Reproducible: the same inputs give the same predicate. No wall-clock time is written unless
asked (``--provenance-time``), then as ``runDetails.metadata.startedOn``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ocibridge.oci.digest import split_digest
from ocibridge.oci.models import Descriptor
from ocibridge.stores.base import Store

if TYPE_CHECKING:
    from ocibridge.places.locators import Locator

PROVENANCE_PREDICATE_TYPE = "https://slsa.dev/provenance/v1"
BUILD_TYPE = "https://ocibridge.dev/slsa/{}/v1"
BUILDER_ID = "https://ocibridge.dev/builder/cli"
OPERATIONS = ("push", "convert", "copy", "mirror", "publish")  # publish: a commit through serve


def build_type(operation: str) -> str:
    if operation not in OPERATIONS:
        raise ValueError(f"no build type for {operation!r}")
    return BUILD_TYPE.format(operation)


def predicate(operation: str, external: dict[str, Any], dependencies: list[dict[str, Any]],
              *, started: str | None = None) -> dict[str, Any]:
    """The SLSA v1 predicate; ``dependencies`` are sorted by uri so their order never matters."""
    from ocibridge.version import __version__

    deps = sorted((d for d in dependencies if d.get("uri") or d.get("name")),
                  key=lambda d: (str(d.get("uri", "")), str(d.get("name", ""))))
    run: dict[str, Any] = {"builder": {"id": BUILDER_ID, "version": {"ocibridge": __version__}}}
    if started:
        run["metadata"] = {"startedOn": started}
    return {
        "buildDefinition": {
            "buildType": build_type(operation),
            "externalParameters": {k: v for k, v in sorted(external.items()) if v not in (None, [], {}, "")},
            "resolvedDependencies": deps,
        },
        "runDetails": run,
    }


def manifest_dependency(uri: str, desc: Descriptor) -> dict[str, Any]:
    """A manifest read from ``uri`` (``oci://host/repo``, ``oci-layout:DIR``), by digest."""
    algorithm, hexpart = split_digest(desc.digest)
    return {"uri": uri, "digest": {algorithm: hexpart}, "mediaType": desc.mediaType}


def locator_uri(located: Locator) -> str:
    """Where a manifest was read, as a dependency's uri: ``oci://host/repo`` (a registry),
    ``oci-layout:DIR`` (a layout, the local store), else the reference as written."""
    from ocibridge.oci.reference import LayoutReference, RegistryReference

    if isinstance(located, RegistryReference):
        return f"oci://{located.registry}/{located.repository}"
    if isinstance(located, LayoutReference):
        return f"oci-layout:{located.path}"
    return str(located)


def model_dependencies(store: Store, subject: Descriptor, source: str) -> list[dict[str, Any]]:
    """What a push read: each file of the model (by SHA-256, named by its path under
    ``source``) and where the model came from, as the annotations the kinds write say."""
    from ocibridge.signing.bom import (
        CARTON_MODEL_HASH,
        HUB_REVISION,
        HUB_SOURCE,
        OLLAMA_MANIFEST,
        OLLAMA_NAME,
        read_facts,
    )

    facts = read_facts(store, subject)
    deps: list[dict[str, Any]] = [{"uri": f"{source.rstrip('/')}/{f.path}", "name": f.path,
                                   "digest": {"sha256": f.sha256}} for f in facts.files]
    notes = facts.annotations
    if notes.get(HUB_SOURCE) and notes.get(HUB_REVISION):
        deps.append({"uri": notes[HUB_SOURCE], "digest": {"gitCommit": notes[HUB_REVISION]}, "name": "hub"})
    if notes.get(CARTON_MODEL_HASH):
        deps.append({"uri": source, "name": "carton", "annotations": {"carton.model.hash": notes[CARTON_MODEL_HASH]}})
    if notes.get(OLLAMA_NAME):
        dep: dict[str, Any] = {"uri": f"ollama:{notes[OLLAMA_NAME]}", "name": "ollama"}
        if notes.get(OLLAMA_MANIFEST, "").startswith("sha256:"):
            dep["digest"] = {"sha256": notes[OLLAMA_MANIFEST].split(":", 1)[1]}
        deps.append(dep)
    return deps


def provenance_statement(name: str, digest: str, body: dict[str, Any]) -> bytes:
    """The unsigned in-toto statement of a provenance predicate about ``name`` at ``digest``."""
    from ocibridge.signing.attest import statement

    return statement(name, digest, PROVENANCE_PREDICATE_TYPE, body)


def dumps(body: dict[str, Any]) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
