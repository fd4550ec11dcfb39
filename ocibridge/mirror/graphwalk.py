"""One artifact's graph walked for a mirror's plan: every descriptor reachable from its root (and
its referrers), each manifest read once and kept, with the referrer listings made, so that the
copy is handed what the plan read (mirror/run.py) and asks the source for none of it again; and
whether a target lacks the signatures the source holds."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ocibridge.core.graphbound import GraphBound
from ocibridge.errors import NotFound
from ocibridge.oci.models import Descriptor, Index, parse_manifest_bytes
from ocibridge.signing.attach import companion_tags, is_signature_referrer
from ocibridge.stores.base import HeldReferrers, Store, is_manifest, referrers_read

Fetch = Callable[[Store, Descriptor], bytes]


@dataclass
class Walked:
    """What a walk of one artifact's graph found and read: every descriptor reached, each
    manifest's verified bytes by digest, each listing of referrers by its subject's digest.
    The copy is handed the reads (mirror/run.py), so it asks the source for none of them again."""

    found: list[Descriptor] = field(default_factory=list)
    manifests: dict[str, bytes] = field(default_factory=dict)
    referrers: dict[str, HeldReferrers] = field(default_factory=dict)


def walk_graph(store: Store, root: Descriptor, referrers: bool, fetch: Fetch,
           listed: dict[str, HeldReferrers] | None = None) -> Walked:
    """Every descriptor reachable from ``root``: manifests, configs, layers (and referrers);
    each once, within the bounds of core/graphbound.py (referrers are untrusted). A referrer's
    manifest is taken as its listing read it, not fetched again; ``listed``: listings made
    already, by subject digest (not listed again)."""
    walked = Walked()
    seen: set[str] = set()
    bound = GraphBound(f"graph of {root.digest}")
    stack = [(root, 0)]
    while stack:
        desc, depth = stack.pop()
        if desc.digest in seen:
            continue
        seen.add(desc.digest)
        walked.found.append(desc)
        if not is_manifest(desc):
            continue
        bound.enter(desc.digest, depth)
        data = walked.manifests.get(desc.digest)
        if data is None:
            data = walked.manifests[desc.digest] = fetch(store, desc)
        node = parse_manifest_bytes(data, desc.mediaType)
        below = depth + 1
        if isinstance(node, Index):
            stack.extend((d, below) for d in node.manifests)
        else:
            stack.extend((d, below) for d in (node.config, *node.layers))
        if referrers:
            held = (listed or {}).get(desc.digest) or referrers_read(store, desc)
            walked.referrers[desc.digest] = held
            for digest, read in held.read.items():
                walked.manifests.setdefault(digest, read)
            stack.extend((d, below) for d in held)
            stack.extend((d, below) for d, _ in companion_tags(store, desc))
    return walked


def signatures_missing(src: Store, dst: Store, desc: Descriptor,
                       listed: dict[str, HeldReferrers] | None = None) -> bool:
    """Whether ``src`` holds signatures of ``desc`` (cosign tags, bundle referrers) that ``dst``
    lacks: an artifact mirrored before it was signed still gets its signatures. The referrers
    listed (with what the listing read) go into ``listed``, for the walk that carries them."""
    for sig, tag in companion_tags(src, desc):
        try:
            if dst.resolve(tag).digest == sig.digest:
                continue
        except NotFound:
            pass
        return True
    held = referrers_read(src, desc)
    if listed is not None:
        listed[desc.digest] = held
    return any(is_signature_referrer(r) and not dst.exists(r) for r in held)
