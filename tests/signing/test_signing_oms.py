"""OpenSSF model signing (OMS), checked both ways against the real ``model_signing`` library
(pinned in the test extras): it verifies what ocibridge signs and pulls, ocibridge verifies
and carries what it signs; tampering is refused by both; signing a 4 GiB model reads no
weight byte."""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import time
from pathlib import Path

import model_signing
import pytest

from ocibridge.cli import main
from ocibridge.oci.mediatypes import OCI_MANIFEST
from ocibridge.oci.models import Descriptor, Manifest
from ocibridge.signing import keys
from ocibridge.signing.attach import attach_bundle, find_signatures
from ocibridge.signing.oms import OMS_PREDICATE_TYPE, oms_statement
from ocibridge.signing.sigstorebundle import make_bundle
from ocibridge.stores.layout import LayoutStore
from tests.modelgen import make_model
from tests.signing_keys import key_pair

#: sha256 of 4 GiB of zero bytes (the sparse weight file's content).
ZERO_4G = "sha256:8479e43911dc45e89f934fe48d01297e16f51d17aa561d4d1c216b1ae0fcddca"


def library_verify(directory: Path, public: Path, signature: Path | None = None) -> None:
    """model_signing's own verification (raises on any mismatch)."""
    config = model_signing.verifying.Config().use_elliptic_key_verifier(public_key=public)
    config.verify(directory, signature or directory / "model.sig")


def library_sign(directory: Path, private: Path) -> Path:
    """model_signing's own key signature of ``directory``, written where its CLI writes it."""
    signature = directory / "model.sig"
    hashing = model_signing.hashing.Config().set_ignored_paths(paths=["model.sig"])
    model_signing.signing.Config().use_elliptic_key_signer(private_key=private).set_hashing_config(
        hashing).sign(directory, signature)
    return signature


@pytest.fixture
def signed(tmp_path, capsys):
    """A model pushed to a layout and OMS-signed: (reference, public key, private key)."""
    model = make_model(tmp_path / "m")
    ref = f"oci:{tmp_path}/store:v1"
    assert main(["push", str(model), ref, "-q"]) == 0
    private, public = key_pair(tmp_path / "k")
    assert main(["sign", ref, "--key", str(private), "--form", "oms"]) == 0
    capsys.readouterr()
    return ref, public, private


def _pull(ref: str, out: Path, public: Path, *extra: str) -> int:
    return main(["pull", ref, str(out), "-q", "--verify-key", str(public), "--with-signatures", *extra])


def _files_verify(ref: str, public: Path, out: Path) -> int:
    """An OMS signature covers the model's files, not its manifest (signing/coverage.py): a pull
    into a directory is what it verifies."""
    return main(["pull", ref, str(out), "-q", "--verify-key", str(public)])


def _manifest_refused(ref: str, public: Path, capsys) -> None:
    """``verify --key`` asks for a signature of the manifest: an OMS signature is not one."""
    capsys.readouterr()
    assert "does not cover the manifest" in _refused(capsys, main(["verify", ref, "--key", str(public)]))


def _refused(capsys, code: int) -> str:
    captured = capsys.readouterr()
    assert code != 0
    assert "Traceback" not in captured.err
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    return lines[0]


# -- ocibridge signs, the library verifies ------------------------------------------------------
def test_library_verifies_a_pulled_directory(signed, tmp_path, capsys):
    ref, public, _ = signed
    out = tmp_path / "out"
    assert _pull(ref, out, public) == 0
    assert (out / "model.sig").is_file()
    library_verify(out, public)
    assert main(["verify-dir", str(out), "--signature", str(out / "model.sig"), "--key", str(public)]) == 0
    assert "7 file(s) signed" in capsys.readouterr().out


