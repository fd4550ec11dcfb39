"""The OpenSSF model signing specification's test vectors, model-transparency's historical
signatures (both copied into tests/data/oms, PROVENANCE.md there) and the cases the tests make
themselves (tests/oms_generated.py), run against ``verify-dir`` and ``sign --form oms``: each
verify case refused or verified as tests/oms_cases.py says (and docs/signing.md shows); each
roundtrip signed by ocibridge and verified by ocibridge and by the real ``model_signing``
library, with the checks a conformance suite makes of the statement it wrote."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
from pathlib import Path

import model_signing
import pytest

from ocibridge.cli import main
from tests.oms_cases import (
    DATA,
    MT,
    P384_PUB,
    ROUNDTRIP_CASES,
    SPEC,
    SPEC_MODEL,
    VERIFIES,
    VERIFY_CASES,
    mt_case,
)
from tests.oms_generated import ROUNDTRIPS, VERIFY

DOC = Path(__file__).resolve().parents[2] / "docs" / "signing.md"


def statement_of(bundle: Path) -> dict:
    return json.loads(base64.b64decode(json.loads(bundle.read_text())["dsseEnvelope"]["payload"]))


def _run(capsys, argv: list[str]) -> tuple[int, str]:
    capsys.readouterr()
    code = main(argv)
    captured = capsys.readouterr()
    said = (captured.out + captured.err).strip()
    assert "Traceback" not in said
    if code != 0:
        assert len(captured.err.strip().splitlines()) == 1, captured.err
    return code, said


def _verify_dir(capsys, model: Path, bundle: Path, key: Path, flags: list[str] | tuple[str, ...]) -> tuple[int, str]:
    return _run(capsys, ["verify-dir", str(model), "--signature", str(bundle), "--key", str(key), *flags])


def _check(outcome: tuple[str, str], code: int, said: str) -> None:
    expected, words = outcome
    if expected == VERIFIES:
        assert code == 0, said
    else:
        assert code != 0, said
    assert words in said, said


# -- every case is run; nothing else is in tests/data/oms ----------------------------------------
def test_every_case_has_an_expected_outcome():
    cases = {f"spec/{p.parent.name}/{p.name}" for p in SPEC.glob("*/*.json")}
    cases |= {f"model-transparency/{p.name}" for p in MT.glob("v*") if p.is_dir()}
    cases |= {f"generated/{name}" for name in VERIFY}
    assert cases == set(VERIFY_CASES)
    assert set(ROUNDTRIPS) == set(ROUNDTRIP_CASES)


def test_only_licensed_copies_are_kept():
    """tests/data/oms holds the specification's vectors and model-transparency's files (both
    Apache-2.0, PROVENANCE.md) and nothing else: test data without a license is not committed."""
    tops = {p.name for p in DATA.iterdir()}
    assert tops == {"PROVENANCE.md", "spec", "model-transparency"}
    provenance = (DATA / "PROVENANCE.md").read_text()
    for path in MT.rglob("*"):
        if path.is_file():
            assert f"`{path.relative_to(MT).parent.as_posix()}/" in provenance, path


def test_docs_table_says_what_the_cases_do():
    """docs/signing.md's conformance table: one row per case, with the outcome run here."""
    rows = dict(re.findall(r"^\| `([^`]+)` \| (verifies|refused|unsupported) \|", DOC.read_text(), re.M))
    expected = {**{k: v[0] for k, v in VERIFY_CASES.items()},
                **{f"roundtrip/{k}": v[0] for k, v in ROUNDTRIP_CASES.items()}}
    assert rows == expected


# -- verify cases ---------------------------------------------------------------------------------
def _listed(bundle: Path) -> list[str]:
    return sorted(r["name"] for r in statement_of(bundle)["predicate"]["resources"])


@pytest.mark.parametrize("name", sorted(VERIFY_CASES))
def test_verify_case(name, tmp_path, capsys):
    kind, _, rest = name.partition("/")
    flags: list[str] | tuple[str, ...]
    if kind == "spec":
        model = tmp_path / "model"
        shutil.copytree(SPEC_MODEL, model, ignore=shutil.ignore_patterns("model.sig"))
        bundle, key, flags = SPEC / rest, P384_PUB, ["--ignore-paths", "ignore-me"]
    elif kind == "model-transparency":
        model, bundle, key, flags = mt_case(rest, tmp_path)
    else:
        made = VERIFY[rest](tmp_path)
        model, bundle, key, flags = made.model, made.bundle, made.key, made.flags
    code, said = _verify_dir(capsys, model, bundle, key, flags)
    _check(VERIFY_CASES[name], code, said)
    if code == 0:  # the statement lists what the line counts: the model's files, or "." for one file
        on_disk = sorted(p.relative_to(model).as_posix() for p in model.rglob("*") if p.is_file())
        signed = ["."] if model.is_file() else [n for n in on_disk if n not in ("ignore-me", "extra.bin")]
        assert _listed(bundle) == signed or (model.is_file() and _listed(bundle) == [model.name])


