"""Planning a sync entry: which artifacts to copy, how many bytes, what the target holds.

Read-only on both sides. Each selected tag is resolved to a digest (the copy is pinned to it),
checked against the accepted families, converted when asked, and compared with the target's
tag: an artifact already there is skipped without touching its blobs. For the rest the graph
is walked and every blob HEADed on the target, so the plan says exactly what will travel.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from ocibridge.chunks.chunktable import ARTIFACT_TYPE as CHUNKS_ARTIFACT_TYPE
from ocibridge.core.graphbound import GraphBound
from ocibridge.errors import NotFound, OcibridgeError, SignatureError, error_text
from ocibridge.kinds.hf.locator import hub_reference_of
from ocibridge.mirror.endpoints import job_reference, open_endpoint
from ocibridge.mirror.filters import select_tags
from ocibridge.mirror.graphwalk import Fetch, Walked, manifest_tree, referrers_missing, walk_graph
from ocibridge.mirror.job import MirrorJob, SyncEntry
from ocibridge.mirror.planned import ArtifactPlan, EntryPlan
from ocibridge.mirror.ratelimit import TokenBucket
from ocibridge.mirror.relabel import RelabelStore
from ocibridge.mirror.shard import Shard, artifact_key
from ocibridge.mirror.summary import ArtifactResult, EntrySummary
from ocibridge.oci.digest import is_digest
from ocibridge.oci.mediatypes import Family, family_of_artifact
from ocibridge.oci.models import Descriptor, Manifest, parse_manifest_bytes
from ocibridge.oci.reference import check_tag
from ocibridge.scanning.policy import require_clean_scan
from ocibridge.signing.attach import companion_tags
from ocibridge.signing.containers_policy import DockerName, Scope, docker_scope, oci_scope
from ocibridge.signing.policy import Trusted, verify_before_use
from ocibridge.signing.use import UsePolicy, check_before_use
from ocibridge.stores.base import HeldReferrers, Mounting, Store, blob_origin, is_manifest


def plan_entry(job: MirrorJob, index: int, entry: SyncEntry, *, dry_run: bool = False,
               shard: Shard | None = None) -> EntryPlan:
    """Open both ends and plan every artifact (of ``shard`` only, when given); failures become
    failed results, not exceptions."""
    settings = job.effective(entry)
    plan = EntryPlan(index, entry, settings, EntrySummary(index, entry.source, entry.target))
    try:
        if settings.rate_limit is not None:
            rl = settings.rate_limit
            plan.bucket = TokenBucket(rl.requests_per_second, rl.burst)
        if settings.attest_key:  # a key that cannot sign fails the entry before a target is opened (created)
            from ocibridge.signing import ATTEST_PASSWORD_ENV, keys

            plan.attest_key = keys.load_private_key(settings.attest_key, password_env=ATTEST_PASSWORD_ENV,
                                                    flag="attest_key")
        if settings.scan is not None and settings.scan_key:  # a key that cannot sign fails the entry, as attest_key
            from ocibridge.signing import keys

            plan.scan_key = keys.load_private_key(settings.scan_key)
        plan.source = open_endpoint(entry.source, job, gate=plan.bucket)
        plan.target = open_endpoint(entry.target, job, for_write=True, dry_run=dry_run)
        located = job_reference(entry.source)
        hub = hub_reference_of(located)
        if hub is not None:  # a repository on a Hub endpoint: revisions, not tags
            from ocibridge.mirror.hub import plan_hub

            plan_hub(job, plan, hub, dry_run=dry_run, shard=shard)
            return plan
        plan.policy = job.verify_policy(settings)
        plan.policy_file = job.policy_file
        refs = _references(plan)
        if shard is not None:
            refs = _of_shard(plan, refs, shard)
    except OcibridgeError as e:
        plan.summary.error = error_text(e)
        plan.results.append(ArtifactResult(index, entry.source, entry.target, "failed", reason=error_text(e)))
        return plan
    planner = _Planner(plan)
    workers = settings.concurrency.artifacts
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mirror-plan") as pool:
        outcomes = list(pool.map(planner.plan_one, refs))
    for outcome in outcomes:
        if isinstance(outcome, ArtifactPlan):
            plan.copies.append(outcome)
        else:
            plan.results.append(outcome)
    return plan


def _references(plan: EntryPlan) -> list[tuple[str, str | None]]:
    """(source reference, target tag) pairs the entry covers."""
    assert plan.source is not None and plan.target is not None
    src, dst = plan.source, plan.target
    if dst.reference is not None:
        if src.reference is None:
            raise OcibridgeError(f"target {plan.entry.target!r} names a tag, so the source must name one artifact")
        if not dst.is_tag:
            raise OcibridgeError(f"target {plan.entry.target!r}: a target cannot be a digest")
    if src.reference is not None:
        tag = dst.reference if dst.reference is not None else (src.reference if src.is_tag else None)
        plan.summary.tags_listed = 1
        return [(src.reference, tag)]
    listed = src.store.tags()
    plan.source_tags = frozenset(listed)
    if not listed:  # most often a misspelt source: fail rather than report an empty success
        raise OcibridgeError(f"{src.name} has no tags to mirror (is the source name right?)")
    chosen = select_tags(listed, plan.entry.tags)
    plan.summary.tags_listed = len(listed)
    plan.summary.tags_filtered_out = len(listed) - len(chosen)
    return [(t, t) for t in chosen]


def _of_shard(plan: EntryPlan, refs: list[tuple[str, str | None]], shard: Shard) -> list[tuple[str, str | None]]:
    """The pairs ``shard`` owns; the others are counted, so an empty shard is not mistaken for
    an entry whose filters selected nothing."""
    assert plan.source is not None and plan.target is not None
    src, dst = plan.source.name, plan.target.name
    mine = [(ref, tag) for ref, tag in refs if shard.owns(artifact_key(src, ref, dst, tag))]
    plan.summary.other_shards = len(refs) - len(mine)
    return mine


class _Planner:
    """Plans artifacts of one entry (thread-safe); blobs shared between artifacts count once."""

    def __init__(self, plan: EntryPlan):
        self.plan = plan
        assert plan.source is not None and plan.target is not None
        self.src = plan.source
        self.dst = plan.target
        self.settings = plan.settings
        convert = self.settings.convert
        relabel = convert in (Family.CNAI.value, Family.CNCF.value)
        self.view = RelabelStore(self.src.store, Family(convert)) if convert and relabel else None
        self.to_family = convert if convert and not relabel else None  # families/: another family
        self._lock = threading.Lock()
        self._counted: dict[str, bool] = {}  # blob digest → present on the target
        self._manifests: dict[tuple[int, str], bytes] = {}  # (store, digest) → bytes, read once

    def _fetch(self, store: Store, desc: Descriptor) -> bytes:
        """Manifest bytes by digest (immutable), so family check and graph walk share one GET."""
        key = (id(store), desc.digest)
        with self._lock:
            data = self._manifests.get(key)
        if data is None:
            data = store.fetch_bytes(desc)
            with self._lock:
                self._manifests[key] = data
        return data

    def _names(self, ref: str, tag: str | None) -> tuple[str, str]:
        sep = "@" if ref.startswith("sha256:") else ":"
        target = f"{self.dst.name}:{tag}" if tag else self.dst.name
        return f"{self.src.name}{sep}{ref}", target

    def plan_one(self, pair: tuple[str, str | None]) -> ArtifactPlan | ArtifactResult:
        ref, tag = pair
        source_name, target_name = self._names(ref, tag)
        result = ArtifactResult(self.plan.index, source_name, target_name, "planned")
        try:
            for name in {ref, tag} - {None}:
                if name is not None and not is_digest(name):
                    check_tag(name)  # a tag a URL cannot carry fails here, for this tag only
            return self._plan(ref, tag, result)
        except OcibridgeError as e:
            result.status, result.reason = "failed", error_text(e)
            return result
        except Exception as e:  # one bad artifact (or a bug it triggers) must not sink the job
            result.status, result.reason = "failed", f"unexpected {type(e).__name__}: {e}"
            return result

    def _plan(self, ref: str, tag: str | None, result: ArtifactResult) -> ArtifactPlan | ArtifactResult:
        mounts: dict[str, Store] = {}
        if self.plan.entry.source_format == "ollama" or self.src.ollama:
            if self.plan.policy is not None:
                raise SignatureError("verify: Ollama sources carry no signatures")
            store, desc, src_ref = self._from_ollama(ref)
            read = desc
            check_before_use(store, desc, None, UsePolicy(file=self.plan.policy_file), result.source,
                             clean_scan=require_clean_scan)
        else:
            store, original, reason = self._from_oci(ref)
            read = original
            if reason:
                result.status, result.reason, result.digest = "skipped", reason, original.digest
                return result
            verify_before_use(self.src.store, original, self.plan.policy, name=result.source,
                              trusts=Trusted.MANIFEST)
            check_before_use(self.src.store, original, self._located(ref), UsePolicy(file=self.plan.policy_file),
                             result.source, clean_scan=require_clean_scan, trusts=Trusted.MANIFEST)
            desc = self.view.convert(original) if store is self.view else original
            if self.to_family is not None:
                store, desc = self._converted(original, result)
                if store is not self.src.store:
                    mounts = self._shared_with_source(original)
            src_ref = desc.digest
            if store is self.view and self.settings.referrers:
                left = self._left_behind(original)
                result.referrers_left_behind = len(left)
                if left:
                    result.note = (f"{len(left)} referrer(s) of the original left behind: they name "
                                   "its digest, which re-labelling changed (sign the copy again)")
        result.digest = desc.digest
        listed: dict[str, HeldReferrers] = {}  # what the referrers check listed: walked as it read it
        if self._already_there(desc, tag):
            tags = self.plan.source_tags if store is self.src.store else None  # listed from this store
            missing = referrers_missing(store, self.dst.store, desc, self._fetch, listed, tags) \
                if self.settings.referrers else 0
            if not missing:
                result.status, result.reason = "skipped", "already mirrored"
                return result
            result.note = (f"completed: already mirrored, but without {missing} referrer(s) "
                           "the source holds, which this run adds")
        walked = self._count(store, desc, result, mounts, listed)
        return ArtifactPlan(result, store, src_ref, tag, referrers=self.settings.referrers, mounts=mounts, read=read,
                            root=desc, in_hand=walked.manifests, listed=walked.referrers)

    def _converted(self, original: Descriptor, result: ArtifactResult) -> tuple[Store, Descriptor]:
        """The artifact as family ``convert``; what the conversion drops is said per artifact:
        fields the target cannot hold, and referrers (signatures name the original digest)."""
        from ocibridge.kinds import convert_staged

        assert self.to_family is not None
        with self._lock:
            scratch = self.plan.scratch_dir()
        store, desc, conversion = convert_staged(self.src.store, original.digest, self.to_family, scratch)
        if desc.digest == original.digest:  # already that family: copied as it is
            return self.src.store, original
        result.lost = [f"{loss.field} = {loss.value}" for loss in conversion.losses if not loss.kept]
        result.lost += [f"{change.field}: {change.value}" for change in conversion.changes]
        if self.settings.referrers:  # OCI referrers, and cosign's sha256-<hex>.sig/.att/.sbom tags
            replaced = conversion.store.chunks is not None  # the chunk table's referrer is made anew
            left = [*(r for r in self.src.store.referrers(original)
                      if not (replaced and r.artifactType == CHUNKS_ARTIFACT_TYPE)),
                    *(d for d, _ in companion_tags(self.src.store, original))]
            result.referrers_left_behind = len(left)
            if left:
                result.note = (f"{len(left)} referrer(s) of the original left behind: they name its digest, "
                               f"and the {conversion.target_family} form has another (sign the copy again)")
        return store, desc

    def _shared_with_source(self, original: Descriptor) -> dict[str, Store]:
        """Blobs of the source artifact, by digest, when the target can mount from the source:
        an exported form (Ollama, ModelCar) staged in a scratch layout keeps some of them (an
        Ollama model's GGUF), and the copy mounts those from the source repository rather
        than upload them from the scratch copy."""
        if not self._mountable(self.src.store):
            return {}
        graph = walk_graph(self.src.store, original, False, self._fetch)
        return {d.digest: self.src.store for d in graph.found if not is_manifest(d)}

    def _located(self, ref: str) -> Scope:
        """Where the containers policy looks the source artifact up (the endpoint was located
        once: its parts are used as they are)."""
        if self.src.host is not None:
            digest = ref if is_digest(ref) else None
            return docker_scope(DockerName(self.src.name, None if digest else ref, digest))
        if self.src.name.startswith("oci:"):
            return oci_scope(self.src.name[len("oci:"):])
        return Scope(None)

    def _from_oci(self, ref: str) -> tuple[Store, Descriptor, str]:
        """(store to copy from: the source or the converting view, the source's descriptor,
        reason to skip or "")."""
        store: Store = self.src.store
        desc = store.resolve(ref)
        family = _family(store, desc, self._fetch)
        accept = self.settings.accept
        if "any" not in accept:
            name = family.value if family is not None else _other_family(store, desc)
            if name is None:
                return store, desc, f"not a ModelPack artifact (accept = {', '.join(accept)})"
            if name not in accept:
                return store, desc, f"family {name} not accepted (accept = {', '.join(accept)})"
        if self.view is not None and family is not None and family is not self.view.to:
            return self.view, desc, ""
        return store, desc, ""

    def _left_behind(self, original: Descriptor) -> list[str]:
        """Referrers of the manifests a conversion re-labels: they name the original digests, so
        they are not copied (a signature over the original would not verify against the new one)."""
        assert self.view is not None
        view = self.view
        found: list[str] = []
        converted: dict[str, Descriptor] = {}

        def relabeled(desc: Descriptor) -> bool:  # (an index kept as it is names its manifests unchanged)
            converted[desc.digest] = view.convert(desc)
            return converted[desc.digest].digest != desc.digest

        for desc in manifest_tree(self.src.store, original, self._fetch, relabeled):
            replaced = view.carries_chunks(converted[desc.digest].digest)  # a chunk table's referrer is made anew
            found.extend(r.digest for r in self.src.store.referrers(desc)
                         if not (replaced and r.artifactType == CHUNKS_ARTIFACT_TYPE))
        return found

    def _from_ollama(self, ref: str) -> tuple[Store, Descriptor, str]:
        from ocibridge.kinds.ollama import OllamaStore, read_ollama
        from ocibridge.model.builder import ARTIFACT_TAG, BuildOptions, build
        from ocibridge.oci.reference import OLLAMA_TAG_RE

        name = None
        if self.src.host is None and isinstance(self.src.store, OllamaStore):  # local: name each tag
            local = self.src.store.name
            name = replace(local, digest=ref) if ref.startswith("sha256:") else replace(local, tag=ref)
        elif self.src.ollama_name is not None:  # a registry's tag names the model only if Ollama's rules allow it
            if ref.startswith("sha256:"):
                name = replace(self.src.ollama_name, digest=ref)
            elif OLLAMA_TAG_RE.match(ref):
                name = replace(self.src.ollama_name, tag=ref, digest=None)
        package = read_ollama(self.src.store, ref, name)
        family = Family(self.view.to if self.view is not None else Family.CNAI)
        artifact = build(package, BuildOptions(family=family))
        if self.to_family is not None:
            from ocibridge.kinds import convert_staged

            with self._lock:
                scratch = self.plan.scratch_dir()
            store, desc, _ = convert_staged(artifact, ARTIFACT_TAG, self.to_family, scratch)
            return store, desc, desc.digest
        return artifact, artifact.descriptor, ARTIFACT_TAG

    def _already_there(self, desc: Descriptor, tag: str | None) -> bool:
        dst = self.dst.store
        if tag is None:
            return dst.exists(desc)
        try:
            return dst.resolve(tag).digest == desc.digest
        except NotFound:
            return False

    def _count(self, store: Store, root: Descriptor, result: ArtifactResult,
               mounts: dict[str, Store], listed: dict[str, HeldReferrers]) -> Walked:
        """Walk the graph (and referrers) and HEAD each blob on the target; one the target
        lacks is mounted when it can be (from the source, or from ``mounts``), else sent.
        What the walk read is returned, for the copy to be handed."""
        walked = walk_graph(store, root, self.settings.referrers, self._fetch, listed)
        for desc in walked.found:
            if is_manifest(desc):
                continue
            with self._lock:
                known = self._counted.get(desc.digest)
            if known is None:
                present = self.dst.store.exists(desc)
                with self._lock:
                    first = desc.digest not in self._counted
                    self._counted[desc.digest] = present
            else:
                first = False
            if not first:  # another artifact of this entry counts (and sends) it: there by then
                result.blob_actions.append((desc.digest, desc.size, "skip"))
                continue
            if present:
                result.blobs_present += 1
                result.bytes_present += desc.size
                action = "skip"
            elif desc.digest in mounts or self._mountable(store):
                result.blobs_to_mount += 1
                result.bytes_to_mount += desc.size
                action = "mount"
            else:
                result.blobs_planned += 1
                result.bytes_planned += desc.size
                action = "send"
            result.blob_actions.append((desc.digest, desc.size, action))
        return walked

    def _mountable(self, store: Store) -> bool:
        """Whether the copy will mount this source's blobs: both ends are repositories of one
        registry (through a re-labelling view too), as RegistryStore.mount_from does."""
        return isinstance(self.dst.store, Mounting) and self.dst.store.can_mount_from(blob_origin(store))


def _other_family(store: Store, desc: Descriptor) -> str | None:
    """The name of a model family other than ModelPack (modelkit, docker-model), or None."""
    from ocibridge.kinds import NotAModel, identify

    try:
        name: str = identify(store, desc.digest).family.name
    except NotAModel:
        return None
    return name


def _family(store: Store, desc: Descriptor, fetch: Fetch, bound: GraphBound | None = None,
            depth: int = 0) -> Family | None:
    """The ModelPack family of a manifest, or of an index's first ModelPack child (each
    nested index looked at once, within the bounds of core/graphbound.py)."""
    bound = bound or GraphBound(f"graph of {desc.digest}")
    if not bound.enter(desc.digest, depth):
        return None
    node = parse_manifest_bytes(fetch(store, desc), desc.mediaType)
    if isinstance(node, Manifest):
        return family_of_artifact(node.artifactType, node.config.mediaType)
    for child in node.manifests:
        if is_manifest(child):
            found = _family(store, child, fetch, bound, depth + 1)
            if found is not None:
                return found
    return None
