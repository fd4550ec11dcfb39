"""Carton ⇄ ModelPack: reference cartons (written by the real Carton library) round-trip through
a layout and a registry with the same MANIFEST bytes, the Carton library reads the exports, and
LINKS files are fetched lazily from a local HTTP server with every Content-Encoding."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import http.server
import json
import os
import subprocess
import sys
import threading
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
import zstandard
from support.noise import noise

from ocibridge.kinds.carton import (
    ANNOTATION_MODEL_HASH,
    CartonError,
    CartonLinkError,
    LinkFetcher,
    NotACarton,
    export_carton,
    format_manifest,
    read_carton,
    zipwrite,
)
from ocibridge.kinds.carton.zipwrite import ZipWriter
from ocibridge.kinds.directory.source import read_directory
from ocibridge.model.builder import ARTIFACT_TAG, build
from ocibridge.model.config import parse_config
from ocibridge.model.validate import validate
from ocibridge.oci.mediatypes import Kind, Variant, parse_layer_media_type
from ocibridge.stores.layout import LayoutStore
from ocibridge.transfer.copy import copy
from tests.support.data import data

REFERENCE = data("carton")
REFERENCE_CARTONS = sorted(REFERENCE.glob("*.carton"))
MODEL_HASHES = {
    "python_runner_doubler.carton": "7c243de56e21c731d2743a042bae2ab008ad285d69e9b771af761b979536cfdf",
    "torchscript_test_model.carton": "e84df25fa7ecc0fa0927e7799dc6bf9a641c649af4194d2892a612f6b4085a68",
}
TOML = b"""spec_version = 1
model_name = "tiny"

[runner]
runner_name = "noop"
required_framework_version = "=0.0.1"
runner_compat_version = 1
"""


# -- helpers shared with test_carton_bad.py ------------------------------------------------------
def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def make_carton(
    path: Path,
    files: dict[str, bytes],
    *,
    toml: bytes = TOML,
    symlinks: dict[str, str] | None = None,
    links: dict[str, list[str]] | None = None,
    omit: tuple[str, ...] = (),
    manifest: dict[str, str] | None = None,
) -> str:
    """A carton as the Carton library writes one (zstd entries, stored MANIFEST and LINKS,
    symlinks stored, an empty tensor index the library needs); ``omit`` leaves files out of
    the zip (for LINKS). Returns the model hash."""
    everything = {"carton.toml": toml, "tensor_data/index.toml": b"tensor = []\n", **files}
    entries = {p: sha(d) for p, d in everything.items()}
    for link, target in (symlinks or {}).items():
        resolved = os.path.normpath(os.path.join(os.path.dirname(link), target))
        entries[link] = entries[resolved]
    if manifest is not None:
        entries = manifest
    manifest_bytes = format_manifest(entries)
    with open(path, "wb") as out:
        zw = ZipWriter(out)
        for p, data in everything.items():
            if p not in omit:
                zw.add(p, iter([data]), size_hint=len(data))
        for link, target in (symlinks or {}).items():
            zw.add_symlink(link, target)
        zw.add("MANIFEST", iter([manifest_bytes]), method=0)
        if links is not None:
            body = "version = 1\n\n[urls]\n" + "".join(f'{h} = {json.dumps(u)}\n' for h, u in links.items())
            zw.add("LINKS", iter([body.encode()]), method=0)
        zw.close()
    return sha(manifest_bytes)


def push(carton: Path, layout: Path, tag: str = "v1", **kw) -> str:
    """read → build → copy, as the CLI's push does; returns the manifest digest."""
    store = LayoutStore(layout, create=True)
    art = build(read_carton(carton, **kw))
    return copy(art, ARTIFACT_TAG, store, tag).root.digest


def zip_manifest(path: Path) -> bytes:
    with zipfile.ZipFile(path) as zf:
        return zf.read("MANIFEST")


def layout_files(layout: Path) -> list[str]:
    return sorted(str(p.relative_to(layout)) for p in layout.rglob("*") if p.is_file())


def assert_nothing_published(layout: Path) -> None:
    """No index entry, no manifest, no temp file; any blob present is intact content."""
    store = LayoutStore(layout)
    assert store.read_index().manifests == []
    for p in layout.rglob("*"):
        assert ".ocibridge-tmp-" not in p.name, p
    for blob in (layout / "blobs" / "sha256").iterdir():
        assert sha(blob.read_bytes()) == blob.name


