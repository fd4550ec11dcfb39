"""What an artifact is, as API calls: ``inspect`` (its manifest, config, layers, family and
evidence), ``validate`` (the model-spec's rules, and a runtime's readiness) and ``tags`` (a
repository's or layout's tags, less ocibridge's and cosign's own and those serve deleted).
"""

from __future__ import annotations

from ocibridge.api.missing import explaining_missing, no_such_repository
from ocibridge.api.opening import open_located
from ocibridge.api.options import TransferOptions
from ocibridge.errors import NotFound
from ocibridge.model.extract import read_model_manifest
from ocibridge.model.inspect import summary
from ocibridge.oci.bookkeeping import is_hidden
from ocibridge.oci.models import Descriptor
from ocibridge.places.locate import Locator, text_of
from ocibridge.places.targets import closes_its_stores, default_store_path, is_local_name
from ocibridge.scanning.report import PREDICATE_TYPE as SCAN_PREDICATE_TYPE
from ocibridge.stores.tombstones import without_tombstones
from ocibridge.transfer.results import InspectResult, ValidateResult


@explaining_missing
@closes_its_stores
def inspect(ref: str | Locator, *, transfer: TransferOptions | None = None) -> InspectResult:
    located, target = open_located(ref, transfer).parts
    ref = text_of(located)
    read = read_model_manifest(target.store, target.reference)
    info = summary(target.store, read)
    from ocibridge.kinds.family_info import describe

    describe(target.store, read, info)  # the manifest inspected, judged as read: asked for once
    from ocibridge.kinds.hf.repotype import DATASET, REPO_TYPE_KEY

    if info["annotations"].get(REPO_TYPE_KEY) == DATASET:  # a Hub dataset's artifact (a model's says nothing)
        info["repoType"] = DATASET
    from ocibridge.signing.attest import list_evidence

    subject = Descriptor(mediaType=info["mediaType"], digest=info["digest"], size=info["size"])
    evidence = list_evidence(target.store, subject)
    if evidence:  # attestations and evidence referrers (claimed types; verify checks them)
        info["attestations"] = evidence
    if any(e["predicateType"] == SCAN_PREDICATE_TYPE for e in evidence):  # the newest scan report's verdict
        from ocibridge.scanning.stored import newest_summary

        info["scan"] = newest_summary(target.store, subject)
    info["reference"] = ref
    return InspectResult(ref, info["digest"], info["mediaType"], info.get("artifactType"), info["size"],
                         tuple(info["layers"]), info.get("config"), info)


@explaining_missing
@closes_its_stores
def validate(ref: str | Locator, *, transfer: TransferOptions | None = None, strict: bool = False,
             warnings: list[str] | None = None, runtime: str | None = None) -> ValidateResult:
    """Raise :class:`ocibridge.errors.ValidationError` listing every broken rule of the
    model-spec. A model of another family (ModelKit, Docker model, ModelCar image, Ollama) is
    read as its family and its ModelPack form checked (``family`` says which). What the spec
    recommends is reported in the result's ``warnings`` (and into ``warnings`` when given, also
    when invalid); ``strict`` makes it errors. ``runtime`` (``cri-o``, ``containerd@2.1``) adds
    that runtime's readiness, which ``strict`` then makes errors too."""
    from ocibridge.errors import UsageError
    from ocibridge.model.validate import parse_runtime

    try:
        wanted = parse_runtime(runtime) if runtime is not None else None
    except ValueError as e:
        raise UsageError(str(e)) from None
    found: list[str] = [] if warnings is None else warnings
    located, target = open_located(ref, transfer).parts
    ref = text_of(located)
    from ocibridge.kinds.validity import validate_model

    done = validate_model(target.store, target.reference, shown=ref, strict=strict, warnings=found,
                          runtime=wanted)
    return ValidateResult(ref, done.descriptor, tuple(found), done.family, done.title)


@closes_its_stores
def tags(ref: str | Locator, *, transfer: TransferOptions | None = None, bookkeeping: bool = False) -> list[str]:
    """The tags of a registry repository or a layout; of a local ``NAME[:TAG]``, NAME's TAGs.
    A repository that exists with no tag (emptied) has none; NotFound when the registry does
    not know the repository at all (its tag list answered 404: most often a misspelt name).
    ocibridge's own tags (``ocibridge-ref-<hex>`` beside every referrer, serve's
    ``ocibridge-commit-<id>`` and ``ocibridge-refs``: signing.md, serve.md) and cosign's beside a
    signed model (``sha256-<hex>``, ``.sig``, ``.att``, ``.sbom``) are left out unless ``bookkeeping``."""
    names = _tags(ref, transfer, deleted=bookkeeping)
    return names if bookkeeping else [name for name in names if not is_hidden(name)]


def _tags(ref: str | Locator, transfer: TransferOptions | None, *, deleted: bool = True) -> list[str]:
    """The tags; without ``deleted``, less those serve deleted (they name its tombstone)."""
    from ocibridge.stores.layout import LayoutStore
    from ocibridge.stores.local_names import split_local_name, tags_of

    held = _local_tags(ref)
    if held:
        return held
    located, target = open_located(ref, transfer).parts  # located once, here
    named = split_local_name(text_of(located)) if is_local_name(located) else None
    if named is not None and isinstance(target.store, LayoutStore):  # oci:… is no local name
        return tags_of(target.store, named[0])
    names = target.store.tags()
    from ocibridge.stores.registry.store import RegistryStore  # opened above when it is one

    if not names and isinstance(target.store, RegistryStore) and target.store.repository_unknown:
        raise NotFound(no_such_repository(text_of(located)))
    return names if deleted else without_tombstones(target.store, names)


def _local_tags(ref: str | Locator) -> list[str]:
    """The TAGs the local store holds of a bare NAME: the name rule finds NAME:latest only, and
    ``tags tiny`` after ``push tiny tiny:v1`` asked docker.io instead of listing v1."""
    from ocibridge.stores.layout import LayoutStore
    from ocibridge.stores.local_names import split_local_name, tags_of

    if not isinstance(ref, str) or ":" in ref or split_local_name(ref) is None:
        return []
    store = default_store_path()
    return tags_of(LayoutStore(store), ref) if (store / "oci-layout").is_file() else []
