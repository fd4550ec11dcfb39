"""Cross-shard mounts: where else on the target registry a shard may find a blob.

In one unsharded run, an entry mounts a shared blob from the repository an earlier entry wrote
it to: the process remembers (``stores/registry/blobhomes.py``). A shard cannot know what the
other shards wrote. So before a shard uploads a blob its plan found missing, the other target
repositories of the job on the same registry are offered as mount sources: the copy tries a
mount from each (a repository without the blob answers 202, the session is cancelled, nothing
else happens) and uploads only when none holds it *at that moment*. A duplicate upload is then
left only to shards racing for the same blob at the same moment.
"""

from __future__ import annotations

from ocibridge.errors import OcibridgeError
from ocibridge.mirror.endpoints import job_reference
from ocibridge.mirror.job import MirrorJob
from ocibridge.oci.reference import RegistryReference
from ocibridge.stores.base import Store
from ocibridge.stores.registry.blobhomes import BLOB_HOMES, HOMES_PER_BLOB


def sibling_repositories(job: MirrorJob, index: int, limit: int = HOMES_PER_BLOB) -> list[str]:
    """Repositories other entries of ``job`` write on the registry entry ``index`` writes to,
    earlier entries first (a single run would have written those already); at most ``limit``."""
    own = _registry_target(job.sync[index].target)
    if own is None:
        return []
    found: list[str] = []
    for n, entry in enumerate(job.sync):
        other = _registry_target(entry.target)
        if n == index or other is None or other[0] != own[0] or other[1] == own[1] or other[1] in found:
            continue
        found.append(other[1])
        if len(found) == limit:
            break
    return found


def offer_mounts(target: Store, digests: list[str], repositories: list[str]) -> None:
    """Offer ``repositories`` as mount sources of ``digests`` to a registry ``target``, for
    blobs the process knows no home of yet (known homes, this run's or an earlier run's, are
    better guesses and are kept)."""
    if not repositories:
        return
    from ocibridge.stores.registry import RegistryStore  # httpx: only when a registry is written

    if not isinstance(target, RegistryStore):
        return
    base = target.client.base
    for digest in digests:
        if not BLOB_HOMES.candidates(base, digest):
            for repository in reversed(repositories):  # remembered most recent first
                BLOB_HOMES.suggest(base, digest, repository)  # a guess: never written down


def _registry_target(text: str) -> tuple[str, str] | None:
    try:
        ref = job_reference(text)
    except OcibridgeError:  # reported when the entry runs
        return None
    return (ref.registry, ref.repository) if isinstance(ref, RegistryReference) else None