def test_statement_is_the_library_format(signed, tmp_path):
    ref, public, _ = signed
    out = tmp_path / "out"
    assert _pull(ref, out, public) == 0
    bundle = json.loads((out / "model.sig").read_text())
    statement = json.loads(base64.b64decode(bundle["dsseEnvelope"]["payload"]))
    assert statement["predicateType"] == OMS_PREDICATE_TYPE
    names = [r["name"] for r in statement["predicate"]["resources"]]
    assert names == ["README.md", "config.json", "data.csv", "model.safetensors", "scripts/run.sh",
                     "tokenizer.json", "weights/part-2.bin"]
    # the library's own hashing of the same directory gives the same file list and digests
    hashed = model_signing.hashing.Config().set_ignored_paths(paths=["model.sig"]).hash(out)
    assert {d.identifier: d.digest.digest_hex for d in hashed.resource_descriptors()} == {
        r["name"]: r["digest"] for r in statement["predicate"]["resources"]}
    assert bundle["verificationMaterial"]["publicKey"]["hint"] == keys.pem_hint(keys.load_public_key(public))


def _tamper(out: Path, how: str) -> None:
    if how == "byte":
        data = bytearray((out / "weights" / "part-2.bin").read_bytes())
        data[1000] ^= 1
        (out / "weights" / "part-2.bin").write_bytes(bytes(data))
    elif how == "rename":
        (out / "data.csv").rename(out / "data2.csv")
    elif how == "extra":
        (out / "extra.bin").write_bytes(b"x")
    elif how == "missing":
        (out / "README.md").unlink()
    elif how == "statement":
        bundle = json.loads((out / "model.sig").read_text())
        payload = base64.b64decode(bundle["dsseEnvelope"]["payload"]).replace(b'"data.csv"', b'"data.CSV"')
        bundle["dsseEnvelope"]["payload"] = base64.b64encode(payload).decode()
        (out / "model.sig").write_text(json.dumps(bundle))
        (out / "data.csv").rename(out / "data.CSV")


@pytest.mark.parametrize("how", ["byte", "rename", "extra", "missing", "statement"])
def test_tampering_is_refused_by_both(signed, tmp_path, capsys, how):
    ref, public, _ = signed
    out = tmp_path / "out"
    assert _pull(ref, out, public) == 0
    library_verify(out, public)  # passes before
    _tamper(out, how)
    with pytest.raises(Exception) as info:  # noqa: B017 - the library raises ValueError or InvalidSignature
        library_verify(out, public)
    assert type(info.value).__name__ in ("ValueError", "InvalidSignature")
    code = main(["verify-dir", str(out), "--signature", str(out / "model.sig"), "--key", str(public)])
    line = _refused(capsys, code)
    expected = {"byte": "content differs: weights/part-2.bin", "rename": "not signed: data2.csv",
                "extra": "not signed: extra.bin", "missing": "missing: README.md",
                "statement": "DSSE signature does not verify"}[how]
    assert expected in line


def test_another_key_is_refused(signed, tmp_path, capsys):
    ref, public, _ = signed
    out = tmp_path / "out"
    assert _pull(ref, out, public) == 0
    _, other = key_pair(tmp_path / "other")
    with pytest.raises(ValueError):
        library_verify(out, other)
    code = main(["verify-dir", str(out), "--signature", str(out / "model.sig"), "--key", str(other)])
    assert "does not verify" in _refused(capsys, code)


# -- the library signs, ocibridge verifies and carries -------------------------------------------
def test_library_signature_verifies_pushes_and_travels(tmp_path, capsys):
    model = make_model(tmp_path / "m")
    private, public = key_pair(tmp_path / "k")
    signature = library_sign(model, private)
    assert main(["verify-dir", str(model), "--signature", str(signature), "--key", str(public)]) == 0
    capsys.readouterr()
    ref = f"oci:{tmp_path}/store:v1"
    assert main(["push", str(model), ref, "-q", "--signature", str(signature), "--json"]) == 0
    pushed = json.loads(capsys.readouterr().out)
    assert "signature" in pushed
    _manifest_refused(ref, public, capsys)
    # model.sig was kept out of the model's files; a pull brings it back beside them
    out = tmp_path / "out"
    assert _pull(ref, out, public) == 0
    assert (out / "model.sig").read_bytes() == signature.read_bytes()
    library_verify(out, public)


