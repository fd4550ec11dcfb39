"""``pull --with-signatures`` checks the pulled files against the OMS statement without reading
them a second time where the pull proved each file's SHA-256 as it landed: a raw layer's file
was checked against the layer digest (its SHA-256), a tar entry is hashed as it is unpacked
(signing/omstravel.py ``write_beside``, model/extract.py ``ExtractResult.digests``). model.sig
is the signature's bytes as before; a tampered blob is still refused, and a file kept as it was
(``-k``) is still read, and refused when it differs.

The re-read is seen through the one function a whole-file SHA-256 check of a directory reads a
file with (signing/omsdir.py ``digest_file``)."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import model_signing
import pytest
from support.faultproxy import corrupt_at
from support.fixtures import new_repo

from ocibridge.cli import main
from ocibridge.signing import omsdir
from ocibridge.signing.attach import find_signatures
from ocibridge.signing.oms import OMS_PREDICATE_TYPE
from ocibridge.stores.layout import LayoutStore
from ocibridge.stores.registry import open_repository
from tests.modelgen import make_model
from tests.signing_keys import key_pair

WEIGHT = "model.safetensors"


@pytest.fixture(scope="module")
def signed(registry, tmp_path_factory):
    """One model, pushed (raw layers) to a layout and to a registry, OMS-signed by one key in
    each: {"layout"|"registry": reference}, the model directory, the public key, the layout's root."""
    tmp = tmp_path_factory.mktemp("readsonce")
    model = make_model(tmp / "model")
    private, public = key_pair(tmp / "k")
    refs = {"layout": f"oci:{tmp}/store:v1", "registry": f"{registry.host}/{new_repo()}:v1"}
    for ref in refs.values():
        assert main(["push", str(model), ref, "-q"]) == 0
        assert main(["sign", ref, "--key", str(private), "--form", "oms"]) == 0
    return refs, model, public, tmp / "store"


def _rereads(monkeypatch, out: Path) -> list[str]:
    """The files under ``out`` that model.sig's check reads from now on (a whole-file SHA-256)."""
    read: list[str] = []
    whole = omsdir.digest_file
    monkeypatch.setattr(omsdir, "digest_file",
                        lambda path: (read.append(Path(path).relative_to(out).as_posix()), whole(path))[1])
    return read


