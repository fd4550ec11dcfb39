"""Which other repository's file a writer may take without uploading it (issue 62): the LFS
batch answering "no upload needed" and a commit's ``lfsFile`` naming bytes this writer never
sent both mount a blob of another repository (:mod:`.uploads.mounts`), which gives the writer's
repository that file to serve. That is only what the writer could have had anyway: its token
could download that file from that repository (:meth:`.ports.Author.may_take`, which the access
module's whole rule answers, ``Gate.may_take``: its read prefixes, the private scope of a private
repository, the authorized list of a gated one: issue 85), and the policy serve enforces (the containers policy
file, ``--verify-key``) admits a revision of it that holds the file, as a download of it from
there would be checked (:meth:`.Catalog.resolve`).

Anything else is answered as if no repository held the file: the batch asks for the bytes, as
it does for a SHA-256 nobody has, so its answer tells nothing of what other repositories hold.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ocibridge.errors import OcibridgeError
from ocibridge.hubserver.repo.catalog import Catalog
from ocibridge.hubserver.repo.ports import Author

log = logging.getLogger("ocibridge.hubserver")


def admitted(catalog: Catalog, author: Author, sha256: str) -> Callable[[str], bool]:
    """Whether ``author`` may take the file ``sha256`` from a repository (its id)."""

    def admits(home_id: str) -> bool:
        try:
            takes = author.may_take(home_id)
        except OcibridgeError as e:  # its refs record unread: whether it is private or gated is unknown
            log.warning("sha256:%s: not mounted from %s: %s", sha256, home_id, e)
            return False
        if not takes:
            return False
        served = _served_from(catalog, home_id, f"sha256:{sha256}")
        if not served:
            log.info("sha256:%s: not mounted from %s for %s: no revision serve serves holds it",
                     sha256, home_id, author.name)
        return served

    return admits


def _served_from(catalog: Catalog, repo_id: str, digest: str) -> bool:
    """Whether a revision of ``repo_id`` serve would serve (the policy checked) has the blob
    ``digest`` as a file: main first, then its other branches and its tags."""
    try:
        refs = catalog.refs(repo_id)
    except OcibridgeError:
        return False
    revisions = [f"refs/heads/{name}" for name, _ in refs.hub_branches()]  # main first
    revisions += [f"refs/tags/{name}" for name, _ in refs.hub_tags()]
    for revision in revisions:
        try:
            resolved = catalog.resolve(repo_id, revision)  # Refused when the policy rejects it
        except OcibridgeError:
            continue
        if any(layer.digest == digest for layer in resolved.manifest.layers):
            return True
    return False