# -- reference cartons ------------------------------------------------------------------------------
def test_reference_cartons_present() -> None:
    assert {p.name for p in REFERENCE_CARTONS} >= set(MODEL_HASHES)


@pytest.mark.parametrize("carton", REFERENCE_CARTONS, ids=lambda p: p.name)
def test_reference_round_trip_layout(carton: Path, tmp_path: Path) -> None:
    digest = push(carton, tmp_path / "layout")
    assert push(carton, tmp_path / "layout", tag="v2") == digest  # reproducible
    store = LayoutStore(tmp_path / "layout")
    desc = validate(store, "v1")  # a valid ModelPack artifact
    manifest = json.loads(store.fetch_bytes(desc))
    assert manifest["annotations"][ANNOTATION_MODEL_HASH] == MODEL_HASHES[carton.name]
    for layer in manifest["layers"]:  # raw layers: the OCI digest *is* the MANIFEST sha256
        assert parse_layer_media_type(layer["mediaType"]).variant is Variant.RAW
    out = tmp_path / "out.carton"
    export_carton(store, desc, out)
    assert zip_manifest(out) == zip_manifest(carton)
    assert sha(zip_manifest(out)) == MODEL_HASHES[carton.name]
    with zipfile.ZipFile(out) as zf, zipfile.ZipFile(carton) as orig:
        methods = {i.filename: i.compress_type for i in zf.infolist()}
        assert sorted(methods) == sorted(i.filename for i in orig.infolist())
    assert methods.pop("MANIFEST") == 0
    assert set(methods.values()) == {93}
    again = read_carton(out)  # the export passes every check of the reader
    assert again.annotations[ANNOTATION_MODEL_HASH] == MODEL_HASHES[carton.name]
    # the export re-pushes to the very same artifact
    assert push(out, tmp_path / "layout2") == digest


def test_reference_mapping() -> None:
    package = read_carton(REFERENCE / "python_runner_doubler.carton")
    assert package.source_format == "carton"
    assert package.descriptor == {
        "name": "doubler",
        "description": "Doubles a float32 tensor.",
        "licenses": ["Apache-2.0"],
        "sourceURL": "https://example.com/repo",
        "docURL": "https://example.com",
    }
    assert package.config == {"format": "python"}
    a = package.annotations
    assert a["io.carton.runner.required-framework-version"] == "=3.11"
    assert json.loads(a["io.carton.required-platforms+json"]) == ["x86_64-unknown-linux-gnu"]
    assert [t["name"] for t in json.loads(a["io.carton.inputs+json"])] == ["x", "label"]
    assert json.loads(a["io.carton.runner.opts+json"])["entrypoint_fn"] == "get_model"
    kinds = {f.path: f.kind for f in package.files}
    assert kinds["MANIFEST"] is Kind.WEIGHT_CONFIG and kinds["carton.toml"] is Kind.WEIGHT_CONFIG
    assert kinds["model/.carton/carton.lock"] is Kind.WEIGHT
    assert kinds["tensor_data/index.toml"] is Kind.DATASET
    assert kinds["misc/arch.png"] is Kind.DOC
    for f in package.files:  # digests known up front: the builder never re-hashes
        with f.open() as r:
            assert "sha256:" + sha(r.read()) == f.digest
    config = parse_config(build(package).config_bytes)
    assert config.descriptor.name == "doubler" and config.config.format == "python"


CARTON_INFO = """
import asyncio, json, os, sys
import cartonml
async def main():
    out = []
    for p in sys.argv[1:]:
        info = await cartonml.get_model_info(p)
        out.append([info.model_name, info.runner.runner_name, info.runner.required_framework_version,
                    [i.name for i in (info.inputs or [])], sorted(info.misc_files or {})])
    print(json.dumps(out), flush=True)
    os._exit(0)  # the library's runtime can crash during interpreter teardown
asyncio.run(main())
"""


