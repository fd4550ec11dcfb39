"""The store contract: every store and view behaves the same and fails the same way.

Each case is a store holding one artifact (a layout, a registry repository on the real test
registry, a local Ollama store, a built artifact, the family, relabel, pull-cache and Ollama
views, the Ollama registry guard) plus what it must answer, known from outside the store. The
same tests then run against each: reads, absent content (:class:`NotFound`), content that is
not what its digest says (:class:`DigestMismatch`, at the end of the read at the latest), and,
for the writable ones, writes. A directory target, which keeps files rather than blobs, has its
own part at the end.
"""

from __future__ import annotations

import ast
import hashlib
import io
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from ollama_fixtures import DOCKER_MANIFEST, write_gguf, write_store

from ocibridge.cache.blobsource import CacheSource
from ocibridge.errors import DigestMismatch, NotFound, OcibridgeError
from ocibridge.kinds.conversion import convert_artifact
from ocibridge.kinds.directory.source import read_directory
from ocibridge.kinds.modelcar.build import IMAGE_TAG, ModelCarImage, build_modelcar
from ocibridge.kinds.ollama import OllamaRegistryStore, OllamaStore, parse_ollama_name
from ocibridge.kinds.ollama.exporter import OllamaView, _plan
from ocibridge.kinds.repack import StagedBlobs
from ocibridge.mirror.endpoints import EmptyStore
from ocibridge.mirror.relabel import RelabelStore
from ocibridge.model.builder import ARTIFACT_TAG, PlannedArtifact, build
from ocibridge.model.extract import DirectoryTarget, extract, fetch_manifest
from ocibridge.oci.mediatypes import Family
from ocibridge.oci.models import Descriptor, Manifest, parse_manifest_bytes
from ocibridge.oci.reference import parse_registry_reference
from ocibridge.stores.base import (
    Closable,
    CopyTarget,
    Ingesting,
    Mounting,
    ReadableStore,
    Transactional,
    WritableStore,
)
from ocibridge.stores.forwarding import ForwardingReads
from ocibridge.stores.layout import LayoutStore
from ocibridge.stores.registry import open_repository
from ocibridge.transfer.copy import copy
from ocibridge.transfer.pullcache import cached_pull
from ocibridge.transfer.writer import ArtifactSource, Blob

WEIGHTS = bytes(range(256)) * 64  # the blob every case serves, known here
ABSENT = Descriptor(mediaType="application/octet-stream", size=5,
                    digest="sha256:" + hashlib.sha256(b"never").hexdigest())
ABSENT_MANIFEST = Descriptor(mediaType="application/vnd.oci.image.manifest.v1+json", size=5,
                             digest="sha256:" + hashlib.sha256(b"nope!").hexdigest())


@dataclass
class Case:
    store: ReadableStore
    tag: str | None  # a tag the store resolves (None: it resolves no reference)
    blob: Descriptor  # a layer holding WEIGHTS
    manifest_bytes: bytes | None = None  # what the tag names, byte for byte, when known outside
    corrupt: Callable[[], None] | None = None  # makes the stored blob's bytes wrong
    blob_bytes: bytes = WEIGHTS


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _model(tmp: Path) -> Path:
    root = tmp / "model"
    root.mkdir(parents=True)
    (root / "weights.bin").write_bytes(WEIGHTS)
    (root / "config.json").write_text('{"model_type": "llama"}\n')
    return root


def _weights_layer(store: ReadableStore, tag: str) -> Descriptor:
    desc = store.resolve(tag)
    manifest = parse_manifest_bytes(store.fetch_bytes(desc), desc.mediaType)
    assert isinstance(manifest, Manifest)
    return next(layer for layer in manifest.layers if layer.digest == _sha(WEIGHTS))


def _corrupt_file(path: Path) -> Callable[[], None]:
    def corrupt() -> None:
        data = bytearray(path.read_bytes())
        data[10] ^= 0xFF
        path.write_bytes(bytes(data))

    return corrupt


