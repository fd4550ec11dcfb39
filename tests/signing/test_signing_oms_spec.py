"""The OMS specification's MUSTs beyond P-256 and whole-file SHA-256, both ways with the real
``model_signing`` library: P-384 and P-521 keys, shards (``PATH:START:END``, ``shard_size``),
blake2b and blake3, a single-file model, v1.* predicates, ``--ignore-paths`` and
``--ignore-unsigned-files``; blake3 without its package is one line naming the extra."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import model_signing
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from ocibridge.cli import main
from ocibridge.signing import keys
from ocibridge.signing.oms import SHA256_FILES, Hashing, oms_statement
from ocibridge.signing.omsdir import hash_files
from ocibridge.signing.sigstorebundle import make_bundle
from tests.modelgen import make_model
from tests.signing_keys import key_pair

CURVES = {"P-384": ec.SECP384R1(), "P-521": ec.SECP521R1()}
#: model_signing's name of a hash -> the OMS name
LIBRARY_HASHES = {"sha256": "sha256", "blake2": "blake2b", "blake3": "blake3"}


def library_hashing(algorithm: str, shard_size: int | None, ignored: list[Path]) -> model_signing.hashing.Config:
    config = model_signing.hashing.Config()
    if shard_size is None:
        config.use_file_serialization(hashing_algorithm=algorithm)
    else:
        config.use_shard_serialization(hashing_algorithm=algorithm, shard_size=shard_size)
    return config.set_ignored_paths(paths=ignored)


def library_sign(model: Path, private: Path, signature: Path, algorithm: str = "sha256",
                 shard_size: int | None = None) -> None:
    model_signing.signing.Config().use_elliptic_key_signer(private_key=private).set_hashing_config(
        library_hashing(algorithm, shard_size, [signature])).sign(model, signature)


def library_verify(model: Path, public: Path, signature: Path, algorithm: str | None = None,
                   shard_size: int | None = None) -> None:
    """model_signing's verification. It guesses the hashing from the statement, except where
    1.1.1 cannot: blake2b (it names the hash ``blake2``) and shards (it reads shard_size back
    as a float): then it is told."""
    config = model_signing.verifying.Config().use_elliptic_key_verifier(public_key=public)
    if algorithm is not None:
        config.set_hashing_config(library_hashing(algorithm, shard_size, [signature]))
    config.verify(model, signature)


def library_resources(model: Path, algorithm: str, shard_size: int | None, signature: Path) -> dict[str, str]:
    """What model_signing hashes ``model`` into: resource name -> hex digest."""
    hashed = library_hashing(algorithm, shard_size, [signature]).hash(model)
    return {d.identifier: d.digest.digest_hex for d in hashed.resource_descriptors()}


def statement_of(signature: Path) -> dict:
    return json.loads(base64.b64decode(json.loads(signature.read_text())["dsseEnvelope"]["payload"]))


def _refused(capsys, code: int) -> str:
    captured = capsys.readouterr()
    assert code != 0 and "Traceback" not in captured.err
    (line,) = captured.err.strip().splitlines()
    return line


def _verify_dir(model: Path, signature: Path, public: Path, *extra: str) -> int:
    return main(["verify-dir", str(model), "--signature", str(signature), "--key", str(public), *extra])


# -- model_signing signs, ocibridge verifies ---------------------------------------------------
@pytest.mark.parametrize(("curve", "algorithm", "shard_size"), [
    ("P-384", "sha256", 4096), ("P-521", "blake2", 50_000), ("P-384", "blake3", None), ("P-521", "sha256", None)])
def test_library_signature_verifies(tmp_path, capsys, curve, algorithm, shard_size):
    model = make_model(tmp_path / "m")
    private, public = key_pair(tmp_path / "k", curve=CURVES[curve])
    signature = tmp_path / "model.sig"
    library_sign(model, private, signature, algorithm, shard_size)
    serialization = statement_of(signature)["predicate"]["serialization"]
    assert serialization["hash_type"] == LIBRARY_HASHES[algorithm]
    assert _verify_dir(model, signature, public) == 0
    assert "7 file(s) signed" in capsys.readouterr().out
    data = bytearray((model / "model.safetensors").read_bytes())
    data[9000] ^= 1  # the third 4096-byte shard, the first 50 000-byte one, or the whole file
    (model / "model.safetensors").write_bytes(bytes(data))
    line = _refused(capsys, _verify_dir(model, signature, public))
    expected = {4096: "model.safetensors:8192:12288", 50_000: "model.safetensors:0:50000", None: "model.safetensors"}
    assert f"content differs: {expected[shard_size]}" in line


def test_library_shard_signature_pushes_and_verifies_a_pull(tmp_path, capsys):
    """A sharded P-384 signature made by model_signing is checked against the pushed manifest
    (every blob hashed in shards) and written beside the pull."""
    model = make_model(tmp_path / "m")
    private, public = key_pair(tmp_path / "k", curve=CURVES["P-384"])
    signature = tmp_path / "model.sig"
    library_sign(model, private, signature, "sha256", 65_536)
    ref = f"oci:{tmp_path}/store:v1"
    assert main(["push", str(model), ref, "-q", "--signature", str(signature)]) == 0
    out = tmp_path / "out"
    assert main(["pull", ref, str(out), "-q", "--verify-key", str(public), "--with-signatures"]) == 0
    assert (out / "model.sig").read_bytes() == signature.read_bytes()
    library_verify(out, public, out / "model.sig", "sha256", 65_536)


def test_single_file_model(tmp_path, capsys):
    """model_signing signs one file as the resource ``.``; the file verifies, a changed byte
    does not, and without --signature the line says what to pass."""
    weights = make_model(tmp_path / "m") / "model.safetensors"
    private, public = key_pair(tmp_path / "k", curve=CURVES["P-384"])
    signature = tmp_path / "weights.sig"
    library_sign(weights, private, signature)
    assert [r["name"] for r in statement_of(signature)["predicate"]["resources"]] == ["."]
    assert _verify_dir(weights, signature, public) == 0
    assert "1 file(s) signed" in capsys.readouterr().out
    assert "pass --signature" in _refused(capsys, main(["verify-dir", str(weights), "--key", str(public)]))
    weights.write_bytes(weights.read_bytes()[:-1])
    assert "content differs: ." in _refused(capsys, _verify_dir(weights, signature, public))


# -- ocibridge signs, model_signing verifies ---------------------------------------------------
@pytest.mark.parametrize(("curve", "oms_hash", "shard_size"), [
    ("P-384", "sha256", 4096), ("P-521", "sha256", None), ("P-384", "blake2b", 70_000), ("P-384", "blake2b", None),
    ("P-384", "blake3", None)])
def test_ocibridge_signature_verifies_with_the_library(tmp_path, capsys, curve, oms_hash, shard_size):
    model = make_model(tmp_path / "m")
    ref = f"oci:{tmp_path}/store:v1"
    assert main(["push", str(model), ref, "-q"]) == 0
    private, public = key_pair(tmp_path / "k", curve=CURVES[curve])
    argv = ["sign", ref, "--key", str(private), "--form", "oms", "--oms-hash", oms_hash]
    assert main(argv + (["--oms-shard-size", str(shard_size)] if shard_size else [])) == 0
    out = tmp_path / "out"
    assert main(["pull", ref, str(out), "-q", "--verify-key", str(public), "--with-signatures"]) == 0
    statement = statement_of(out / "model.sig")
    serialization = statement["predicate"]["serialization"]
    assert serialization["hash_type"] == oms_hash and serialization.get("shard_size") == shard_size
    names = [r["name"] for r in statement["predicate"]["resources"]]
    assert names == sorted(names)
    if shard_size:
        assert "model.safetensors:0:4096" in names or "model.safetensors:0:70000" in names
    assert _verify_dir(out, out / "model.sig", public) == 0
    algorithm = {"blake2b": "blake2"}.get(oms_hash, oms_hash)
    signed = {r["name"]: r["digest"] for r in statement["predicate"]["resources"]}
    assert library_resources(out, algorithm, shard_size, out / "model.sig") == signed  # same shards, same digests
    if shard_size:
        # model_signing 1.1.1 names a shard's hash "sha256-sharded-4096" where the specification
        # says "sha256" (= hash_type): it refuses a statement written as the spec says
        with pytest.raises(ValueError, match=f"{oms_hash}-sharded-{shard_size}"):
            library_verify(out, public, out / "model.sig", algorithm, shard_size)
        return
    library_verify(out, public, out / "model.sig", "blake2" if oms_hash == "blake2b" else None)
    (out / "README.md").write_text("changed\n")
    with pytest.raises(ValueError):
        library_verify(out, public, out / "model.sig", "blake2" if oms_hash == "blake2b" else None)


def test_cosign_forms_stay_p256(tmp_path, capsys):
    model = make_model(tmp_path / "m")
    ref = f"oci:{tmp_path}/store:v1"
    assert main(["push", str(model), ref, "-q"]) == 0
    private, _ = key_pair(tmp_path / "k", curve=CURVES["P-384"])
    capsys.readouterr()
    for form in ("both", "all", "bundle"):
        line = _refused(capsys, main(["sign", ref, "--key", str(private), "--form", form]))
        assert "secp384r1, not P-256" in line and "--form oms" in line
    line = _refused(capsys, main(["sign", ref, "--key", str(private), "--form", "bundle", "--oms-hash", "blake3"]))
    assert "OMS form only" in line
    # a P-384 public key is told apart from a signature that fails, on each cosign form
    cosign_private, _ = key_pair(tmp_path / "cosign")
    assert main(["sign", ref, "--key", str(cosign_private)]) == 0
    capsys.readouterr()
    line = _refused(capsys, main(["verify", ref, "--key", str(private.with_suffix(".pub"))]))
    assert line.count("verified with P-256 keys; the key given is P-384") == 2  # classic and bundle


# -- what verify-dir leaves out --------------------------------------------------------------
def test_ignore_paths_and_unsigned_files(tmp_path, capsys):
    model = make_model(tmp_path / "m")
    private, public = key_pair(tmp_path / "k")
    signature = tmp_path / "model.sig"
    library_sign(model, private, signature)
    (model / "cache").mkdir()
    (model / "cache" / "x.bin").write_bytes(b"x")
    assert "not signed: cache/x.bin" in _refused(capsys, _verify_dir(model, signature, public))
    assert _verify_dir(model, signature, public, "--ignore-paths", "cache") == 0
    assert _verify_dir(model, signature, public, "--ignore-paths", str(model / "cache")) == 0
    assert _verify_dir(model, signature, public, "--ignore-unsigned-files") == 0
    capsys.readouterr()
    line = _refused(capsys, _verify_dir(model, signature, public, "--ignore-paths", str(tmp_path)))
    assert "not inside" in line
    assert "escapes" in _refused(capsys, _verify_dir(model, signature, public, "--ignore-paths", "../m"))
    # ignoring a signed file, or letting unsigned ones be, never lets a signed one go missing or change
    assert "missing: README.md" in _refused(capsys, _verify_dir(model, signature, public, "--ignore-paths",
                                                                "README.md", "--ignore-unsigned-files"))
    (model / "README.md").write_text("changed\n")
    line = _refused(capsys, _verify_dir(model, signature, public, "--ignore-unsigned-files"))
    assert "content differs: README.md" in line


# -- what a statement may say ----------------------------------------------------------------
def _sign_statement(tmp_path: Path, payload: bytes) -> tuple[Path, Path]:
    private, public = key_pair(tmp_path / "k", curve=CURVES["P-384"])
    key = keys.load_private_key(private, any_curve=True)
    signature = tmp_path / "model.sig"
    signature.write_bytes(make_bundle(key, payload, hint=keys.pem_hint(key)))
    return signature, public


@pytest.mark.parametrize(("predicate", "verifies"), [
    ("https://model_signing/signature/v1.1", True), ("https://model_signing/signature/v1.17", True),
    ("https://model_signing/signature/v2.0", False), ("https://model_signing/signature/v1.0.evil", False)])
def test_any_v1_predicate(tmp_path, capsys, predicate, verifies):
    model = make_model(tmp_path / "m")
    files = hash_files(model, ["README.md", "config.json", "data.csv", "model.safetensors", "scripts/run.sh",
                               "tokenizer.json", "weights/part-2.bin"])
    payload = oms_statement("m", files).replace(b"signature/v1.0", predicate.split("model_signing/")[1].encode())
    signature, public = _sign_statement(tmp_path, payload)
    code = _verify_dir(model, signature, public)
    if verifies:
        assert code == 0
    else:
        assert "not an OMS signature" in _refused(capsys, code)


def test_hashes_are_those_of_the_registry(tmp_path):
    """Each hash of the OMS algorithm registry, shard by shard: the digests hashlib and blake3
    give for the same bytes (blake2b is the 512-bit BLAKE2b)."""
    import hashlib

    import blake3

    model = make_model(tmp_path / "m")
    data = (model / "config.json").read_bytes()
    expected = {"sha256": hashlib.sha256(data).hexdigest(), "blake2b": hashlib.blake2b(data).hexdigest(),
                "blake3": blake3.blake3(data).hexdigest()}
    for name, digest in expected.items():
        assert hash_files(model, ["config.json"], Hashing(name)) == {"config.json": digest}
        assert hash_files(model, ["config.json"], Hashing(name, 5)) == {
            f"config.json:{i}:{min(i + 5, len(data))}": _hex(name, data[i:i + 5]) for i in range(0, len(data), 5)}
    assert len(expected["blake2b"]) == 128
    assert hash_files(model, ["config.json"], SHA256_FILES) == {"config.json": expected["sha256"]}


def _hex(name: str, data: bytes) -> str:
    import hashlib

    import blake3

    return blake3.blake3(data).hexdigest() if name == "blake3" else hashlib.new(name, data).hexdigest()


def test_blake3_without_its_package_names_the_extra(tmp_path, capsys, monkeypatch):
    """No digest depends on which packages are there: without blake3, a blake3 signature is
    refused with one line naming ocibridge[blake3], never checked with another hash."""
    model = make_model(tmp_path / "m")
    private, public = key_pair(tmp_path / "k", curve=CURVES["P-384"])
    signature = tmp_path / "model.sig"
    library_sign(model, private, signature, "blake3")
    monkeypatch.setitem(sys.modules, "blake3", None)
    line = _refused(capsys, _verify_dir(model, signature, public))
    assert "pip install 'ocibridge[blake3]'" in line
    ref = f"oci:{tmp_path}/store:v1"
    assert main(["push", str(model), ref, "-q"]) == 0
    capsys.readouterr()
    line = _refused(capsys, main(["sign", ref, "--key", str(private), "--form", "oms", "--oms-hash", "blake3"]))
    assert "ocibridge[blake3]" in line


def test_a_tiny_shard_size_cannot_make_hashing_grow(tmp_path, capsys):
    """A statement listing one 1-byte shard of each file of a 400 kB model is refused by the
    shard count before any file is hashed (verify-dir, push --signature), and a pull stops
    listing the manifest once it holds more resources than the statement (an unverified referrer)."""
    model = make_model(tmp_path / "m")
    names = ["README.md", "config.json", "data.csv", "model.safetensors", "scripts/run.sh", "tokenizer.json",
             "weights/part-2.bin"]
    payload = oms_statement("m", {f"{name}:0:1": "00" * 32 for name in names}, Hashing("sha256", 1))
    signature, public = _sign_statement(tmp_path, payload)
    line = _refused(capsys, _verify_dir(model, signature, public))
    assert "shards of 1 bytes; the signature lists 7" in line
    ref = f"oci:{tmp_path}/store:v1"
    line = _refused(capsys, main(["push", str(model), ref, "-q", "--signature", str(signature)]))
    assert "the signature lists 7" in line
    assert main(["push", str(model), ref, "-q"]) == 0
    from ocibridge.signing.attach import attach_bundle
    from ocibridge.signing.oms import OMS_PREDICATE_TYPE
    from ocibridge.stores.layout import LayoutStore

    store = LayoutStore(str(tmp_path / "store"))
    attach_bundle(store, store.resolve("v1"), signature.read_bytes(), OMS_PREDICATE_TYPE)
    capsys.readouterr()
    line = _refused(capsys, main(["pull", ref, str(tmp_path / "out"), "-q", "--with-signatures"]))
    assert "more than 7" in line
    assert not (tmp_path / "out").exists()