@pytest.mark.parametrize("how", ["byte", "rename", "extra", "statement"])
def test_library_signature_of_other_files_is_refused_at_push(tmp_path, capsys, how):
    model = make_model(tmp_path / "m")
    private, _ = key_pair(tmp_path / "k")
    library_sign(model, private)
    if how == "statement":
        _tamper(model, how)  # renamed consistently with the statement: only the signature is wrong
        (model / "data.CSV").rename(model / "data.csv")
    else:
        _tamper(model, how)
    ref = f"oci:{tmp_path}/store:v1"
    code = main(["push", str(model), ref, "-q", "--signature", str(model / "model.sig")])
    line = _refused(capsys, code)
    assert "refused" in line
    assert not (tmp_path / "store").exists()  # checked before anything was sent


# -- verify and --verify-key: what counts as an OMS signature -------------------------------------
def test_oms_alone_satisfies_a_pull_not_verify_or_copy(signed, tmp_path, capsys):
    """An OMS signature lists files: it verifies a pull into a directory, never the manifest
    that ``verify`` checks and ``copy`` carries (issue 41)."""
    ref, public, _ = signed
    _manifest_refused(ref, public, capsys)
    code = main(["copy", ref, f"oci:{tmp_path}/copy:v1", "--verify-key", str(public), "-q"])
    assert "does not cover the manifest" in _refused(capsys, code)
    assert not (tmp_path / "copy").exists()
    assert _files_verify(ref, public, tmp_path / "out") == 0


def test_oms_signature_of_other_files_does_not_count(tmp_path, capsys):
    """A valid OMS signature by the right key, attached to a manifest whose files it does not
    list, is no signature of that manifest."""
    model = make_model(tmp_path / "m")
    ref = f"oci:{tmp_path}/store:v1"
    assert main(["push", str(model), ref, "-q"]) == 0
    private, public = key_pair(tmp_path / "k")
    store = LayoutStore(str(tmp_path / "store"))
    subject = store.resolve("v1")
    key = keys.load_private_key(private)
    other = oms_statement("m", {"model.safetensors": "00" * 32})
    attach_bundle(store, subject, make_bundle(key, other, hint=keys.pem_hint(key)), OMS_PREDICATE_TYPE)
    code = main(["verify", ref, "--key", str(public)])
    line = _refused(capsys, code)
    assert "not what the OMS signature signs" in line
    code = main(["pull", ref, str(tmp_path / "out"), "--verify-key", str(public), "-q"])
    _refused(capsys, code)
    assert not (tmp_path / "out").exists()


def test_an_unlistable_model_fails_only_its_oms_signature(tmp_path, capsys):
    """A manifest whose files cannot be listed safely (a path escaping the model) refuses OMS
    signing with one line; at verify, an OMS referrer of it is one reason among others, and
    the cosign signatures still verify."""
    model = make_model(tmp_path / "m")
    assert main(["push", str(model), f"oci:{tmp_path}/store:v1", "-q"]) == 0
    store = LayoutStore(str(tmp_path / "store"))
    doc = json.loads(store.fetch_bytes(store.resolve("v1")))
    doc["layers"][0]["annotations"]["org.cnai.model.filepath"] = "../evil"
    data = json.dumps(doc).encode()
    store.push_manifest(Descriptor.for_bytes(OCI_MANIFEST, data), data, "evil")
    ref = f"oci:{tmp_path}/store:evil"
    private, public = key_pair(tmp_path / "k")
    capsys.readouterr()
    assert "escapes" in _refused(capsys, main(["sign", ref, "--key", str(private), "--form", "oms"]))
    assert main(["sign", ref, "--key", str(private)]) == 0
    key = keys.load_private_key(private)
    statement = oms_statement("m", {"README.md": "00" * 32})
    attach_bundle(store, store.resolve("evil"), make_bundle(key, statement, hint=keys.pem_hint(key)),
                  OMS_PREDICATE_TYPE)
    capsys.readouterr()
    assert main(["verify", ref, "--key", str(public), "--json"]) == 0
    forms = sorted(s["form"] for s in json.loads(capsys.readouterr().out)["signatures"])
    assert forms == ["bundle", "classic"]