def _layout_case(tmp: Path) -> Case:
    layout = LayoutStore(tmp / "layout", create=True)
    art = build(read_directory(_model(tmp)))
    copy(art, ARTIFACT_TAG, layout, "v1")
    blob = _weights_layer(layout, "v1")
    return Case(layout, "v1", blob, art.manifest_bytes, _corrupt_file(layout.blob_path(blob.digest)))


def _ollama_files(tmp: Path) -> tuple[Path, bytes]:
    root = tmp / "ollama"
    path = write_store(root, ("registry.ollama.ai", "library", "tiny", "latest"),
                       [("model", WEIGHTS, {}), ("template", b"{{ .Prompt }}", {})],
                       {"model_format": "gguf", "architecture": "amd64", "os": "linux"})
    return root, path.read_bytes()


# -- the cases -----------------------------------------------------------------------------------
def layout(tmp: Path, registry) -> Case:
    return _layout_case(tmp)


def registry_repository(tmp: Path, registry) -> Case:
    source = _layout_case(tmp)
    repo = open_repository(parse_registry_reference(f"{registry.host}/contract/{tmp.name.lower()}:v1"))
    copy(source.store, "v1", repo, "v1")
    return Case(repo, "v1", source.blob, source.manifest_bytes)


def ollama_store(tmp: Path, registry) -> Case:
    root, manifest = _ollama_files(tmp)
    store = OllamaStore(root, parse_ollama_name("tiny"))
    blob = Descriptor(mediaType="application/vnd.ollama.image.model", digest=_sha(WEIGHTS), size=len(WEIGHTS))
    return Case(store, "latest", blob, manifest, _corrupt_file(store.blob_path(blob.digest)))


def ollama_registry_guard(tmp: Path, registry) -> Case:
    root, manifest = _ollama_files(tmp)
    repo = open_repository(parse_registry_reference(f"{registry.host}/library/{tmp.name.lower()}:latest"))
    copy(OllamaStore(root, parse_ollama_name("tiny")), "latest", repo, "latest")
    blob = Descriptor(mediaType="application/vnd.ollama.image.model", digest=_sha(WEIGHTS), size=len(WEIGHTS))
    return Case(OllamaRegistryStore(repo, "ollama://x"), "latest", blob, manifest)


def built_artifact(tmp: Path, registry) -> Case:
    model = _model(tmp)
    art = build(read_directory(model))
    return Case(art, ARTIFACT_TAG, _weights_layer(art, ARTIFACT_TAG), art.manifest_bytes,
                _corrupt_file(model / "weights.bin"))


def planned_artifact(tmp: Path, registry) -> Case:
    model = _model(tmp)
    planned = PlannedArtifact(read_directory(model))
    return Case(planned, ARTIFACT_TAG, _weights_layer(planned, ARTIFACT_TAG), None,
                _corrupt_file(model / "weights.bin"))


def family_view(tmp: Path, registry) -> Case:
    source = _layout_case(tmp)
    conversion = convert_artifact(source.store, "v1", "modelkit")
    view = conversion.store
    tag = view.tags()[0]
    return Case(view, tag, _weights_layer(view, tag), None, source.corrupt)


def relabel_view(tmp: Path, registry) -> Case:
    source = _layout_case(tmp)
    view = RelabelStore(source.store, Family.CNCF)
    return Case(view, "v1", _weights_layer(view, "v1"), None, source.corrupt)


def pull_cache_view(tmp: Path, registry) -> Iterator[Case]:
    case = registry_repository(tmp, registry)
    with cached_pull(case.store, None) as cached:
        yield Case(cached, case.tag, case.blob, case.manifest_bytes)


def forwarding_reads(tmp: Path, registry) -> Case:
    """The reads a wrapping store inherits (stores/forwarding.py): the wrapped layout's, as they are."""
    case = _layout_case(tmp)
    return Case(ForwardingReads(case.store), case.tag, case.blob, case.manifest_bytes, case.corrupt)


