"""Which other repository's file a writer may take without uploading it: the LFS
batch answering "no upload needed" and a commit's ``lfsFile`` naming bytes this writer never
sent both mount a blob of another repository (:mod:`.uploads.mounts`), which gives the writer's
repository that file to serve. That is only what the writer could have had anyway: its token
could download that file from that repository (:meth:`.ports.Author.may_take`, which the access
module's whole rule answers, ``Gate.may_take``: its read prefixes, the private scope of a private
repository, the authorized list of a gated one), and the policy serve enforces (the containers policy
file, ``--verify-key``) admits a revision of it that holds the file, as a download of it from
there would be checked (:meth:`.Catalog.resolve`).

Anything else is answered as if no repository held the file: the batch asks for the bytes, as
it does for a SHA-256 nobody has, so its answer tells nothing of what other repositories hold.
"""

from __future__ import annotations

import logging

from ocibridge.errors import OcibridgeError
from ocibridge.hubserver.repo.catalog import Catalog
from ocibridge.hubserver.repo.ports import Author
from ocibridge.oci.models import Descriptor

log = logging.getLogger("ocibridge.hubserver")


class Admission:
    """Whether ``author`` may take the file ``sha256`` from a repository (called with its id), and
    the file's size as the served revision that holds it lists it (``size``, of the last repository
    admitted): a commit's ``lfsFile`` copied from another repository names no size."""

    def __init__(self, catalog: Catalog, author: Author, sha256: str):
        self.catalog = catalog
        self.author = author
        self.sha256 = sha256
        self.size: int | None = None

    def __call__(self, home_id: str) -> bool:
        sha256 = self.sha256
        try:
            takes = self.author.may_take(home_id)
        except OcibridgeError as e:  # its refs record unread: whether it is private or gated is unknown
            log.warning("sha256:%s: not mounted from %s: %s", sha256, home_id, e)
            return False
        if not takes:
            return False
        layer = _served_layer(self.catalog, home_id, f"sha256:{sha256}")
        if layer is None:
            log.info("sha256:%s: not mounted from %s for %s: no revision serve serves holds it",
                     sha256, home_id, self.author.name)
            return False
        self.size = layer.size
        return True


def admitted(catalog: Catalog, author: Author, sha256: str) -> Admission:
    """Whether ``author`` may take the file ``sha256`` from a repository (its id)."""
    return Admission(catalog, author, sha256)


def _served_layer(catalog: Catalog, repo_id: str, digest: str) -> Descriptor | None:
    """The blob ``digest`` as a file of a revision of ``repo_id`` serve would serve (the policy
    checked): main first, then its other branches and its tags; None when none holds it."""
    try:
        refs = catalog.refs(repo_id)
    except OcibridgeError:
        return None
    revisions = [f"refs/heads/{name}" for name, _ in refs.hub_branches()]  # main first
    revisions += [f"refs/tags/{name}" for name, _ in refs.hub_tags()]
    for revision in revisions:
        try:
            resolved = catalog.resolve(repo_id, revision)  # Refused when the policy rejects it
        except OcibridgeError:
            continue
        for layer in resolved.manifest.layers:
            if layer.digest == digest:
                return layer
    return None
