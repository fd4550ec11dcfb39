"""The provenance a mirror job attaches to each manifest it writes (``provenance = true``):
SLSA v1 of build type ``https://ocibridge.dev/slsa/mirror/v1``, signed with ``attest_key`` when
the job names one. Made of the job's inputs only (source, target, the settings that change
what is written, a Hub entry's chunk keys when set, the source manifest by digest): mirroring
again gives the same statement."""

from __future__ import annotations

from typing import Any

from ocibridge.chunks.choice import ChunkChoice
from ocibridge.mirror.endpoints import Endpoint
from ocibridge.mirror.planned import ArtifactPlan, EntryPlan
from ocibridge.oci.models import Descriptor
from ocibridge.stores.base import WritableStore


def endpoint_uri(endpoint: Endpoint) -> str:
    """A source as a dependency's uri: ``oci://host/repo``, ``oci-layout:DIR``, else its name."""
    if endpoint.host is not None and not endpoint.ollama:
        return f"oci://{endpoint.name}"
    if endpoint.name.startswith("oci:"):
        return "oci-layout:" + endpoint.name.removeprefix("oci:")
    return endpoint.name


def chunk_flags(chunks: ChunkChoice) -> dict[str, Any]:
    """A Hub entry's chunk keys, in the job's spelling, those set only (the threshold in bytes):
    they change the artifact built, so they are part of what made it; an entry without them
    (push's default) records none, as before the keys existed."""
    flags: dict[str, Any] = {}
    if not chunks.chunks:
        flags["no_chunks"] = True
    if chunks.threshold is not None:
        flags["chunk_threshold"] = chunks.threshold
    if chunks.algorithm is not None:
        flags["chunk_hash"] = chunks.algorithm
    return flags


def attach_provenance(plan: EntryPlan, item: ArtifactPlan, target: WritableStore, subject: Descriptor) -> str:
    """Attach the provenance of copying ``item`` to ``subject`` in ``target``; its referrer's digest."""
    from ocibridge.signing.evidence import EvidenceOptions, attach_evidence
    from ocibridge.signing.provenance import manifest_dependency, model_dependencies, predicate

    result, settings = item.result, plan.settings
    flags: dict[str, Any] = {"referrers": settings.referrers}
    if settings.convert is not None:
        flags["convert"] = settings.convert
    if plan.chunks is not None:
        flags.update(chunk_flags(plan.chunks))
    if item.read is not None and plan.source is not None:
        deps = [manifest_dependency(endpoint_uri(plan.source), item.read)]
    else:  # a Hub revision: its files and commit, as the built manifest names them
        deps = model_dependencies(target, subject, plan.entry.source)
    body = predicate("mirror", {"source": result.source, "destination": result.target, "flags": flags}, deps)
    assert plan.target is not None
    repository = plan.target.name if plan.target.host is not None else None
    options = EvidenceOptions(provenance=body, key=plan.attest_key, identity=repository or target.describe(),
                              repository=repository)
    return attach_evidence(target, subject, options).written["provenance"]