def ollama_view(tmp: Path, registry) -> Case:
    """A ModelPack artifact of a GGUF model, seen as the Ollama model it exports to."""
    model = tmp / "gguf-model"
    model.mkdir()
    weights = write_gguf(model / "model.gguf").read_bytes()
    layout = LayoutStore(tmp / "layout", create=True)
    art = build(read_directory(model))
    copy(art, ARTIFACT_TAG, layout, "v1")
    view = OllamaView(layout, _plan(layout, layout.resolve("v1")))
    blob = Descriptor(mediaType="application/vnd.ollama.image.model", digest=_sha(weights), size=len(weights))
    return Case(view, view.descriptor.digest, blob, None, _corrupt_file(layout.blob_path(blob.digest)), weights)


def staged_blobs(tmp: Path, registry) -> Case:
    """A conversion's staged blobs: read-only, resolving no reference, every staged file
    verified as it is read."""
    source = _layout_case(tmp)
    staged = StagedBlobs(source.store)
    blob = staged._stage(io.BytesIO(WEIGHTS), len(WEIGHTS), "weights")
    return Case(staged, None, blob, None, _corrupt_file(staged._files[blob.digest]))


def modelcar_image(tmp: Path, registry) -> Case:
    """The ModelCar image of an artifact, before it is written: its layers made on reading.
    What a layer holds is known from outside: the same image built into a second layout."""
    source = _layout_case(tmp)
    built = LayoutStore(tmp / "built", create=True)
    copy(source.store, "v1", built, "v1")
    image_desc = build_modelcar(built, "v1", tag="car")
    layer = parse_manifest_bytes(built.fetch_bytes(image_desc)).layers[0]
    src_desc, src = fetch_manifest(source.store, "v1")
    image = ModelCarImage(source.store, src_desc, src, index=False, platforms=("linux/amd64",), spool=False)
    return Case(image, IMAGE_TAG, layer, built.fetch_bytes(image_desc), source.corrupt,
                _read(built.open_blob(layer)))


def cache_source(tmp: Path, registry) -> Case:
    """The model cache filling itself from a source while a snapshot is built: it resolves the
    one manifest it was opened for, by digest."""
    source = _layout_case(tmp)
    desc = source.store.resolve("v1")
    blobs = LayoutStore(tmp / "cache", create=True)
    (tmp / "locks").mkdir()
    store = CacheSource(blobs, tmp / "locks", source.store, desc)
    return Case(store, desc.digest, source.blob, source.manifest_bytes, source.corrupt)


def written_artifact(tmp: Path, registry) -> Case:
    """What the writer holds: one manifest and the blobs given with it (here a file), resolved
    by the manifest's digest."""
    path = tmp / "weights.bin"
    path.write_bytes(WEIGHTS)
    blob = Descriptor(mediaType="application/octet-stream", digest=_sha(WEIGHTS), size=len(WEIGHTS))
    config = Descriptor.for_bytes("application/vnd.oci.empty.v1+json", b"{}")
    body = Manifest(mediaType="application/vnd.oci.image.manifest.v1+json", config=config,
                    layers=[blob]).to_json_bytes()
    desc = Descriptor.for_bytes("application/vnd.oci.image.manifest.v1+json", body)
    store = ArtifactSource(desc, body, [Blob.of_bytes(config, b"{}"), Blob.of_file(blob, path)])
    return Case(store, desc.digest, blob, body, _corrupt_file(path))


def empty_store(tmp: Path, registry) -> Case:
    """A mirror target that does not exist yet, as a dry run sees it: it holds nothing."""
    return Case(EmptyStore("empty"), None, ABSENT)


@dataclass(frozen=True)
class Kind:
    """What a store of this case is: its class, writable, which named capabilities it has,
    whether it resolves a reference and holds the case's blob."""

    make: Callable[[Path, object], Case | Iterator[Case]]
    covers: str  # the class of the store it makes
    writable: bool = False
    capabilities: frozenset[type] = frozenset()
    resolves: bool = True
    holds: bool = True


