"""One artifact's graph walked for a mirror's plan: every descriptor reachable from its root (and
its referrers), each manifest read once and kept, with the referrer listings made, so that the
copy is handed what the plan read (mirror/run.py) and asks the source for none of it again; and
whether a target that holds the artifact lacks referrers the source holds."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field

from ocibridge.core.graphbound import GraphBound
from ocibridge.oci.models import Descriptor, Index, parse_manifest_bytes
from ocibridge.signing.attach import companion_tags, companions_lacking
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


def referrers_missing(src: Store, dst: Store, root: Descriptor, fetch: Fetch,
                      listed: dict[str, HeldReferrers] | None = None, tags: Collection[str] | None = None) -> int:
    """How many referrers of an artifact already tagged on ``dst`` the source holds and ``dst``
    lacks. Looked at: ``root``, the manifests its indexes name, and the referrers of these
    ``dst`` holds, theirs in turn (an SBOM's signature), within core/graphbound.py's bounds; of
    each, its referrers (SBOMs, attestations, chunk tables, signatures) and cosign's tag-named
    companions (``.sig``/``.att``/``.sbom``: one is lacking when ``dst`` lacks one of the
    source's signatures in it, signing/attach.py). An artifact mirrored before it (or what goes
    with it) was signed, by a run killed before its referrers were written (an older run tagged
    first), or to a target that lost one, is planned again and completed.

    Cost, per manifest looked at: one listing and one HEAD per companion suffix at the source
    (the listing kept in ``listed`` for the walk that carries them; with ``tags``, the source's
    tags the entry listed, a HEAD per companion tag among them only), one existence check per
    referrer and per companion tag the source holds at ``dst``; no blob is looked at. A referrer
    ``dst`` lacks is not looked into: the copy carries it with all that goes with it."""
    read: dict[str, bytes] = {}  # referrers' manifests as the listings read them

    def manifest(store: Store, desc: Descriptor) -> bytes:
        return read.get(desc.digest) or fetch(store, desc)

    held_there: dict[str, list[Descriptor]] = {}  # by subject: its referrers dst holds, walked next
    missing = 0
    for desc in manifest_tree(src, root, manifest, beside=lambda desc: held_there.pop(desc.digest, [])):
        missing += companions_lacking(src, dst, desc, fetch, tags)
        held = referrers_read(src, desc)
        if listed is not None:
            listed[desc.digest] = held
        read.update(held.read)
        there = [r for r in held if dst.exists(r)]
        missing += len(held.listed) - len(there)
        held_there[desc.digest] = there
    return missing


def manifest_tree(store: Store, root: Descriptor, fetch: Fetch,
                  within: Callable[[Descriptor], bool] = lambda desc: True,
                  beside: Callable[[Descriptor], Iterable[Descriptor]] = lambda desc: ()) -> Iterator[Descriptor]:
    """``root`` and the manifests the indexes below it name, each once and within
    core/graphbound.py's bounds (an index's entries are untrusted): each one ``within`` keeps is
    yielded, then, an index, read (``fetch``) and its entries walked; one it leaves out is not.
    ``beside(desc)``, asked once the caller is done with ``desc``, names more to walk below it
    (its referrers), under the same bounds."""
    bound = GraphBound(f"graph of {root.digest}")
    stack = [(root, 0)]
    while stack:
        desc, depth = stack.pop()
        if not is_manifest(desc) or not bound.enter(desc.digest, depth) or not within(desc):
            continue
        yield desc
        node = parse_manifest_bytes(fetch(store, desc), desc.mediaType)
        if isinstance(node, Index):
            stack.extend((d, depth + 1) for d in node.manifests)
        stack.extend((d, depth + 1) for d in beside(desc))