def carton_info(*paths: Path, env_dir: Path) -> list:
    env = {**os.environ, "CARTON_CACHE_DIR": str(env_dir / "cache"), "CARTON_RUNNER_DIR": str(env_dir / "r"),
           "CARTON_RUNNER_DATA_DIR": str(env_dir / "d")}
    proc = subprocess.run([sys.executable, "-c", CARTON_INFO, *map(str, paths)], capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_carton_library_reads_exports(tmp_path: Path) -> None:
    import cartonml  # noqa: F401 - a test dependency (cartonml-nightly); missing, the test fails

    exported = []
    for carton in REFERENCE_CARTONS:
        layout = tmp_path / carton.stem
        push(carton, layout)
        store = LayoutStore(layout)
        out = tmp_path / f"{carton.stem}.export.carton"
        export_carton(store, store.resolve("v1"), out)
        exported.append(out)
    sym = tmp_path / "sym.carton"
    make_carton(sym, {"model/real.bin": noise(5000)}, symlinks={"model/alias.bin": "real.bin"})
    push(sym, tmp_path / "sym")
    store = LayoutStore(tmp_path / "sym")
    export_carton(store, store.resolve("v1"), tmp_path / "sym.export.carton")
    originals = carton_info(*REFERENCE_CARTONS, env_dir=tmp_path)
    exports = carton_info(*exported, tmp_path / "sym.export.carton", env_dir=tmp_path)
    assert exports[:-1] == originals
    assert originals[0][0] in ("doubler", "torchscript_test_model")
    assert exports[-1][:2] == ["tiny", "noop"]


# -- generated cartons: symlinks, zip64, older writers ----------------------------------------------
def test_symlinks_round_trip(tmp_path: Path) -> None:
    files = {"model/weights/real.bin": noise(70_000, 1), "model/cfg.json": b"{}"}
    links = {"model/alias.bin": "weights/real.bin", "model/weights/again.bin": "../alias.bin"}
    model_hash = make_carton(tmp_path / "s.carton", files, symlinks=links)
    package = read_carton(tmp_path / "s.carton")
    targets = {f.path: f.link_target for f in package.files if f.link_target}
    assert targets == links
    push(tmp_path / "s.carton", tmp_path / "layout")
    store = LayoutStore(tmp_path / "layout")
    manifest = json.loads(store.fetch_bytes(store.resolve("v1")))
    variants = [parse_layer_media_type(x["mediaType"]).variant for x in manifest["layers"]]
    assert Variant.TAR in variants  # links travel in a tar layer
    out = tmp_path / "out.carton"
    export_carton(store, store.resolve("v1"), out)
    assert sha(zip_manifest(out)) == model_hash
    with zipfile.ZipFile(out) as zf:
        info = zf.getinfo("model/alias.bin")
        assert (info.external_attr >> 16) == 0o120777 and info.compress_type == 0
        assert zf.read(info) == b"weights/real.bin"
    assert {f.path: f.link_target for f in read_carton(out).files if f.link_target} == links


def test_zip64_entries_round_trip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every entry written with zip64 fields (as ≥ 4 GiB files are) reads back, here and in zipfile."""
    monkeypatch.setattr(zipwrite, "ZIP64_THRESHOLD", 0)
    files = {"model/w.bin": noise(300_000, 2)}
    model_hash = make_carton(tmp_path / "z.carton", files)
    with zipfile.ZipFile(tmp_path / "z.carton") as zf:
        assert all(i.extract_version == 45 for i in zf.infolist())
        assert zf.read("MANIFEST")  # stored entries readable by zipfile through zip64 extras
    package = read_carton(tmp_path / "z.carton")
    assert package.annotations[ANNOTATION_MODEL_HASH] == model_hash
    push(tmp_path / "z.carton", tmp_path / "layout")
    store = LayoutStore(tmp_path / "layout")
    export_carton(store, store.resolve("v1"), tmp_path / "o.carton")
    assert sha(zip_manifest(tmp_path / "o.carton")) == model_hash


def test_older_writer_stored_and_deflate(tmp_path: Path) -> None:
    """Older writers: no unix attributes, zero timestamps (DOS date and time 0), Stored and
    Deflate entries."""
    files = {"carton.toml": TOML, "model/m.bin": noise(40_000, 3) + b"\0" * 40_000, "misc/readme.md": b"# hi\n"}
    manifest = format_manifest({p: sha(d) for p, d in files.items()})
    path = tmp_path / "old.carton"
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in [*files.items(), ("MANIFEST", manifest)]:
            info = zipfile.ZipInfo(name, date_time=(1980, 0, 0, 0, 0, 0))
            info.create_system = 0
            info.compress_type = zipfile.ZIP_DEFLATED if name.startswith("model/") else zipfile.ZIP_STORED
            zf.writestr(info, data)
    with zipfile.ZipFile(path) as zf:
        assert {(i.date_time, i.create_system) for i in zf.infolist()} == {((1980, 0, 0, 0, 0, 0), 0)}
    package = read_carton(path, eager_verify_bytes=0)
    for f in package.files:
        with f.open() as r:
            assert "sha256:" + sha(r.read()) == f.digest
    push(path, tmp_path / "layout")
    store = LayoutStore(tmp_path / "layout")
    export_carton(store, store.resolve("v1"), tmp_path / "new.carton")
    assert zip_manifest(tmp_path / "new.carton") == manifest


def test_export_refuses_non_carton_artifact(tmp_path: Path) -> None:
    src = tmp_path / "model"
    src.mkdir()
    (src / "w.safetensors").write_bytes(noise(1000))
    store = LayoutStore(tmp_path / "layout", create=True)
    copy(build(read_directory(str(src))), ARTIFACT_TAG, store, "d")
    out = tmp_path / "out" / "x.carton"
    with pytest.raises(NotACarton, match="not a Carton artifact"):
        export_carton(store, store.resolve("d"), out)
    assert not (tmp_path / "out").exists()  # nor the folder made for it


# -- LINKS ------------------------------------------------------------------------------------------
ENCODERS = {
    "identity": lambda d: d,
    "gzip": gzip.compress,
    "zstd": lambda d: zstandard.ZstdCompressor().compress(d),
    "deflate": zlib.compress,
    "br": lambda d: __import__("brotli").compress(d),
}


class LinkServer:
    """Serves ``/<name>`` bodies, encoded as the route says when the client accepts it (or
    always, with ``always_encode``). A one-byte ``Range`` GET gets a 206 with the size unless
    ``range_allowed`` is off; such probes are logged in ``probes``, full bodies in ``gets``."""

    def __init__(self) -> None:
        self.routes: dict[str, tuple[bytes, str]] = {}
        self.gets: list[str] = []
        self.probes: list[str] = []
        self.head_allowed = True
        self.range_allowed = True
        self.always_encode = False
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _answer(self, body_wanted: bool) -> None:
                if self.path not in server.routes:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                data, coding = server.routes[self.path]
                ranged = body_wanted and "Range" in self.headers
                if ranged and server.range_allowed:
                    server.probes.append(self.path)
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes 0-0/{len(data)}")
                    self.send_header("Content-Length", "1")
                    self.end_headers()
                    self.wfile.write(data[:1])
                    return
                if body_wanted:  # logged before answering: a probe's client may be gone right after the headers
                    (server.probes if ranged else server.gets).append(self.path)
                accepted = self.headers.get("Accept-Encoding", "")
                if coding != "identity" and (coding in accepted or server.always_encode):
                    data = ENCODERS[coding](data)
                    self.send_response(200)
                    self.send_header("Content-Encoding", coding)
                else:
                    self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if body_wanted:
                    with contextlib.suppress(OSError):  # a probe closes without reading the body
                        self.wfile.write(data)

            def do_GET(self) -> None:
                self._answer(True)

            def do_HEAD(self) -> None:
                if not server.head_allowed:
                    self.send_response(405)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self._answer(False)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def add(self, name: str, data: bytes, coding: str = "identity") -> str:
        self.routes["/" + name] = (data, coding)
        return f"{self.base}/{name}"


@pytest.fixture()
def link_server() -> Iterator[LinkServer]:
    server = LinkServer()
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()


@pytest.mark.parametrize("coding", sorted(ENCODERS))
def test_links_fetched_with_each_encoding(coding: str, tmp_path: Path, link_server: LinkServer) -> None:
    weights = noise(200_000, 4)
    url = link_server.add(f"w-{coding}", weights, coding)
    full_hash = make_carton(tmp_path / "full.carton", {"model/w.bin": weights})
    model_hash = make_carton(tmp_path / "l.carton", {"model/w.bin": weights}, omit=("model/w.bin",),
                             links={sha(weights): [url]})
    assert model_hash == full_hash  # LINKS does not change the model hash
    fetcher = LinkFetcher(tmp_path / "cache")
    push(tmp_path / "l.carton", tmp_path / "layout", links_fetcher=fetcher)
    assert fetcher.downloads == 1 and (tmp_path / "cache" / sha(weights)).read_bytes() == weights
    store = LayoutStore(tmp_path / "layout")
    assert (tmp_path / "layout" / "blobs" / "sha256" / sha(weights)).read_bytes() == weights
    export_carton(store, store.resolve("v1"), tmp_path / "out.carton")
    assert sha(zip_manifest(tmp_path / "out.carton")) == model_hash
    with zipfile.ZipFile(tmp_path / "out.carton") as zf:
        assert "model/w.bin" in zf.namelist() and "LINKS" not in zf.namelist()


def test_links_not_downloaded_when_destination_has_blob(tmp_path: Path, link_server: LinkServer) -> None:
    weights = noise(300_000, 5)
    url = link_server.add("w", weights)
    make_carton(tmp_path / "full.carton", {"model/w.bin": weights})
    make_carton(tmp_path / "l.carton", {"model/w.bin": weights}, omit=("model/w.bin",), links={sha(weights): [url]})
    first = push(tmp_path / "full.carton", tmp_path / "layout")
    fetcher = LinkFetcher(tmp_path / "cache")
    assert push(tmp_path / "l.carton", tmp_path / "layout", tag="v2", links_fetcher=fetcher) == first
    assert fetcher.downloads == 0 and link_server.gets == []


@pytest.mark.parametrize("range_allowed", [True, False])
def test_links_size_by_ranged_get_when_head_refused(range_allowed: bool, tmp_path: Path,
                                                    link_server: LinkServer) -> None:
    """HEAD refused (as for S3 URLs signed for GET only): a one-byte ranged GET tells the size,
    or, from a server that ignores Range, the Content-Length of a body that is never read."""
    link_server.head_allowed = False
    link_server.range_allowed = range_allowed
    weights = noise(3 << 20, 11)
    url = link_server.add("w", weights, "gzip")
    make_carton(tmp_path / "l.carton", {"model/w.bin": weights}, omit=("model/w.bin",), links={sha(weights): [url]})
    fetcher = LinkFetcher(tmp_path / "cache")
    package = read_carton(tmp_path / "l.carton", links_fetcher=fetcher)
    assert next(f for f in package.files if f.path == "model/w.bin").size == len(weights)
    assert fetcher.downloads == 0 and link_server.gets == [] and link_server.probes == ["/w"]
    assert not (tmp_path / "cache").exists()
    copy(build(package), ARTIFACT_TAG, LayoutStore(tmp_path / "layout", create=True), "v1")
    assert fetcher.downloads == 1 and link_server.gets == ["/w"]


def test_links_mirrors_disagreeing_on_size(tmp_path: Path, link_server: LinkServer) -> None:
    """A first URL answering 200 with an error page: its length is not taken for the file's; the
    file is fetched while reading (first URL refused by its hash, second taken)."""
    weights = noise(60_000, 12)
    urls = [link_server.add("soft-404", b"<html>not here</html>"), link_server.add("w", weights)]
    make_carton(tmp_path / "l.carton", {"model/w.bin": weights}, omit=("model/w.bin",), links={sha(weights): urls})
    fetcher = LinkFetcher(tmp_path / "cache")
    push(tmp_path / "l.carton", tmp_path / "layout", links_fetcher=fetcher)
    assert fetcher.downloads == 1 and link_server.gets == ["/soft-404", "/w"]
    store = LayoutStore(tmp_path / "layout")
    export_carton(store, store.resolve("v1"), tmp_path / "out.carton")
    assert EntryBytes.read(tmp_path / "out.carton", "model/w.bin") == weights


def test_links_size_unknown_fetches_while_reading(tmp_path: Path, link_server: LinkServer) -> None:
    """No URL tells the size (HEAD refused, Range ignored, body always encoded): the size is
    learnt by fetching (once, into the cache) while reading."""
    link_server.head_allowed = False
    link_server.range_allowed = False
    link_server.always_encode = True
    weights = noise(40_000, 10)
    url = link_server.add("w", weights, "br")
    make_carton(tmp_path / "l.carton", {"model/w.bin": weights}, omit=("model/w.bin",), links={sha(weights): [url]})
    fetcher = LinkFetcher(tmp_path / "cache")
    package = read_carton(tmp_path / "l.carton", links_fetcher=fetcher)
    assert fetcher.downloads == 1
    assert next(f for f in package.files if f.path == "model/w.bin").size == len(weights)
    copy(build(package), ARTIFACT_TAG, LayoutStore(tmp_path / "layout", create=True), "v1")
    assert fetcher.downloads == 1 and link_server.gets == ["/w"]  # the copy reads the cache
    assert link_server.probes == ["/w"]


def test_links_of_unknown_size_stop_at_the_cap_the_user_can_raise(tmp_path: Path, link_server: LinkServer,
                                                                   monkeypatch, capsys) -> None:
    """A gzip answer of unknown size that inflates past $OCIBRIDGE_LINKS_MAX_BYTES is cut off
    there (decoded bytes count), nothing lands in the cache, and the message says how to raise it."""
    link_server.head_allowed = False
    link_server.range_allowed = False
    link_server.always_encode = True
    weights = bytes(300_000)  # compresses to a few hundred bytes: the decoded size is what counts
    url = link_server.add("w", weights, "gzip")
    make_carton(tmp_path / "l.carton", {"model/w.bin": weights}, omit=("model/w.bin",), links={sha(weights): [url]})
    monkeypatch.setenv("OCIBRIDGE_LINKS_MAX_BYTES", "100000")
    monkeypatch.setenv("OCIBRIDGE_CACHE", str(tmp_path / "cache"))
    from ocibridge.cli import main

    assert main(["push", str(tmp_path / "l.carton"), f"oci:{tmp_path}/layout:v1", "-q"]) == 1
    err = capsys.readouterr().err
    assert "more than the expected 100000 bytes (raise $OCIBRIDGE_LINKS_MAX_BYTES" in err
    assert not [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]
    monkeypatch.setenv("OCIBRIDGE_LINKS_MAX_BYTES", "400000")
    assert main(["push", str(tmp_path / "l.carton"), f"oci:{tmp_path}/layout:v1", "-q"]) == 0
    assert (tmp_path / "cache" / "carton-links" / sha(weights)).is_file()  # the cache it kept clean


def test_links_next_url_on_failure(tmp_path: Path, link_server: LinkServer) -> None:
    weights = noise(50_000, 6)
    bad = link_server.add("wrong", noise(50_000, 7))
    good = link_server.add("right", weights, "gzip")
    urls = ["http://127.0.0.1:9/unreachable", f"{link_server.base}/missing", bad, good]
    make_carton(tmp_path / "l.carton", {"model/w.bin": weights}, omit=("model/w.bin",), links={sha(weights): urls})
    fetcher = LinkFetcher(tmp_path / "cache")
    push(tmp_path / "l.carton", tmp_path / "layout", links_fetcher=fetcher)
    assert fetcher.downloads == 1 and link_server.gets[-1] == "/right"


@pytest.mark.parametrize("case", ["wrong-hash", "unreachable", "not-found"])
def test_links_failures_publish_nothing(case: str, tmp_path: Path, link_server: LinkServer) -> None:
    weights = noise(50_000, 8)
    url = {
        "wrong-hash": link_server.add("w", noise(50_000, 9)),
        "unreachable": "http://127.0.0.1:9/w",
        "not-found": f"{link_server.base}/nothing",
    }[case]
    make_carton(tmp_path / "l.carton", {"model/w.bin": weights}, omit=("model/w.bin",), links={sha(weights): [url]})
    LayoutStore(tmp_path / "layout", create=True)
    with pytest.raises(CartonLinkError, match="LINKS: cannot fetch .*model/w.bin"):
        push(tmp_path / "l.carton", tmp_path / "layout", links_fetcher=LinkFetcher(tmp_path / "cache"))
    assert_nothing_published(tmp_path / "layout")
    assert not (tmp_path / "layout" / "blobs" / "sha256" / sha(weights)).exists()
    assert [p.name for p in (tmp_path / "cache").iterdir()] == []  # no partial download left


SHRINK = """
import asyncio, os, shutil, sys
import cartonml
async def main():
    out = await cartonml.shrink(sys.argv[1], {sys.argv[2]: [sys.argv[3]]})
    shutil.move(out, sys.argv[4])  # (the library's temporary file: not left in /tmp)
    print("ok", flush=True)
    os._exit(0)
asyncio.run(main())
"""


def test_real_library_shrunk_carton(tmp_path: Path, link_server: LinkServer) -> None:
    """A LINKS carton written by the Carton library's own ``shrink`` (run in a subprocess: the
    library's runtime may crash at interpreter exit)."""
    original = REFERENCE / "torchscript_test_model.carton"
    pt = EntryBytes.read(original, "model/model.pt")
    url = link_server.add("model.pt", pt, "zstd")
    shrunk = tmp_path / "shrunk.carton"
    env = {**os.environ, "CARTON_CACHE_DIR": str(tmp_path / "cc")}
    proc = subprocess.run([sys.executable, "-c", SHRINK, str(original), sha(pt), url, str(shrunk)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with zipfile.ZipFile(shrunk) as zf:
        assert "model/model.pt" not in zf.namelist() and "LINKS" in zf.namelist()
        assert zf.getinfo("LINKS").compress_type == 0
    assert zip_manifest(shrunk) == zip_manifest(original)
    fetcher = LinkFetcher(tmp_path / "cache")
    push(shrunk, tmp_path / "layout", links_fetcher=fetcher)
    store = LayoutStore(tmp_path / "layout")
    export_carton(store, store.resolve("v1"), tmp_path / "out.carton")
    assert zip_manifest(tmp_path / "out.carton") == zip_manifest(original)
    assert fetcher.downloads == 1 and link_server.gets == ["/model.pt"]


PACK_WITH_SYMLINKS = """
import asyncio, os, shutil, sys
work, out, shim = sys.argv[1:4]
runners = os.path.join(work, "runners", "shim")
os.makedirs(runners)
with open(os.path.join(runners, "runner.toml"), "w") as f:  # the offline shim of the reference script
    f.write('version = 1\\n\\n[[runner]]\\nrunner_name = "python"\\nframework_version = "3.11.7"\\n'
            'runner_compat_version = 1\\nrunner_interface_version = 1\\n'
            'runner_release_date = "2023-12-27T00:00:00Z"\\n'
            f'runner_path = "{shim}"\\nplatform = "x86_64-unknown-linux-gnu"\\n')
os.environ.update(CARTON_RUNNER_DIR=os.path.join(work, "runners"), CARTON_RUNNER_DATA_DIR=os.path.join(work, "d"),
                  CARTON_CACHE_DIR=os.path.join(work, "cache"), CARTON_SHIM_COMPLETE="1")
import cartonml
async def main():
    code = os.path.join(work, "code")
    os.makedirs(os.path.join(code, "weights"))
    with open(os.path.join(code, "weights", "real.bin"), "wb") as f:
        f.write(bytes(range(256)) * 40)
    with open(os.path.join(code, "entry.py"), "w") as f:
        f.write("def get_model():\\n    pass\\n")
    os.symlink("weights/real.bin", os.path.join(code, "alias.bin"))
    os.symlink("../alias.bin", os.path.join(code, "weights", "again.bin"))
    packed = await cartonml.pack(code, runner_name="python", required_framework_version="=3.11", model_name="sym")
    shutil.move(packed, out)  # (the library's temporary file: not left in /tmp)
    print("ok", flush=True)
    os._exit(0)
asyncio.run(main())
"""


def test_real_library_symlinks_round_trip(tmp_path: Path) -> None:
    """A carton the Carton library packs from a folder with symlinks (offline, through the shim
    runner of the reference script): its zip symlinks round-trip and the library reads the export."""
    carton = tmp_path / "sym.carton"
    proc = subprocess.run([sys.executable, "-c", PACK_WITH_SYMLINKS, str(tmp_path / "w"), str(carton),
                           str(REFERENCE / "shim_runner.py")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with zipfile.ZipFile(carton) as zf:
        modes = {i.filename: i.external_attr >> 16 for i in zf.infolist()}
    assert modes["model/alias.bin"] == modes["model/weights/again.bin"] == 0o120777
    links = {"model/alias.bin": "weights/real.bin", "model/weights/again.bin": "../alias.bin"}
    assert {f.path: f.link_target for f in read_carton(carton).files if f.link_target} == links
    push(carton, tmp_path / "layout")
    store = LayoutStore(tmp_path / "layout")
    out = tmp_path / "out.carton"
    export_carton(store, store.resolve("v1"), out)
    assert zip_manifest(out) == zip_manifest(carton)
    with zipfile.ZipFile(out) as zf:
        assert {i.filename: i.external_attr >> 16 for i in zf.infolist()} == modes
        assert zf.read("model/alias.bin") == b"weights/real.bin"
    assert carton_info(out, env_dir=tmp_path) == carton_info(carton, env_dir=tmp_path)


class EntryBytes:
    @staticmethod
    def read(archive: Path, name: str) -> bytes:
        from ocibridge.kinds.carton.zipread import EntryReader, scan_entries

        entry = next(e for e in scan_entries(archive) if e.path == name)
        with EntryReader(archive, entry) as r:
            return r.read()


# -- registry ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("carton", REFERENCE_CARTONS, ids=lambda p: p.name)
def test_reference_round_trip_registry(carton: Path, tmp_path: Path, registry, unique_repo) -> None:
    from ocibridge.places.locate import open_target as open_store_target

    ref = f"{registry.host}/{unique_repo}:v1"
    target = open_store_target(ref, for_write=True)
    art = build(read_carton(carton))
    first = copy(art, ARTIFACT_TAG, target.store, "v1")
    second = copy(build(read_carton(carton)), ARTIFACT_TAG, target.store, "v2")
    assert first.root.digest == second.root.digest and second.blobs_copied == 0
    out = tmp_path / "out.carton"
    export_carton(target.store, target.store.resolve("v1"), out)
    assert zip_manifest(out) == zip_manifest(carton)
    assert sha(zip_manifest(out)) == MODEL_HASHES[carton.name]
    assert carton_info(out, env_dir=tmp_path) == carton_info(carton, env_dir=tmp_path)  # the library reads it


@pytest.mark.parametrize("head_allowed", [True, False])
def test_links_not_downloaded_when_registry_has_blob(head_allowed: bool, tmp_path: Path, link_server: LinkServer,
                                                     registry, unique_repo, monkeypatch: pytest.MonkeyPatch) -> None:
    """``ocibridge push`` of a LINKS carton to a registry repository that already holds the file's
    blob: same artifact, and the file is never downloaded (HEAD, or a ranged GET, tells its size)."""
    from ocibridge.api import model_ops as api

    monkeypatch.setenv("OCIBRIDGE_CACHE", str(tmp_path / "xdg"))
    link_server.head_allowed = head_allowed
    weights = noise(2 << 20, 13)
    url = link_server.add("w", weights, "zstd")
    make_carton(tmp_path / "full.carton", {"model/w.bin": weights})
    make_carton(tmp_path / "l.carton", {"model/w.bin": weights}, omit=("model/w.bin",), links={sha(weights): [url]})
    first = api.push(str(tmp_path / "full.carton"), f"{registry.host}/{unique_repo}:full")
    second = api.push(str(tmp_path / "l.carton"), f"{registry.host}/{unique_repo}:links")
    assert second.descriptor.digest == first.descriptor.digest and second.stats.blobs_copied == 0
    assert link_server.gets == [] and link_server.probes == ([] if head_allowed else ["/w"])
    assert not (tmp_path / "xdg" / "carton-links").exists()


def test_not_a_zip(tmp_path: Path) -> None:
    (tmp_path / "x.carton").write_bytes(b"hello")
    with pytest.raises(CartonError, match="not a readable zip"):
        read_carton(tmp_path / "x.carton")


def test_a_carton_entry_is_hashed_once_on_its_way_into_a_layout(tmp_path, monkeypatch) -> None:
    """The entry reader checks each byte against MANIFEST; the layer stream and the layout take
    that check as theirs instead of hashing again (a regression doubled carton → layout time)."""
    weights = noise(9 << 20, seed=7)  # past BACKGROUND_HASH_BYTES: hashed on a thread of its own
    carton = tmp_path / "m.carton"
    make_carton(carton, {"model/weights.bin": weights})
    hashed = [0]
    real_new, real_sha256 = hashlib.new, hashlib.sha256

    class Counting:
        def __init__(self, inner) -> None:
            self.inner = inner

        def update(self, data) -> None:
            hashed[0] += len(data)
            self.inner.update(data)

        def __getattr__(self, name):
            return getattr(self.inner, name)

    monkeypatch.setattr(hashlib, "new", lambda name, data=b"", **kw: Counting(real_new(name, data, **kw)))
    monkeypatch.setattr(hashlib, "sha256", lambda data=b"", **kw: Counting(real_sha256(data, **kw)))
    push(carton, tmp_path / "layout", eager_verify_bytes=0)  # as large entries are: checked while copied
    assert len(weights) <= hashed[0] < 1.5 * len(weights)
    store = LayoutStore(tmp_path / "layout")
    manifest = json.loads(store.fetch_bytes(store.resolve("v1")))
    assert any(layer["digest"] == "sha256:" + sha(weights) for layer in manifest["layers"])
