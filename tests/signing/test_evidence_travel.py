"""Evidence that travels (issue 44): provenance of convert, copy and mirror (reproducible: the
same inputs give the byte-identical statement), BOM and provenance carried by copy -r, mirrors
and save/load, and pull --with-attestations. Against the real registry fixture."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
from pathlib import Path

import pytest

from ocibridge.cli import main
from ocibridge.oci.models import Manifest, parse_manifest_bytes
from ocibridge.places.locate import Role, locate
from ocibridge.places.targets import open_store_target
from ocibridge.signing.attest import CYCLONEDX, SLSA_PROVENANCE_V1, find_attestations, list_evidence
from ocibridge.stores.base import Store, close_store
from tests.modelgen import make_model
from tests.signing_keys import key_pair
from tests.support.cli_run import digest_of

PROVENANCE = "in-toto statement"  # how list_evidence names an unsigned provenance statement


def _store(ref: str) -> Store:
    return open_store_target(locate(ref, Role.MODEL)).store


def _signed_statements(ref: str, predicate_type: str) -> list[bytes]:
    """The DSSE payloads (statements) of ``ref``'s attestations of that type."""
    store = _store(ref)
    try:
        subject = store.resolve(locate(ref, Role.MODEL).reference)
        return [base64.b64decode(json.loads(a.bundle)["dsseEnvelope"]["payload"])
                for a in find_attestations(store, subject) if a.predicate_type == predicate_type]
    finally:
        close_store(store)


def _evidence(ref: str) -> list[tuple[str, bool]]:
    store = _store(ref)
    try:
        return [(e["predicateType"], e["signed"]) for e in
                list_evidence(store, store.resolve(locate(ref, Role.MODEL).reference))]
    finally:
        close_store(store)


def _unsigned_statement(ref: str) -> bytes:
    store = _store(ref)
    try:
        subject = store.resolve(locate(ref, Role.MODEL).reference)
        (found,) = [r for r in store.referrers(subject) if r.artifactType == "application/vnd.in-toto+json"]
        node = parse_manifest_bytes(store.fetch_bytes(found), found.mediaType)
        assert isinstance(node, Manifest)
        return store.fetch_bytes(node.layers[0])
    finally:
        close_store(store)


@pytest.fixture
def source(tmp_path, registry, unique_repo, capsys):
    """(ref, digest, private key, public key): a model pushed to the registry."""
    ref = f"{registry.host}/{unique_repo}/src:v1"
    assert main(["push", str(make_model(tmp_path / "m")), ref, "-q"]) == 0
    private, public = key_pair(tmp_path / "k")
    return ref, digest_of(capsys, ref), private, public


def test_copy_provenance_is_signed_reproducible_and_names_the_source_manifest(source, registry, unique_repo,
                                                                             capsys):
    ref, digest, private, public = source
    dest = f"{registry.host}/{unique_repo}/copied:v1"
    argv = ["copy", ref, dest, "-q", "--provenance", "--attest-key", str(private), "--json"]
    assert main(argv) == 0
    first = json.loads(capsys.readouterr().out)["evidence"]
    assert first["signed"] and set(first["written"]) == {"provenance"}
    (statement,) = _signed_statements(dest, SLSA_PROVENANCE_V1)
    assert main(argv) == 0  # the same copy again: the same statement, nothing new
    second = json.loads(capsys.readouterr().out)["evidence"]
    assert second["written"] == first["written"] and second["unchanged"] == ["provenance"]
    assert _signed_statements(dest, SLSA_PROVENANCE_V1) == [statement]  # byte for byte
    doc = json.loads(statement)
    assert doc["subject"][0]["digest"] == {"sha256": digest.split(":")[1]}
    build = doc["predicate"]["buildDefinition"]
    assert build["buildType"] == "https://ocibridge.dev/slsa/copy/v1"
    assert build["externalParameters"] == {"source": ref, "destination": dest}  # no flag changed the result
    assert build["resolvedDependencies"] == [{
        "uri": f"oci://{registry.host}/{unique_repo}/src", "digest": {"sha256": digest.split(":")[1]},
        "mediaType": "application/vnd.oci.image.manifest.v1+json"}]
    assert main(["verify", dest, "--key", str(public), "--attestation-type", "slsaprovenance1"]) == 0