WRITABLE_LOCAL = frozenset({Transactional, Closable})
KINDS = [
    Kind(layout, "LayoutStore", True, WRITABLE_LOCAL | {Ingesting}),
    Kind(registry_repository, "RegistryStore", True, frozenset({Mounting, Ingesting, Closable})),
    Kind(ollama_store, "OllamaStore", True, WRITABLE_LOCAL),
    Kind(ollama_registry_guard, "OllamaRegistryStore", True, frozenset({Mounting, Closable})),  # untyped blobs
    Kind(built_artifact, "ArtifactStore"),
    Kind(planned_artifact, "PlannedArtifact"),
    Kind(family_view, "ConvertedStore"),
    Kind(relabel_view, "RelabelStore"),
    Kind(pull_cache_view, "CachedPullSource"),
    Kind(forwarding_reads, "ForwardingReads"),
    Kind(ollama_view, "OllamaView"),
    Kind(staged_blobs, "StagedBlobs", resolves=False),
    Kind(cache_source, "CacheSource"),
    Kind(modelcar_image, "ModelCarImage", capabilities=frozenset({Closable})),  # its spooled layers
    Kind(empty_store, "EmptyStore", resolves=False, holds=False),
    Kind(written_artifact, "ArtifactSource"),
]
#: A copy target that keeps files, not blobs: its own part at the end of this file.
NOT_A_STORE = {"DirectoryTarget"}
CAPABILITIES = (Mounting, Ingesting, Transactional, Closable)
#: Cases whose stored bytes a test can spoil in place (a registry's are spoiled on the wire below).
CORRUPTIBLE = [k for k in KINDS if k.holds and k.make not in (registry_repository, ollama_registry_guard,
                                                                pull_cache_view)]
RESOLVING = [k for k in KINDS if k.resolves]
HOLDING = [k for k in KINDS if k.holds]


def _case(kind: Kind, tmp_path: Path, registry) -> Iterator[Case]:
    made = kind.make(tmp_path, registry)
    if isinstance(made, Case):
        yield made
    else:
        yield from made


def _ids(kinds: list[Kind]) -> list[str]:
    return [k.make.__name__ for k in kinds]


@pytest.fixture(params=KINDS, ids=_ids(KINDS))
def kind(request) -> Kind:
    return request.param


@pytest.fixture
def any_case(kind, tmp_path, registry) -> Iterator[Case]:
    yield from _case(kind, tmp_path, registry)


@pytest.fixture(params=RESOLVING, ids=_ids(RESOLVING))
def case(request, tmp_path, registry) -> Iterator[Case]:
    yield from _case(request.param, tmp_path, registry)


@pytest.fixture(params=HOLDING, ids=_ids(HOLDING))
def holding(request, tmp_path, registry) -> Iterator[Case]:
    yield from _case(request.param, tmp_path, registry)


@pytest.fixture(params=[k for k in KINDS if k.writable], ids=_ids([k for k in KINDS if k.writable]))
def writable(request, tmp_path, registry) -> Iterator[tuple[Case, WritableStore]]:
    for made in _case(request.param, tmp_path, registry):
        assert isinstance(made.store, WritableStore)
        yield made, made.store


@pytest.fixture(params=CORRUPTIBLE, ids=_ids(CORRUPTIBLE))
def corruptible(request, tmp_path, registry) -> Iterator[Case]:
    yield from _case(request.param, tmp_path, registry)


def _read(reader) -> bytes:
    with reader:
        parts = []
        while chunk := reader.read(4096):
            parts.append(chunk)
        return b"".join(parts)


# -- reads ---------------------------------------------------------------------------------------
def test_is_a_readable_store_and_writable_only_if_it_takes_writes(any_case, kind):
    assert type(any_case.store).__name__ == kind.covers
    assert isinstance(any_case.store, ReadableStore)
    assert any_case.store.describe()
    assert isinstance(any_case.store, WritableStore) == kind.writable  # read-only: no stubbed writes
    assert isinstance(any_case.store, CopyTarget) == kind.writable


