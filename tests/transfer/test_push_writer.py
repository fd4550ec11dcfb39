"""One push engine: stores are written by the copy (transfer/), or by the small writer over it;
attach, tag, signatures and chunk tables push nothing by hand."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from support import drop_request, lose_response, status

from ocibridge.api import store_ops
from ocibridge.errors import DigestMismatch, NotFound, UsageError
from ocibridge.oci.mediatypes import OCI_EMPTY, OCI_MANIFEST
from ocibridge.oci.models import Descriptor, Manifest, parse_manifest_bytes
from ocibridge.oci.reference import parse_registry_reference
from ocibridge.signing.attach import SignatureCompanions, attach_classic
from ocibridge.signing.classic import signature_layer, signature_tag
from ocibridge.stores.layout import LayoutStore
from ocibridge.stores.registry import open_repository
from ocibridge.transfer.copy import CopyHooks, copy
from ocibridge.transfer.writer import Blob, write_artifact

PACKAGE = Path(__file__).resolve().parents[2] / "ocibridge"
#: The store writes; only stores (their own methods, or a wrapper forwarding them) and the
#: transfer package call them.
WRITES = {"push_blob", "push_manifest", "tag"}
ALLOWED = ("stores", "transfer")


def _hand_pushes(source: str, where: str) -> list[str]:
    """Calls of a store write in ``source`` that are not inside a class defining store writes
    (a store implementing them, or a wrapper passing them on). A call on an imported name is a
    module's function (``store_ops.tag``), not a store's write."""
    found: list[str] = []
    tree = ast.parse(source)
    imported = {alias.asname or alias.name for node in ast.walk(tree)
                if isinstance(node, ast.Import | ast.ImportFrom) for alias in node.names}

    def visit(node: ast.AST, in_store: bool) -> None:
        if isinstance(node, ast.ClassDef):
            defined = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
            in_store = bool(defined & {"push_blob", "push_manifest"})
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in WRITES and not in_store
                and not (isinstance(node.func.value, ast.Name) and node.func.value.id in imported)):
            found.append(f"{where}:{node.lineno} .{node.func.attr}()")
        for child in ast.iter_child_nodes(node):
            visit(child, in_store)

    visit(tree, False)
    return found


def test_no_module_outside_stores_and_transfer_pushes_by_hand():
    outside = [hit for path in sorted(PACKAGE.rglob("*.py"))
               if path.relative_to(PACKAGE).parts[0] not in ALLOWED
               for hit in _hand_pushes(path.read_text(), str(path.relative_to(PACKAGE)))]
    assert not outside, f"write through ocibridge.transfer.writer (or the copy), not by hand: {outside}"


def test_the_scan_sees_a_hand_push_and_spares_a_store():
    assert _hand_pushes((PACKAGE / "transfer" / "copy.py").read_text(), "copy.py"), "the scan went blind"
    assert _hand_pushes("def f(s):\n    s.push_blob(d, r)\n", "x") == ["x:2 .push_blob()"]
    wrapper = "class W:\n    def push_blob(self, d, r):\n        self.inner.push_blob(d, r)\n"
    assert _hand_pushes(wrapper, "x") == []
    assert _hand_pushes("def f(s):\n    s.tag(d, 't')\n", "x") == ["x:2 .tag()"]
    assert _hand_pushes("from a import store_ops\nstore_ops.tag(r, ['t'])\n", "x") == []


def _artifact(blobs: list[Blob], subject: Descriptor | None = None) -> tuple[Descriptor, bytes]:
    config = Descriptor.for_bytes(OCI_EMPTY, b"{}")
    body = Manifest(mediaType=OCI_MANIFEST, config=config, layers=[b.desc for b in blobs],
                    subject=subject).to_json_bytes()
    return Descriptor.for_bytes(OCI_MANIFEST, body), body


def test_the_writer_sends_what_is_missing_once_and_the_manifest_last(tmp_path, fault_proxy, unique_repo):
    path = tmp_path / "card.md"
    path.write_bytes(b"# card\n" * 1000)
    blobs = [Blob.of_bytes(Descriptor.for_bytes(OCI_EMPTY, b"{}"), b"{}"),
             Blob.of_bytes(Descriptor.for_bytes("text/plain", b"notes"), b"notes"),
             Blob.of_file(Descriptor.for_bytes("text/markdown", path.read_bytes()), path)]
    desc, body = _artifact(blobs[1:])
    store = open_repository(parse_registry_reference(f"{fault_proxy.host}/{unique_repo}:x"))

    first = write_artifact(store, desc, body, blobs, ["v1", "stable"])
    assert (first.blobs_copied, first.bytes_copied, first.manifests_copied) == (3, 2 + 5 + 7000, 1)
    writes = [(r.method, r.path) for r in fault_proxy.requests if r.method in ("POST", "PUT", "PATCH")]
    assert "/manifests/" in writes[-2][1] and "/manifests/" in writes[-1][1]
    assert not any("/manifests/" in p for _, p in writes[:-2]), "a manifest went out before its blobs"
    assert store.resolve("v1").digest == store.resolve("stable").digest == desc.digest

    fault_proxy.clear()
    again = write_artifact(store, desc, body, blobs)
    assert (again.blobs_copied, again.bytes_copied, again.manifests_copied) == (0, 0, 0)
    assert not [r for r in fault_proxy.requests if r.method != "HEAD"], "a second write sent something"


def _blob_put(desc: Descriptor) -> str:
    """The final PUT of ``desc``'s upload session (``?digest=`` names it): the rule of a test
    must hit that blob, not whichever upload comes first. (Matching any upload, the cut fell on
    the 2-byte config's PUT two runs in three, which the proxy forwards whole before cutting:
    under load the registry committed it after the client's status GET, and the client sent
    the config again into the session that commit had closed: BLOB_UPLOAD_UNKNOWN, issue 42.)"""
    return r"/blobs/uploads/.+digest=sha256(:|%3A)" + desc.digest.split(":")[1]


def _one_mib() -> tuple[Blob, Blob, Descriptor, bytes, bytes]:
    data = bytes(range(256)) * 4096  # 1 MiB
    blob = Blob.of_bytes(Descriptor.for_bytes("application/octet-stream", data), data)
    desc, body = _artifact([blob])
    config = Blob.of_bytes(Descriptor.for_bytes(OCI_EMPTY, b"{}"), b"{}")
    return blob, config, desc, body, data


def test_an_upload_cut_off_is_sent_again_from_a_fresh_read(tmp_path, fault_proxy, unique_repo):
    blob, config, desc, body, data = _one_mib()
    rule = fault_proxy.add("PUT", _blob_put(blob.desc), drop_request(after=100_000, forward=False))
    store = open_repository(parse_registry_reference(f"{fault_proxy.host}/{unique_repo}:x"))
    stats = write_artifact(store, desc, body, [config, blob], ["v1"])
    assert stats.manifests_copied == 1 and store.fetch_bytes(blob.desc) == data
    assert rule.exhausted, "the fault never fired"
    puts = fault_proxy.requests_matching("PUT", _blob_put(blob.desc))
    assert [r.action for r in puts] == ["drop_request", None] and puts[-1].request_bytes == len(data)


def test_a_session_the_registry_dropped_is_not_sent_into_again(tmp_path, fault_proxy, unique_repo):
    """The registry forgets the session between the status GET and the PUT (it committed it from
    a request whose answer was lost, or it expired): a new session, not a failed push."""
    blob, config, desc, body, data = _one_mib()
    fault_proxy.add("PUT", _blob_put(blob.desc), drop_request(after=100_000, forward=False))
    unknown = json.dumps({"errors": [{"code": "BLOB_UPLOAD_UNKNOWN", "message": "blob upload unknown to registry"}]})
    fault_proxy.add("PUT", _blob_put(blob.desc), status(404, body=unknown.encode(),
                                                        headers={"Content-Type": "application/json"}))
    store = open_repository(parse_registry_reference(f"{fault_proxy.host}/{unique_repo}:x"))
    stats = write_artifact(store, desc, body, [config, blob], ["v1"])
    assert stats.manifests_copied == 1 and store.fetch_bytes(blob.desc) == data
    puts = fault_proxy.requests_matching("PUT", _blob_put(blob.desc))
    assert [r.action for r in puts] == ["drop_request", "status", None]
    assert len({r.path.split("?")[0] for r in puts}) == 2  # the last one in a session of its own


def test_a_put_whose_answer_was_lost_is_not_sent_again(tmp_path, fault_proxy, unique_repo):
    """The registry committed the PUT; its answer was lost: the session is gone and the blob is
    there (one HEAD), so the megabyte is not sent a second time."""
    blob, config, desc, body, data = _one_mib()
    fault_proxy.add("PUT", _blob_put(blob.desc), lose_response())
    store = open_repository(parse_registry_reference(f"{fault_proxy.host}/{unique_repo}:x"))
    stats = write_artifact(store, desc, body, [config, blob], ["v1"])
    assert stats.manifests_copied == 1 and store.fetch_bytes(blob.desc) == data
    assert len(fault_proxy.requests_matching("PUT", _blob_put(blob.desc))) == 1
    assert fault_proxy.requests_matching("HEAD", "/blobs/" + blob.desc.digest)


def test_a_blob_that_is_not_what_it_claims_leaves_no_manifest(tmp_path):
    layout = LayoutStore(tmp_path / "layout", create=True)
    liar = Blob.of_bytes(Descriptor.for_bytes("text/plain", b"promised"), b"delivered")
    config = Blob.of_bytes(Descriptor.for_bytes(OCI_EMPTY, b"{}"), b"{}")
    desc, body = _artifact([liar])
    with pytest.raises(DigestMismatch):
        write_artifact(layout, desc, body, [config, liar], ["v1"])
    assert not layout.exists(desc) and layout.tags() == []
    with pytest.raises(NotFound):
        layout.resolve("v1")


def test_attach_with_a_missing_file_writes_nothing(tmp_path):
    layout = LayoutStore(tmp_path / "layout", create=True)
    config = Blob.of_bytes(Descriptor.for_bytes(OCI_EMPTY, b"{}"), b"{}")
    desc, body = _artifact([])
    write_artifact(layout, desc, body, [config], ["v1"])
    before = sorted(p.name for p in (tmp_path / "layout" / "blobs" / "sha256").iterdir())
    index = json.loads((tmp_path / "layout" / "index.json").read_text())
    present = tmp_path / "present.txt"
    present.write_text("here\n")
    with pytest.raises(UsageError, match="absent.txt: no such file"):
        store_ops.attach(f"oci:{tmp_path / 'layout'}:v1", [str(present), str(tmp_path / "absent.txt")],
                         artifact_type="application/vnd.example")
    assert sorted(p.name for p in (tmp_path / "layout" / "blobs" / "sha256").iterdir()) == before
    assert json.loads((tmp_path / "layout" / "index.json").read_text()) == index


def test_a_merged_signature_is_counted_in_the_copy_that_carried_it(tmp_path):
    """Carrying a ``.sig`` tag into a store that holds other signatures writes a merged manifest
    and its config: the copy's counts (``bytesCopied`` of a push or copy) include them."""
    src = LayoutStore(tmp_path / "src", create=True)
    dst = LayoutStore(tmp_path / "dst", create=True)
    weights = Blob.of_bytes(Descriptor.for_bytes("application/octet-stream", b"weights"), b"weights")
    config = Blob.of_bytes(Descriptor.for_bytes(OCI_EMPTY, b"{}"), b"{}")
    root, body = _artifact([weights])
    for store in (src, dst):
        write_artifact(store, root, body, [config, weights], ["v1"])
    attach_classic(src, root, signature_layer(b'{"signed": "here"}', "c2lnLWE="))
    attach_classic(dst, root, signature_layer(b'{"signed": "there"}', "c2lnLWI="))
    tag = signature_tag(root.digest)
    carried = parse_manifest_bytes(src.fetch_bytes(src.resolve(tag)))

    stats = copy(src, "v1", dst, "v1", referrers=True, hooks=CopyHooks(companions=SignatureCompanions()))

    merged = parse_manifest_bytes(dst.fetch_bytes(dst.resolve(tag)))
    assert isinstance(merged, Manifest) and isinstance(carried, Manifest) and len(merged.layers) == 2
    assert stats.signatures == [dst.resolve(tag).digest]
    # the carried .sig manifest (its payload and config) and the merged one (its new config)
    assert stats.manifests_copied == 2
    assert stats.bytes_copied == carried.layers[0].size + carried.config.size + merged.config.size