def test_cosign_bundle_is_not_an_oms_signature(tmp_path, capsys):
    """--with-signatures needs an OMS statement: a cosign bundle (another predicate) is not one."""
    model = make_model(tmp_path / "m")
    ref = f"oci:{tmp_path}/store:v1"
    assert main(["push", str(model), ref, "-q"]) == 0
    private, public = key_pair(tmp_path / "k")
    assert main(["sign", ref, "--key", str(private), "--form", "bundle"]) == 0
    capsys.readouterr()
    code = _pull(ref, tmp_path / "out", public)
    assert "no usable OMS signature" in _refused(capsys, code)
    assert not (tmp_path / "out").exists()


def test_form_all_writes_three_and_each_verifies(tmp_path, capsys):
    model = make_model(tmp_path / "m")
    ref = f"oci:{tmp_path}/store:v1"
    assert main(["push", str(model), ref, "-q"]) == 0
    private, public = key_pair(tmp_path / "k")
    capsys.readouterr()
    assert main(["sign", ref, "--key", str(private), "--form", "all", "--json"]) == 0
    assert set(json.loads(capsys.readouterr().out)["written"]) == {"classic", "bundle", "oms"}
    assert main(["sign", ref, "--key", str(private), "--form", "all", "--json"]) == 0
    assert set(json.loads(capsys.readouterr().out)["unchanged"]) == {"classic", "bundle", "oms"}
    assert main(["verify", ref, "--key", str(public), "--json"]) == 0
    forms = sorted(s["form"] for s in json.loads(capsys.readouterr().out)["signatures"])
    assert forms == ["bundle", "classic"]  # the OMS one verifies files, not the manifest


def test_copy_r_carries_the_oms_signature(signed, tmp_path, capsys):
    ref, public, _ = signed
    assert main(["copy", "-r", ref, f"oci:{tmp_path}/far:v1", "-q"]) == 0
    assert _files_verify(f"oci:{tmp_path}/far:v1", public, tmp_path / "out") == 0


def test_tar_layers_are_listed_from_their_contents(tmp_path, capsys):
    """Files packed in tar layers (grouped, gzip) are signed by their own SHA-256, so the
    library verifies the pulled directory and ocibridge's pushes of a library signature match."""
    model = make_model(tmp_path / "m")
    ref = f"oci:{tmp_path}/store:v1"
    assert main(["push", str(model), ref, "-q", "--group", "code", "--group", "doc",
                 "--layer", "code=tar+gzip"]) == 0
    store = LayoutStore(str(tmp_path / "store"))
    manifest = json.loads(store.fetch_bytes(store.resolve("v1")))
    assert any("tar" in layer["mediaType"] for layer in manifest["layers"])
    private, public = key_pair(tmp_path / "k")
    assert main(["sign", ref, "--key", str(private), "--form", "oms"]) == 0
    out = tmp_path / "out"
    assert _pull(ref, out, public) == 0
    library_verify(out, public)
    # a library signature of the same directory attaches to the grouped artifact too
    signature = library_sign(model, private)
    assert main(["push", str(model), f"oci:{tmp_path}/lib:v1", "-q", "--group", "code", "--group", "doc",
                 "--signature", str(signature)]) == 0
    assert _files_verify(f"oci:{tmp_path}/lib:v1", public, tmp_path / "lib-out") == 0


# -- partial pulls ------------------------------------------------------------------------------
def test_partial_pull_checks_fetched_files_against_the_full_signature(signed, tmp_path, capsys):
    ref, public, _ = signed
    out = tmp_path / "out"
    assert _pull(ref, out, public, "--include", "*.json") == 0
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.sig", "tokenizer.json"]
    # a file kept from before (-k) that differs from the signed one is refused
    (out / "config.json").write_text('{"hidden": 5}\n')
    (out / "model.sig").unlink()
    code = _pull(ref, out, public, "--include", "*.json", "-k")
    assert "content differs: config.json" in _refused(capsys, code)
    assert not (out / "model.sig").exists()


