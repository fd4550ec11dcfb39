"""What a model's page shows, gathered once per manifest (:class:`ModelPages`): its config, its
files, its card, its tags, what signs and attests it and what serve's checks said of it.

The verdict is serve's own: the page is made only after :meth:`Catalog.resolve` checked the
revision as every download is checked (the containers policy file, ``--verify-key``), so a
refused model shows the refusal instead. Signatures are verified here with serve's own keys
(``--verify-key``) to name who signed; without keys, they are listed as present, unverified. A
scan report is verified first with the keys that decide ``--scan quarantine`` (scanpanel.py).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from ocibridge.core.freshcache import FreshCache
from ocibridge.errors import OcibridgeError, SignatureError
from ocibridge.hubserver.repo.catalog import Catalog, Resolved
from ocibridge.hubserver.repo.files import HubFile, ModelFiles, read_small
from ocibridge.hubserver.repo.hubrefs import Refs
from ocibridge.hubserver.repo.quarantined import TrustedKeys
from ocibridge.hubserver.repo.reponames import type_of
from ocibridge.hubserver.web import facts
from ocibridge.hubserver.web.card import Card, render_card
from ocibridge.hubserver.web.glance import Glance, glance
from ocibridge.hubserver.web.history import EVIDENCE_TAG
from ocibridge.hubserver.web.render import human_size
from ocibridge.hubserver.web.scanpanel import ScanPanel, scan_panel
from ocibridge.hubserver.web.warmcaches import WarmRow, warm_rows

#: seconds what was gathered for a manifest is shown before it is gathered again (referrers come
#: and go while the manifest stays)
FRESH = 30.0
#: manifests whose pages are kept
KEPT = 256
CARD_NAMES = ("readme.md",)


@dataclass(frozen=True)
class FileRow:
    """A file as pages list it, what the templates print made once per manifest (a page of
    1,000 files renders in a few milliseconds: no filter runs per row)."""

    path: str
    size: int
    kind: str
    media_type: str
    sha256: str
    quoted: str = ""  # the path as a URL path
    shown_size: str = ""
    name: str = ""  # the last part of the path

    @classmethod
    def of(cls, f: HubFile) -> FileRow:
        return cls(f.path, f.size, facts.layer_kind(f.layer), f.layer.mediaType if f.layer is not None else "",
                   f.sha256, quote(f.path), human_size(f.size), f.path.rsplit("/", 1)[-1])


@dataclass(frozen=True)
class Signature:
    digest: str
    kind: str  # signature | attestation | sbom | provenance
    predicate_type: str
    signed: bool
    verified_by: str  # the key (or identity) that verified it, or ""


@dataclass(frozen=True)
class PolicyView:
    """The containers policy that applies, as serve read it (None on the page: no file applies)."""

    file: str
    entry: str
    scope: str
    requirements: tuple[str, ...]
    accepts_anything: bool = False  # insecureAcceptAnything alone: the file checks nothing


@dataclass(frozen=True)
class Gathered:
    """The part of a page read from the registry, kept per manifest."""

    descriptor: tuple[tuple[str, str], ...]
    config: tuple[tuple[str, str], ...]
    card: Card | None
    evidence: tuple[Signature, ...]
    keys: bool  # serve verifies signatures with --verify-key
    key_problem: str  # why no signature verified with them
    policy: PolicyView | None
    sbom: tuple[tuple[str, str], ...]
    provenance: tuple[tuple[str, str], ...]
    warm: tuple[WarmRow, ...] = ()  # the compile caches attached to the model manifest
    scan: ScanPanel | None = None  # the newest scan report of the model manifest, None: not scanned

    @property
    def checked(self) -> bool:
        """Whether serve checked anything before serving it: ``--verify-key`` keys, or a policy
        entry that asks for more than ``insecureAcceptAnything``. A green "passed" where nothing
        was checked would claim a check nobody made."""
        return self.keys or (self.policy is not None and not self.policy.accepts_anything)


@dataclass(frozen=True)
class ModelView:
    repo_id: str
    revision: str
    resolved: Resolved
    files: tuple[FileRow, ...]
    size: int
    refs: Refs
    gathered: Gathered
    default_tag: str

    @property
    def noun(self) -> str:
        """What the page calls the repository: model, dataset (its key's type: repo/reponames.py)."""
        return type_of(self.repo_id)

    @property
    def glance(self) -> Glance:
        """The panel at the top of the page (web/glance.py)."""
        g = self.gathered
        return glance(sum(e.kind == "signature" for e in g.evidence), g.keys, g.key_problem,
                      g.policy.file if g.policy else "", self.size, dict(g.descriptor), self.resolved.card or {},
                      policy_checks=g.policy is not None and not g.policy.accepts_anything)


class ModelPages:
    def __init__(self, catalog: Catalog, scan_keys: TrustedKeys | None = None):
        self.catalog = catalog
        self.scan_keys = scan_keys  # the keys --scan quarantine trusts for scan reports; None: it is off
        self._lock = threading.Lock()
        self._kept: OrderedDict[str, tuple[float, Gathered]] = OrderedDict()
        self._refs: FreshCache[str, Refs] = FreshCache(FRESH, 4096)
        self._rows: dict[str, tuple[FileRow, ...]] = {}

    def view(self, resolved: Resolved, files: ModelFiles) -> ModelView:
        rows = self.file_rows(resolved, files)
        return ModelView(resolved.repo_id, resolved.revision, resolved, rows, sum(r.size for r in rows),
                         self.refs(resolved.repo_id), self.gathered(resolved, files), self.catalog.default_tag)

    def file_rows(self, resolved: Resolved, files: ModelFiles) -> tuple[FileRow, ...]:
        digest = resolved.model.digest
        with self._lock:
            known = self._rows.get(digest)
        if known is None:
            known = tuple(FileRow.of(f) for f in files.files.values())
            with self._lock:
                if len(self._rows) > KEPT:
                    self._rows.clear()
                self._rows[digest] = known
        return known

    def refs(self, repo_id: str) -> Refs:
        return self._refs.get(repo_id, lambda: self._read_refs(repo_id))

    def _read_refs(self, repo_id: str) -> Refs:
        """The repository's refs less cosign's sha256-HEX.sig/.att tags: evidence, not versions."""
        found = self.catalog.refs(repo_id)
        return dataclasses.replace(found, tags=tuple(t for t in found.tags if not EVIDENCE_TAG.fullmatch(t[0])))

    def gathered(self, resolved: Resolved, files: ModelFiles) -> Gathered:
        key = f"{resolved.repo.shown}@{resolved.top.digest}"
        now = time.monotonic()
        with self._lock:
            known = self._kept.get(key)
        if known is not None and now - known[0] < FRESH:
            return known[1]
        made = self._gather(resolved, files)
        with self._lock:
            self._kept[key] = (now, made)
            while len(self._kept) > KEPT:
                self._kept.popitem(last=False)
        return made

    def _gather(self, resolved: Resolved, files: ModelFiles) -> Gathered:
        store = resolved.repo.store
        doc = facts.config_of(store, resolved.manifest)
        descriptor = tuple((k, facts.shown(v)) for k, v in facts.section(doc, "descriptor").items()
                           if facts.shown(v))
        config = tuple((k, facts.shown(facts.section(doc, "config").get(k)))
                       for k in ("architecture", "format", "paramSize", "precision", "quantization", "capabilities")
                       if facts.shown(facts.section(doc, "config").get(k)))
        card = self._card(resolved, files)
        found = facts.classify(store.referrers(resolved.top))
        verified, keys, problem = self._verified(resolved)
        evidence = tuple(Signature(e.digest, e.kind, e.predicate_type or e.artifact_type, e.signed,
                                   verified.get(e.digest, "")) for e in found if e.kind != "other")
        classic = facts.classic_signature(store, resolved.top)
        if classic is not None:
            evidence = (Signature(classic, "signature", "cosign simple signing (.sig tag)", True,
                                  verified.get(classic, "")), *evidence)
        sbom: tuple[tuple[str, str], ...] = ()
        provenance: tuple[tuple[str, str], ...] = ()
        for e in found:
            if e.kind == "sbom" and not sbom:
                sbom = sbom_summary(facts.statement_of(store, e))
            elif e.kind == "provenance" and not provenance:
                provenance = provenance_summary(facts.statement_of(store, e))
        from ocibridge.signing.use import as_use_policy

        verify = as_use_policy(self.catalog.verify).keys
        return Gathered(descriptor, config, card, evidence, keys, problem, self._policy(resolved), sbom, provenance,
                        warm_rows(store, resolved.model),
                        scan_panel(store, resolved.model, list(self.scan_keys or ()),
                                   verify.keys if verify is not None else None))

    def _card(self, resolved: Resolved, files: ModelFiles) -> Card | None:
        found = next((f for p, f in files.files.items() if p.lower() in CARD_NAMES), None)
        if found is None:
            return None
        data = read_small(resolved, found)
        return None if data is None else render_card(data, resolved.repo_id, resolved.revision)

    def _verified(self, resolved: Resolved) -> tuple[dict[str, str], bool, str]:
        """Who signed, by referrer digest, as serve's ``--verify-key`` keys verify it."""
        from ocibridge.signing.coverage import Trusted
        from ocibridge.signing.use import as_use_policy
        from ocibridge.signing.verify import verify_artifact

        keys = as_use_policy(self.catalog.verify).keys
        if keys is None:
            return {}, False, ""
        try:
            found = verify_artifact(resolved.repo.store, resolved.top, keys, trusts=Trusted.FILES)
        except SignatureError as e:
            return {}, True, str(e)
        return {v.where: v.signer for v in found}, True, ""

    def _policy(self, resolved: Resolved) -> PolicyView | None:
        from ocibridge.signing.use import as_use_policy, decision_for

        located = resolved.repo.located(resolved.tag, resolved.top.digest)
        try:
            decision = decision_for(located, as_use_policy(self.catalog.verify))
        except OcibridgeError:
            return None
        if decision is None:
            return None
        return PolicyView(str(decision.path), decision.section, decision.scope.describe(),
                          tuple(r.describe() for r in decision.requirements), decision.accepts_anything)


def _statement_predicate(doc: dict[str, Any] | None) -> dict[str, Any]:
    if not isinstance(doc, dict):
        return {}
    inner = doc.get("predicate")
    return inner if isinstance(inner, dict) else doc


def sbom_summary(doc: dict[str, Any] | None) -> tuple[tuple[str, str], ...]:
    bom = _statement_predicate(doc)
    if not bom:
        return ()
    listed = bom.get("components")
    components: list[Any] = listed if isinstance(listed, list) else []
    main = facts.section(facts.section(bom, "metadata"), "component")
    kinds: dict[str, int] = {}
    for c in components:
        if isinstance(c, dict):
            kinds[str(c.get("type", "?"))] = kinds.get(str(c.get("type", "?")), 0) + 1
    rows = [("format", f"{bom.get('bomFormat', '?')} {bom.get('specVersion', '')}".strip()),
            ("model", facts.shown(main.get("name"))),
            ("components", ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) or "none")]
    return tuple((k, v) for k, v in rows if v)


def provenance_summary(doc: dict[str, Any] | None) -> tuple[tuple[str, str], ...]:
    predicate = _statement_predicate(doc)
    build = facts.section(predicate, "buildDefinition")
    run = facts.section(predicate, "runDetails")
    external = facts.section(build, "externalParameters")
    listed = build.get("resolvedDependencies")
    deps: list[Any] = listed if isinstance(listed, list) else []
    parents = [d for d in deps if isinstance(d, dict) and ("mediaType" in d or d.get("name") in ("hub", "ollama"))]
    rows = [("builder", facts.shown(facts.section(run, "builder").get("id"))),
            ("build type", facts.shown(build.get("buildType"))),
            ("source", facts.shown(external.get("source"))),
            ("parent", ", ".join(f"{d.get('uri', '')}@{facts.shown(d.get('digest'))}" for d in parents)),
            ("files read", str(sum(1 for d in deps if isinstance(d, dict) and d not in parents)))]
    return tuple((k, v) for k, v in rows if v)