def _sha256_files(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _oms_bundle(ref: str, layout: Path, registry_host: str) -> bytes:
    """The OMS referrer's bytes, as the store holds them: what model.sig is, byte for byte."""
    if ref.startswith("oci:"):
        store = LayoutStore(str(layout))
        bundles = find_signatures(store, store.resolve("v1")).bundles
    else:
        repo = ref.removeprefix(registry_host + "/").removesuffix(":v1")
        with open_repository(host=registry_host, repository=repo) as store:
            bundles = find_signatures(store, store.resolve("v1")).bundles
    (data,) = [data for _, data in bundles if _statement(data)["predicateType"] == OMS_PREDICATE_TYPE]
    return data


def _statement(bundle: bytes) -> dict:
    return json.loads(base64.b64decode(json.loads(bundle)["dsseEnvelope"]["payload"]))


def _library_verify(directory: Path, public: Path) -> None:
    model_signing.verifying.Config().use_elliptic_key_verifier(public_key=public).verify(
        directory, directory / "model.sig")


def _one_line_refusal(capsys, code: int) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


@pytest.mark.parametrize("source", ["layout", "registry"])
@pytest.mark.parametrize("key", [False, True], ids=["no-key", "verify-key"])
def test_a_raw_layer_model_is_not_read_again_and_model_sig_is_the_signature(
        signed, registry, tmp_path, monkeypatch, capsys, source, key):
    refs, model, public, layout = signed
    out = tmp_path / "out"
    read = _rereads(monkeypatch, out)
    argv = ["pull", refs[source], str(out), "-q", "--with-signatures"]
    assert main(argv + (["--verify-key", str(public)] if key else [])) == 0, capsys.readouterr().err
    assert read == []  # every file came from a raw layer checked by its digest: none read again
    written = (out / "model.sig").read_bytes()
    assert written == _oms_bundle(refs[source], layout, registry.host)
    resources = {r["name"]: r["digest"] for r in _statement(written)["predicate"]["resources"]}
    assert resources == _sha256_files(model)  # what the model's files hash to, computed here
    _library_verify(out, public)


@pytest.mark.parametrize("source", ["layout", "registry"])
def test_a_tampered_weight_blob_is_still_refused_and_nothing_is_written(
        signed, registry, fault_proxy, tmp_path, capsys, source):
    refs, model, _, layout = signed
    data = (model / WEIGHT).read_bytes()
    layer = "sha256:" + hashlib.sha256(data).hexdigest()
    if source == "layout":  # a copy of the layout with the weight's blob changed in place, same size
        import shutil

        store = tmp_path / "store"
        shutil.copytree(layout, store)
        blob = store / "blobs" / "sha256" / layer.removeprefix("sha256:")
        blob.chmod(0o644)
        blob.write_bytes(bytes([data[0] ^ 1]) + data[1:])
        ref = f"oci:{store}:v1"
    else:  # the registry sends another byte in the weight's blob, every time
        fault_proxy.add("GET", f"/blobs/{layer}", corrupt_at(1000), times=None)
        ref = refs["registry"].replace(registry.host, fault_proxy.host)
    out = tmp_path / "out"
    capsys.readouterr()
    line = _one_line_refusal(capsys, main(["pull", ref, str(out), "-q", "--with-signatures"]))
    assert layer in line, line
    assert not (out / WEIGHT).exists() and not (out / "model.sig").exists()


def test_tar_entries_are_hashed_as_they_are_unpacked(tmp_path, monkeypatch, capsys):
    """Files packed in tar layers (grouped, one gzip) are hashed while written into place."""
    model = make_model(tmp_path / "m")
    ref = f"oci:{tmp_path}/store:v1"
    assert main(["push", str(model), ref, "-q", "--group", "code", "--group", "doc",
                 "--layer", "code=tar+gzip"]) == 0
    store = LayoutStore(str(tmp_path / "store"))
    layers = json.loads(store.fetch_bytes(store.resolve("v1")))["layers"]
    assert sum("tar" in layer["mediaType"] for layer in layers) >= 1
    private, public = key_pair(tmp_path / "k")
    assert main(["sign", ref, "--key", str(private), "--form", "oms"]) == 0
    out = tmp_path / "out"
    read = _rereads(monkeypatch, out)
    assert main(["pull", ref, str(out), "-q", "--with-signatures", "--verify-key", str(public)]) == 0
    assert read == []
    _library_verify(out, public)


def test_only_a_file_kept_as_it_was_is_read_and_a_differing_one_is_refused(signed, tmp_path, monkeypatch, capsys):
    refs, _, _, _ = signed
    out = tmp_path / "out"
    assert main(["pull", refs["layout"], str(out), "-q"]) == 0
    (out / "weights" / "part-2.bin").write_bytes(b"mine")
    read = _rereads(monkeypatch, out)
    capsys.readouterr()
    line = _one_line_refusal(capsys, main(["pull", refs["layout"], str(out), "-q", "--with-signatures", "-k"]))
    assert "content differs: weights/part-2.bin" in line, line
    assert read == ["weights/part-2.bin"]  # the one file the pull did not put there
    assert not (out / "model.sig").exists()


def test_a_landed_digest_is_compared_with_the_statement_not_taken_on_its_word(signed, tmp_path, monkeypatch):
    """The rule itself: a digest the pull reports for a file stands for its hash, so one that
    differs from the signed one is refused as a changed file would be."""
    from ocibridge.errors import SignatureError
    from ocibridge.signing.omstravel import choose_oms_signature, write_beside

    refs, model, _, layout = signed
    out = tmp_path / "out"
    assert main(["pull", refs["layout"], str(out), "-q"]) == 0
    store = LayoutStore(str(layout))
    oms = choose_oms_signature(store, store.resolve("v1"), None)
    files = sorted(_sha256_files(model))
    read = _rereads(monkeypatch, out)
    landed = {rel: "sha256:" + digest for rel, digest in _sha256_files(model).items()}
    with pytest.raises(SignatureError, match=f"content differs: {WEIGHT}"):
        write_beside(oms, out, files, {**landed, WEIGHT: "sha256:" + "0" * 64})
    assert read == [] and not (out / "model.sig").exists()
    write_beside(oms, out, files, {rel: d for rel, d in landed.items() if rel != "README.md"})
    assert read == ["README.md"] and (out / "model.sig").read_bytes() == oms.bundle