def test_capabilities_are_named_protocols(any_case, kind):
    """What only some stores do is found by isinstance on a named protocol, never by probing
    for an attribute: each store has exactly the capabilities it implements."""
    assert {c for c in CAPABILITIES if isinstance(any_case.store, c)} == set(kind.capabilities)


def _store_classes() -> dict[str, str]:
    """Every class of the package that answers like a store (describe, exists, and reads or
    writes blobs), found in the source text: class name -> module file."""
    found = {}
    package = Path(__file__).resolve().parents[2] / "ocibridge"
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and not any(ast.unparse(b) == "Protocol" for b in node.bases):
                methods = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
                if {"describe", "exists"} <= methods and methods & {"open_blob", "push_blob"}:
                    found[node.name] = str(path.relative_to(package))
    return found


def test_the_contract_covers_every_store_class():
    classes = _store_classes()
    assert {"LayoutStore", "DirectoryTarget", "StagedBlobs"} <= set(classes)  # the scan sees them
    uncovered = set(classes) - {k.covers for k in KINDS} - NOT_A_STORE
    assert not uncovered, f"store classes without a case in KINDS: {sorted(uncovered)}"


def test_no_store_class_stubs_a_write_it_refuses():
    """A class either takes writes (all of them) or defines none: read-only stores and the
    directory target have no method that only refuses."""
    package = Path(__file__).resolve().parents[2] / "ocibridge"
    writes = {"push_blob", "push_manifest", "tag"}
    partial = []
    for name, rel in _store_classes().items():
        tree = ast.parse((package / rel).read_text())
        cls = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == name)
        methods = {n.name for n in cls.body if isinstance(n, ast.FunctionDef)}
        if name in NOT_A_STORE:
            assert not methods & {"open_blob", "fetch_bytes", "resolve", "tags", "referrers", "tag"}, name
        elif methods & writes and not writes <= methods:
            partial.append(name)
    assert not partial, f"classes with some write methods only: {partial}"


def test_resolves_its_tag_and_the_digest(case):
    desc = case.store.resolve(case.tag)
    data = case.store.fetch_bytes(desc)
    assert _sha(data) == desc.digest and len(data) == desc.size
    if case.manifest_bytes is not None:
        assert data == case.manifest_bytes
    assert case.store.resolve(desc.digest).digest == desc.digest
    names = [d.digest for d in [parse_manifest_bytes(data, desc.mediaType).config,
                                *parse_manifest_bytes(data, desc.mediaType).layers] if d is not None]
    assert case.blob.digest in names


def test_holds_and_serves_the_blob(holding):
    assert holding.store.exists(holding.blob)
    assert _read(holding.store.open_blob(holding.blob)) == holding.blob_bytes


def test_holds_what_its_tag_names(case):
    assert case.store.exists(case.store.resolve(case.tag))


def test_absent_content_is_not_found(any_case):
    store = any_case.store
    assert not store.exists(ABSENT)
    with pytest.raises(NotFound):
        store.fetch_bytes(ABSENT)
    with pytest.raises(NotFound):
        _read(store.open_blob(ABSENT))
    with pytest.raises(NotFound):
        store.resolve("no-such-tag")
    with pytest.raises(NotFound):
        store.resolve(ABSENT_MANIFEST.digest)


def test_tags_and_referrers(case):
    tags = case.store.tags()
    assert tags == sorted(tags)
    if case.tag in tags or not case.tag.startswith("sha256:"):
        assert case.tag in tags
    assert case.store.referrers(case.store.resolve(case.tag)) == []


def test_bad_content_is_a_digest_mismatch(corruptible):
    assert corruptible.corrupt is not None
    corruptible.corrupt()
    with pytest.raises(DigestMismatch):
        _read(corruptible.store.open_blob(corruptible.blob))