# -- signing reads no weight bytes ---------------------------------------------------------------
def _sparse_layout(root: Path) -> tuple[str, int]:
    """A layout holding a 4 GiB weight (a sparse file) and a small config file, as a push lays
    them out (raw layers, ModelPack media types): the reference, the weight's size."""
    store = LayoutStore(str(root), create=True)
    size = 4 << 30
    weight = store.blob_path(ZERO_4G)
    weight.parent.mkdir(parents=True, exist_ok=True)
    with open(weight, "wb") as f:
        f.truncate(size)
    config_bytes = b'{"hidden": 4}\n'
    layers = []
    for name, media_type, data_desc in (
            ("model.safetensors", "application/vnd.cnai.model.weight.v1.raw",
             Descriptor(mediaType="application/vnd.cnai.model.weight.v1.raw", digest=ZERO_4G, size=size)),
            ("config.json", "application/vnd.cnai.model.weight.config.v1.raw",
             Descriptor.for_bytes("application/vnd.cnai.model.weight.config.v1.raw", config_bytes))):
        if name == "config.json":
            store.push_blob(data_desc, io.BytesIO(config_bytes))
        layers.append(Descriptor(mediaType=media_type, digest=data_desc.digest, size=data_desc.size,
                                 annotations={"org.cnai.model.filepath": name}))
    config = b"{}"
    config_desc = Descriptor.for_bytes("application/vnd.cnai.model.config.v1+json", config)
    store.push_blob(config_desc, io.BytesIO(config))
    manifest = Manifest(mediaType=OCI_MANIFEST, artifactType="application/vnd.cnai.model.manifest.v1+json",
                        config=config_desc, layers=layers)
    data = manifest.to_json_bytes()
    store.push_manifest(Descriptor.for_bytes(OCI_MANIFEST, data), data, "v1")
    return f"oci:{root}:v1", size