# -- roundtrip cases: ocibridge signs, both verify ------------------------------------------------
def _library_verify(model: Path, public: Path, bundle: Path, ignored: tuple[str, ...], unsigned: bool) -> None:
    hashing = model_signing.hashing.Config().set_ignored_paths(paths=[model / p for p in ignored] + [bundle])
    config_ = model_signing.verifying.Config().use_elliptic_key_verifier(public_key=public).set_hashing_config(
        hashing).set_ignore_unsigned_files(unsigned)
    config_.verify(model, bundle)


def _suite_checks(bundle: Path) -> list[str]:
    """What a conformance suite asserts of every bundle a client signs with a key."""
    doc = json.loads(bundle.read_text())
    assert doc["mediaType"] == "application/vnd.dev.sigstore.bundle.v0.3+json"
    assert "publicKey" in doc["verificationMaterial"]
    assert doc["dsseEnvelope"]["payloadType"] == "application/vnd.in-toto+json"
    statement = statement_of(bundle)
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["predicateType"] == "https://model_signing/signature/v1.0"
    (subject,) = statement["subject"]
    assert subject["name"]
    serialization = statement["predicate"]["serialization"]
    assert serialization["method"] == "files" and serialization["hash_type"] == "sha256"
    assert serialization["allow_symlinks"] is False and "shard_size" not in serialization
    resources = statement["predicate"]["resources"]
    names = [r["name"] for r in resources]
    assert names == sorted(names)
    for r in resources:
        assert r["algorithm"] == "sha256" and not r["name"].startswith("/") and "../" not in r["name"]
    root = hashlib.sha256(b"".join(bytes.fromhex(r["digest"]) for r in resources)).hexdigest()
    assert subject["digest"]["sha256"] == root
    return names


@pytest.mark.parametrize("name", sorted(ROUNDTRIP_CASES))
def test_roundtrip_case(name, tmp_path, capsys):
    case = ROUNDTRIPS[name]
    model = case.lay_out(tmp_path)
    private, public = case.keys(tmp_path)
    ref = f"oci:{tmp_path}/store:v1"
    excluded = [arg for path in case.ignore_paths for arg in ("--exclude", path)]
    code, said = _run(capsys, ["push", str(model), ref, "-q", *excluded])
    if code == 0:
        code, said = _run(capsys, ["sign", ref, "--key", str(private), "--form", "oms"])
    outcome = ROUNDTRIP_CASES[name]
    if code != 0:  # refused while signing
        _check(outcome, code, said)
        return
    out = tmp_path / "pulled"
    code, said = _run(capsys, ["pull", ref, str(out), "-q", "--verify-key", str(public), "--with-signatures"])
    assert code == 0, said
    bundle = out / "model.sig" if case.sig_inside else tmp_path / "bundle.sig"
    if not case.sig_inside:
        bundle.write_bytes((out / "model.sig").read_bytes())
    names = _suite_checks(bundle)
    checked = out if case.sig_inside else model
    if case.ignore_unsigned:
        (checked / "injected.bin").write_text("injected after signing\n")
    flags = [a for p in case.ignore_paths for a in ("--ignore-paths", p)]
    flags += ["--ignore-unsigned-files"] if case.ignore_unsigned else []
    _check(outcome, *_verify_dir(capsys, checked, bundle, public, flags))
    if outcome[0] != VERIFIES:  # refused when verified: model_signing refuses it too
        with pytest.raises(ValueError):
            _library_verify(checked, public, bundle, case.ignore_paths, case.ignore_unsigned)
        return
    assert names == sorted(case.signed)
    _library_verify(checked, public, bundle, case.ignore_paths, case.ignore_unsigned)
    if "deterministic" in name:
        code, said = _run(capsys, ["sign", ref, "--key", str(private), "--form", "oms", "--json"])
        assert code == 0 and json.loads(said)["unchanged"] == ["oms"]