def test_registry_content_corrupted_on_the_wire_is_a_digest_mismatch(registry, fault_proxy, tmp_path):
    """The registry case of the test above: a byte changed between the registry and us."""
    from support import corrupt

    source = _layout_case(tmp_path)
    direct = open_repository(parse_registry_reference(f"{registry.host}/contract/wire:v1"))
    copy(source.store, "v1", direct, "v1")
    through = open_repository(parse_registry_reference(f"{fault_proxy.host}/contract/wire:v1"))
    fault_proxy.add("GET", r"/blobs/" + source.blob.digest, corrupt(offset=100))
    with pytest.raises(DigestMismatch):
        _read(through.open_blob(source.blob))


# -- writes --------------------------------------------------------------------------------------
def _new_blob(case: Case, data: bytes) -> Descriptor:
    """A blob of the kind this store takes (an Ollama destination takes Ollama blobs only)."""
    return Descriptor(mediaType=case.blob.mediaType, digest=_sha(data), size=len(data))


def test_push_blob_verifies_before_the_blob_is_visible(writable):
    case, store = writable
    data = b"fresh blob " + store.describe().encode()
    desc = _new_blob(case, data)
    with pytest.raises(DigestMismatch):
        store.push_blob(desc, io.BytesIO(data[:-1] + b"?"))
    assert not store.exists(desc)
    store.push_blob(desc, io.BytesIO(data), reopen=lambda: io.BytesIO(data))
    assert store.exists(desc)
    assert _read(store.open_blob(desc)) == data


def test_push_manifest_tag_and_retag(writable):
    case, store = writable
    original = store.resolve(case.tag)
    data = store.fetch_bytes(original)
    store.push_manifest(original, data, "second")
    assert store.resolve("second").digest == original.digest
    store.tag(original, "third")
    assert store.resolve("third").digest == original.digest
    assert {"second", "third"} <= set(store.tags())


def test_tag_of_an_absent_manifest_is_not_found(writable):
    _, store = writable
    with pytest.raises(NotFound):
        store.tag(ABSENT_MANIFEST, "ghost")
    with pytest.raises(NotFound):
        store.resolve("ghost")


def test_manifest_with_wrong_digest_is_refused(writable):
    case, store = writable
    original = store.resolve(case.tag)
    data = store.fetch_bytes(original)
    with pytest.raises(DigestMismatch):
        store.push_manifest(original, data + b" ", "broken")
    with pytest.raises(NotFound):
        store.resolve("broken")


# -- the directory target ------------------------------------------------------------------------
def test_directory_target_holds_files_not_blobs(tmp_path):
    """A copy target, not a store: nothing to read back, so no read method to stub."""
    target = DirectoryTarget(tmp_path / "out")
    assert isinstance(target, CopyTarget)
    assert not isinstance(target, ReadableStore) and not isinstance(target, WritableStore)
    assert not target.exists(ABSENT)


def test_directory_target_is_a_copy_destination(tmp_path):
    source = _layout_case(tmp_path)
    out = tmp_path / "out"
    result = extract(source.store, "v1", out)
    assert (out / "weights.bin").read_bytes() == WEIGHTS
    assert sorted(result.files) == ["config.json", "weights.bin"]
    assert result.manifest is not None and result.manifest.digest == _sha(source.manifest_bytes or b"")


def test_directory_target_refuses_bad_content_and_writes_nothing(tmp_path):
    source = _layout_case(tmp_path)
    assert source.corrupt is not None
    source.corrupt()
    out = tmp_path / "out"
    with pytest.raises(DigestMismatch):
        extract(source.store, "v1", out)
    assert not out.exists()  # made by the pull, and taken away again


def test_directory_target_takes_writes_only_inside_its_block(tmp_path):
    target = DirectoryTarget(tmp_path / "out")
    blob = Descriptor(mediaType="application/vnd.cncf.model.weight.v1.raw", digest=_sha(WEIGHTS),
                      size=len(WEIGHTS))
    with pytest.raises(OcibridgeError, match="not open for writing"):
        target.push_blob(blob, io.BytesIO(WEIGHTS))
    manifest = json.dumps({"schemaVersion": 2}).encode()
    with pytest.raises(OcibridgeError):
        target.push_manifest(Descriptor.for_bytes(DOCKER_MANIFEST, manifest), manifest)