def _rchar() -> int:
    """Bytes this process has read through read(2) and friends so far (/proc/self/io)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


def test_signing_a_4gib_model_reads_no_weight_bytes(tmp_path, capsys, monkeypatch):
    ref, size = _sparse_layout(tmp_path / "store")
    private, public = key_pair(tmp_path / "k")
    opened: list[str] = []
    real_open = LayoutStore.open_blob

    def counting_open(self, desc):
        opened.append(desc.digest)
        return real_open(self, desc)

    monkeypatch.setattr(LayoutStore, "open_blob", counting_open)
    assert main(["sign", ref, "--key", str(private), "--form", "bundle"]) == 0  # imports warmed up
    capsys.readouterr()
    before, start = _rchar(), time.perf_counter()
    assert main(["sign", ref, "--key", str(private), "--form", "oms"]) == 0
    elapsed, read = time.perf_counter() - start, _rchar() - before
    assert ZERO_4G not in opened
    assert read < 1 << 20, f"signing read {read} bytes"
    print(f"4 GiB OMS signing: {elapsed * 1000:.0f} ms, {read} bytes read by the process")
    assert main(["verify", ref, "--key", str(public)]) == 0  # the referrer verifies, still unread
    assert ZERO_4G not in opened
    bundle = find_signatures(LayoutStore(str(tmp_path / "store")), LayoutStore(str(tmp_path / "store"))
                             .resolve("v1")).bundles
    payloads = [json.loads(base64.b64decode(json.loads(b)["dsseEnvelope"]["payload"])) for _, b in bundle]
    (oms,) = [p for p in payloads if p["predicateType"] == OMS_PREDICATE_TYPE]
    assert {r["name"]: r["digest"] for r in oms["predicate"]["resources"]}["model.safetensors"] == ZERO_4G[7:]
    assert os.stat(tmp_path / "store" / "blobs" / "sha256" / ZERO_4G[7:]).st_blocks == 0  # still sparse


def test_verify_dir_refuses_symlinks_and_bad_input(signed, tmp_path, capsys):
    ref, public, _ = signed
    out = tmp_path / "out"
    assert _pull(ref, out, public) == 0
    os.symlink("config.json", out / "alias.json")
    code = main(["verify-dir", str(out), "--signature", str(out / "model.sig"), "--key", str(public)])
    assert "symlink" in _refused(capsys, code)
    (out / "alias.json").unlink()
    (tmp_path / "junk.sig").write_text("not json")
    code = main(["verify-dir", str(out), "--signature", str(tmp_path / "junk.sig"), "--key", str(public)])
    assert "malformed" in _refused(capsys, code)
    code = main(["verify-dir", str(out), "--signature", str(tmp_path / "none.sig"), "--key", str(public)])
    assert "none.sig" in _refused(capsys, code)
    shutil.rmtree(out / "weights")
    code = main(["verify-dir", str(out), "--signature", str(out / "model.sig"), "--key", str(public)])
    assert "missing: weights/part-2.bin" in _refused(capsys, code)


# -- on a real registry (docker-registry 2.8: referrers through the fallback index) -------------
def test_oms_on_a_registry_signs_verifies_and_pulls(tmp_path, capsys, registry, unique_repo):
    model = make_model(tmp_path / "m")
    ref = f"{registry.host}/{unique_repo}:v1"
    assert main(["push", str(model), ref, "-q"]) == 0
    private, public = key_pair(tmp_path / "k")
    assert main(["sign", ref, "--key", str(private), "--form", "oms"]) == 0
    _manifest_refused(ref, public, capsys)
    out = tmp_path / "out"
    assert _pull(ref, out, public) == 0
    library_verify(out, public)
    # a model_signing signature pushed with its directory verifies from the registry too
    signature = library_sign(model, private)
    other = f"{registry.host}/{unique_repo}-lib:v1"  # another repository: no signature of ours there
    assert main(["push", str(model), other, "-q", "--signature", str(signature)]) == 0
    assert _files_verify(other, public, tmp_path / "other-out") == 0


@pytest.mark.parametrize("verify_key", [True, False], ids=["verify-key", "no-key"])
def test_moved_tag_pulls_what_the_oms_signature_signs(tmp_path, capsys, registry, unique_repo, verify_key):
    """Check, then use: a proxy answers the tag with another model from its second request on;
    the files pulled and the model.sig written are those of the manifest first resolved."""
    from support.faultproxy import FaultProxy, reroute

    from tests.modelgen import tree

    repo = f"{registry.host}/{unique_repo}"
    signed_model = make_model(tmp_path / "signed", seed=1)
    assert main(["push", str(signed_model), f"{repo}:v1", "-q"]) == 0
    assert main(["push", str(make_model(tmp_path / "other", seed=2)), f"{repo}:other", "-q"]) == 0
    private, public = key_pair(tmp_path / "k")
    assert main(["sign", f"{repo}:v1", "--key", str(private), "--form", "oms"]) == 0
    assert main(["sign", f"{repo}:other", "--key", str(private), "--form", "oms"]) == 0
    capsys.readouterr()
    out = tmp_path / "out"
    with FaultProxy(registry) as proxy:
        proxy.add(None, rf"/{unique_repo}/manifests/v1$", reroute(f"/v2/{unique_repo}/manifests/other"),
                  skip=1, times=None)
        argv = ["pull", f"{proxy.host}/{unique_repo}:v1", str(out), "-q", "--with-signatures"]
        assert main(argv + (["--verify-key", str(public)] if verify_key else [])) == 0
        assert len(proxy.requests_matching(None, r"/manifests/v1$")) == 1
    signature = out / "model.sig"
    data = signature.read_bytes()
    signature.unlink()
    assert tree(out) == tree(signed_model)
    signature.write_bytes(data)
    library_verify(out, public)