def test_convert_provenance_and_sbom_of_the_converted_manifest(source, registry, unique_repo, capsys):
    ref, digest, private, public = source
    dest = f"{registry.host}/{unique_repo}/kit:v1"
    argv = ["convert", ref, dest, "--to", "modelkit", "--license", "MIT", "-q", "--provenance", "--sbom"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "provenance attached (referrer)" in out and "sbom attached (referrer)" in out
    converted = digest_of(capsys, dest)
    assert converted != digest
    statement = _unsigned_statement(dest)
    assert main(argv) == 0
    assert _unsigned_statement(dest) == statement  # reproducible: the same inputs, the same bytes
    doc = json.loads(statement)
    assert doc["subject"][0]["digest"] == {"sha256": converted.split(":")[1]}
    build = doc["predicate"]["buildDefinition"]
    assert build["buildType"] == "https://ocibridge.dev/slsa/convert/v1"
    assert build["externalParameters"]["flags"] == {"to": "modelkit", "media_types": "cnai", "set_license": "MIT"}
    (dep,) = build["resolvedDependencies"]
    assert dep["digest"] == {"sha256": digest.split(":")[1]}  # what was read: the source, not the result
    assert sorted(_evidence(dest)) == [(CYCLONEDX, False), (PROVENANCE, False)]
    # signed, into a layout: verify takes it
    assert main(["convert", ref, f"oci:{Path(str(private)).parent}/kit:v1", "--to", "modelkit", "-q",
                 "--provenance", "--attest-key", str(private)]) == 0
    assert main(["verify", f"oci:{Path(str(private)).parent}/kit:v1", "--key", str(public),
                 "--attestation-type", "slsaprovenance1"]) == 0


def test_evidence_flags_without_sbom_or_provenance_are_one_error_line(source, tmp_path, capsys):
    ref, _, private, _ = source
    capsys.readouterr()
    assert main(["copy", ref, f"oci:{tmp_path}/x:v1", "--attest-key", str(private)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ocibridge: error: ") and err.count("\n") == 1 and "--provenance" in err
    assert not (tmp_path / "x").exists()


def _job(path: Path, source: str, target: str, extra: str = "") -> Path:
    path.write_text(f'[[sync]]\nsource = "{source}"\ntarget = "{target}"\n{extra}')
    return path


def test_mirror_attaches_provenance_to_each_target_manifest(source, registry, unique_repo, tmp_path, capsys):
    ref, digest, private, public = source
    repo = ref.rsplit(":", 1)[0]
    target = f"{registry.host}/{unique_repo}/mirrored"
    job = _job(tmp_path / "job.toml", repo, target, f'provenance = true\nattest_key = "{private}"\n')
    assert main(["mirror", str(job), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (artifact,) = report["artifacts"]
    assert artifact["status"] == "copied" and artifact["provenance"].startswith("sha256:")
    assert main(["verify", f"{target}:v1", "--key", str(public), "--attestation-type", "slsaprovenance1"]) == 0
    (statement,) = _signed_statements(f"{target}:v1", SLSA_PROVENANCE_V1)
    build = json.loads(statement)["predicate"]["buildDefinition"]
    assert build["buildType"] == "https://ocibridge.dev/slsa/mirror/v1"
    assert build["externalParameters"] == {"source": f"{repo}:v1", "destination": f"{target}:v1",
                                           "flags": {"referrers": True}}
    assert build["resolvedDependencies"][0]["digest"] == {"sha256": digest.split(":")[1]}
    # reproducible: mirrored again from scratch (a layout target), the same statement byte for byte
    layout_job = _job(tmp_path / "layout.toml", repo, f"oci:{tmp_path}/lay", "provenance = true\n")
    assert main(["mirror", str(layout_job)]) == 0
    first = _unsigned_statement(f"oci:{tmp_path}/lay:v1")
    shutil.rmtree(tmp_path / "lay")
    assert main(["mirror", str(layout_job)]) == 0
    assert _unsigned_statement(f"oci:{tmp_path}/lay:v1") == first
    # a key that is not one: the entry fails, nothing copied, one line in the report
    bad = _job(tmp_path / "bad.toml", repo, f"oci:{tmp_path}/bad", 'provenance = true\nattest_key = "nokey.pem"\n')
    capsys.readouterr()
    assert main(["mirror", str(bad)]) != 0
    assert "nokey.pem" in capsys.readouterr().out
    assert not (tmp_path / "bad").exists()  # not even an empty layout: the key is loaded first
    # attest_key without provenance: refused when the job is read
    wrong = _job(tmp_path / "wrong.toml", repo, f"oci:{tmp_path}/w", f'attest_key = "{private}"\n')
    assert main(["mirror", str(wrong)]) != 0
    err = capsys.readouterr().err
    assert "goes with provenance" in err and "Value error" not in err  # our sentence, not pydantic's wrapper


def test_mirror_with_an_unreadable_attest_key_creates_no_target(tmp_path, capsys):
    """The key is loaded before the target is opened: a layout target was created (empty) by
    the failed run before, so a fixed job then ran against a folder nobody asked for."""
    assert main(["push", str(make_model(tmp_path / "m")), f"oci:{tmp_path}/src:v1", "-q"]) == 0
    public = key_pair(tmp_path / "k")[1]
    for name, key in (("missing", tmp_path / "nokey.pem"), ("public", public)):
        job = _job(tmp_path / f"{name}.toml", f"oci:{tmp_path}/src", f"oci:{tmp_path}/{name}",
                   f'provenance = true\nattest_key = "{key}"\n')
        capsys.readouterr()
        assert main(["mirror", str(job)]) == 1
        out = capsys.readouterr().out
        assert f"FAILED  oci:{tmp_path}/src" in out and str(key) in out
        assert not (tmp_path / name).exists()


def test_mirror_reads_the_attest_key_s_password_from_its_own_variable(tmp_path, capsys, monkeypatch):
    """A job's attest_key and scan_key are two keys: $OCIBRIDGE_ATTEST_PASSWORD is attest_key's."""
    import ocibridge

    assert main(["push", str(make_model(tmp_path / "m")), f"oci:{tmp_path}/src:v1", "-q"]) == 0
    attester = ocibridge.keygen(tmp_path / "attester", password="attest-pw")
    job = _job(tmp_path / "job.toml", f"oci:{tmp_path}/src", f"oci:{tmp_path}/dst",
               f'provenance = true\nattest_key = "{attester.private_key}"\n')
    monkeypatch.setenv("COSIGN_PASSWORD", "another key's")
    monkeypatch.setenv("OCIBRIDGE_ATTEST_PASSWORD", "wrong")
    capsys.readouterr()
    assert main(["mirror", str(job)]) == 1
    assert f"attest_key {attester.private_key}: wrong password for the cosign key ($OCIBRIDGE_ATTEST_PASSWORD)" \
        in capsys.readouterr().out
    monkeypatch.setenv("OCIBRIDGE_ATTEST_PASSWORD", "attest-pw")
    assert main(["mirror", str(job)]) == 0, capsys.readouterr()
    assert main(["verify", f"oci:{tmp_path}/dst:v1", "--key", attester.public_key,
                 "--attestation-type", "slsaprovenance1"]) == 0


def test_bom_and_provenance_are_carried_by_copy_r_mirror_save_and_load(tmp_path, registry, unique_repo, capsys):
    ref = f"{registry.host}/{unique_repo}/ev:v1"
    assert main(["push", str(make_model(tmp_path / "m")), ref, "-q", "--sbom", "--provenance"]) == 0
    private, public = key_pair(tmp_path / "k")
    assert main(["attest", ref, "--sbom", "--key", str(private)]) == 0  # and one signed
    want = sorted([(CYCLONEDX, False), (PROVENANCE, False), (CYCLONEDX, True)])
    assert sorted(_evidence(ref)) == want
    copied = f"{registry.host}/{unique_repo}/copied:v1"
    assert main(["copy", "-r", ref, copied, "-q"]) == 0
    assert sorted(_evidence(copied)) == want
    plain = f"{registry.host}/{unique_repo}/plain:v1"
    assert main(["copy", ref, plain, "-q"]) == 0
    assert _evidence(plain) == []  # without -r: the model only
    job = _job(tmp_path / "job.toml", ref, f"{registry.host}/{unique_repo}/mirror:v1")
    assert main(["mirror", str(job)]) == 0
    assert sorted(_evidence(f"{registry.host}/{unique_repo}/mirror:v1")) == want
    assert main(["save", ref, "-o", str(tmp_path / "b.tar")]) == 0
    assert main(["load", str(tmp_path / "b.tar"), f"{registry.host}/{unique_repo}/loaded"]) == 0
    loaded = f"{registry.host}/{unique_repo}/loaded/{unique_repo}/ev:v1"  # load keeps the repository's path
    assert sorted(_evidence(loaded)) == want
    assert main(["verify", loaded, "--key", str(public),
                 "--attestation-type", "cyclonedx"]) == 0


def _files(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_pull_with_attestations_writes_them_beside_the_files(tmp_path, registry, unique_repo, capsys):
    ref = f"{registry.host}/{unique_repo}/ev:v1"
    private, public = key_pair(tmp_path / "k")
    other_private, other = key_pair(tmp_path / "o")
    assert main(["push", str(make_model(tmp_path / "m")), ref, "-q", "--sbom", "--provenance",
                 "--attest-key", str(private)]) == 0
    assert main(["push", str(make_model(tmp_path / "m")), ref, "-q", "--provenance"]) == 0  # and one unsigned
    assert main(["pull", ref, str(tmp_path / "plain"), "-q"]) == 0
    capsys.readouterr()
    assert main(["pull", ref, str(tmp_path / "out"), "-q", "--with-attestations", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    written = sorted((tmp_path / "out" / ".ocibridge" / "attestations").iterdir())
    names = [p.name for p in written]
    assert [n.split(".")[0] for n in names] == ["cyclonedx", "slsaprovenance1", "slsaprovenance1"]
    assert sum(n.endswith(".sigstore.json") for n in names) == 2  # the signed BOM and provenance
    assert result["attestations"] == [f".ocibridge/attestations/{n}" for n in names]
    model_files = {k: v for k, v in _files(tmp_path / "out").items() if not k.startswith(".ocibridge/")}
    assert model_files == _files(tmp_path / "plain")  # the model's files: as a plain pull writes them
    assert sorted(result["files"]) == sorted(model_files)  # and they alone are listed as its files
    signed = json.loads(next(p for p in written if p.name.startswith("slsa") and "sigstore" in p.name).read_bytes())
    statement = json.loads(base64.b64decode(signed["dsseEnvelope"]["payload"]))
    assert statement["subject"][0]["digest"]["sha256"] == result["digest"].split(":")[1]
    unsigned = json.loads(next(p for p in written if p.name.startswith("slsa") and "sigstore" not in p.name)
                          .read_bytes())
    assert unsigned["predicateType"] == SLSA_PROVENANCE_V1
    # with a key: the signed ones verified first, the unsigned left out (nothing vouches for them)
    assert main(["sign", ref, "--key", str(private)]) == 0
    capsys.readouterr()
    assert main(["pull", ref, str(tmp_path / "checked"), "-q", "--with-attestations",
                 "--verify-key", str(public)]) == 0
    assert "(1 unsigned left out" in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "checked" / ".ocibridge" / "attestations").iterdir()) == \
        sorted(n for n in names if n.endswith(".sigstore.json"))
    # an attestation another key signed: refused, one line, nothing written
    assert main(["attest", ref, "--sbom", "--key", str(other_private), "--sbom-time", "2025-01-01T00:00:00Z"]) == 0
    capsys.readouterr()
    assert main(["pull", ref, str(tmp_path / "refused"), "-q", "--with-attestations",
                 "--verify-key", str(public)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ocibridge: error: ") and err.count("\n") == 1 and "attestation" in err, err
    assert not (tmp_path / "refused").exists()
    # only beside files
    assert main(["pull", ref, str(tmp_path / "m.carton"), "--with-attestations"]) == 2
    assert "--with-attestations" in capsys.readouterr().err
    assert other  # the other key pair's public half is unused: only its private key signed


@pytest.mark.parametrize("argv", [["convert", "SRC", "ollama:tiny", "--to", "ollama", "--provenance"],
                                  ["copy", "SRC", "ollama:tiny", "--provenance"],
                                  ["push", "DIR", "ollama:tiny", "--provenance"]])
def test_evidence_into_the_ollama_store_is_refused_before_anything_is_written(tmp_path, monkeypatch, capsys,
                                                                              argv):
    """The Ollama store keeps no referrers: convert --to ollama wrote the model, then failed
    to attach ('takes Ollama models only, not ... blobs'), exit 1 with the model there."""
    from tests.ollama_fixtures import write_gguf

    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path / "ollama"))
    (tmp_path / "g").mkdir()
    write_gguf(tmp_path / "g" / "model.gguf")
    assert main(["push", str(tmp_path / "g"), f"oci:{tmp_path}/lay:v1", "-q"]) == 0
    capsys.readouterr()
    argv = [{"SRC": f"oci:{tmp_path}/lay:v1", "DIR": str(tmp_path / "g")}.get(a, a) for a in argv]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "cannot hold" in err and "ollama:tiny" in err
    assert not (tmp_path / "ollama").exists()


@pytest.mark.parametrize("blocker", ["file", "link"])
def test_pull_with_attestations_refuses_a_blocked_folder_before_writing_files(tmp_path, capsys, blocker):
    """DIR/.ocibridge a file (or a link elsewhere): the model's files were written first and
    then the attestations failed ('Not a directory', exit 1), or followed the link out of DIR."""
    src = f"oci:{tmp_path}/lay:v1"
    assert main(["push", str(make_model(tmp_path / "m")), src, "-q", "--provenance"]) == 0
    out = tmp_path / "out"
    out.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if blocker == "file":
        (out / ".ocibridge").write_text("")
    else:
        (out / ".ocibridge").symlink_to(elsewhere)
    capsys.readouterr()
    assert main(["pull", src, str(out), "--with-attestations"]) == 2
    stdout, err = capsys.readouterr()
    assert stdout == "" and err.count("\n") == 1 and "in the way" in err
    assert sorted(p.name for p in out.iterdir()) == [".ocibridge"] and list(elsewhere.iterdir()) == []
