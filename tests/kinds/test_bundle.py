"""Air-gap bundles: ``save`` several models (with their signatures) into one reproducible file,
``load`` them into another registry or a layout, and refuse a hostile bundle without writing."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
from signing_keys import key_pair
from support.cli_run import digest_of

from ocibridge.cli import main


def _model(root: Path, name: str, weights: bytes) -> Path:
    model = root / name
    model.mkdir()
    (model / "weights.bin").write_bytes(weights)
    (model / "config.json").write_text(json.dumps({"name": name}))
    return model


@pytest.fixture
def two_signed_models(registry, unique_repo, tmp_path, capsys):
    key, pub = key_pair(tmp_path / "keys")
    refs = []
    for name, weights in (("a", b"a" * 40_000), ("b", b"b" * 30_000)):
        ref = f"{registry.host}/{unique_repo}/{name}:v1"
        assert main(["push", "-q", str(_model(tmp_path, name, weights)), ref]) == 0
        assert main(["sign", ref, "--key", str(key)]) == 0
        refs.append(ref)
    capsys.readouterr()
    return refs, pub


def test_save_is_reproducible_and_load_keeps_names_digests_and_signatures(
        registry, unique_repo, two_signed_models, tmp_path, capsys):
    refs, pub = two_signed_models
    first, second = tmp_path / "one.tar", tmp_path / "two.tar"
    assert main(["save", *refs, "-o", str(first), "--verify-key", str(pub)]) == 0
    assert main(["save", *refs, "-o", str(second)]) == 0
    assert first.read_bytes() == second.read_bytes()  # same models, same bytes
    capsys.readouterr()

    assert main(["load", "--list", str(first), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["models"]
    assert [m["reference"] for m in listed] == refs

    prefix = f"{registry.host}/site-{unique_repo}"
    assert main(["load", str(first), prefix, "--json"]) == 0
    loaded = json.loads(capsys.readouterr().out)
    assert loaded["signatures"] >= 2  # each model's signature came along
    for ref, entry in zip(refs, listed, strict=True):
        moved = f"{prefix}/{ref.split('/', 1)[1]}"
        assert digest_of(capsys, moved) == entry["digest"]
        capsys.readouterr()
        assert main(["verify", moved, "--key", str(pub)]) == 0  # the signature verifies there


def test_a_bundle_loads_into_a_layout_and_skopeo_reads_it(two_signed_models, tmp_path, capsys):
    refs, _ = two_signed_models
    bundle = tmp_path / "b.tar"
    assert main(["save", refs[0], "-o", str(bundle)]) == 0
    assert main(["load", str(bundle), f"oci:{tmp_path}/site"]) == 0
    capsys.readouterr()
    assert main(["pull", "-q", f"oci:{tmp_path}/site:v1", str(tmp_path / "files")]) == 0
    assert (tmp_path / "files" / "weights.bin").read_bytes() == b"a" * 40_000
    skopeo = shutil.which("skopeo")
    assert skopeo, "skopeo is installed by scripts/test"
    done = subprocess.run([skopeo, "copy", "--quiet", f"oci-archive:{bundle}:m0", f"oci:{tmp_path}/by-skopeo:m0"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    index = json.loads((tmp_path / "by-skopeo" / "index.json").read_text())
    with tarfile.open(bundle) as tar:
        listed = json.loads(tar.extractfile("index.json").read())  # type: ignore[union-attr]
    assert index["manifests"][0]["digest"] in {m["digest"] for m in listed["manifests"]}


def test_save_with_verify_key_refuses_an_unsigned_model_and_writes_nothing(registry, unique_repo, tmp_path, capsys):
    _, pub = key_pair(tmp_path / "keys")
    ref = f"{registry.host}/{unique_repo}/unsigned:v1"
    assert main(["push", "-q", str(_model(tmp_path, "u", b"u" * 1000)), ref]) == 0
    capsys.readouterr()
    out = tmp_path / "b.tar"
    assert main(["save", ref, "-o", str(out), "--verify-key", str(pub)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not out.exists()
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tar") or "bundle" in p.name]


def _hostile(path: Path, entries: list[tuple[tarfile.TarInfo, bytes]]) -> Path:
    with tarfile.open(path, "w") as tar:
        for info, data in entries:
            info.size = len(data) if info.isfile() else 0
            tar.addfile(info, io.BytesIO(data) if info.isfile() else None)
    return path


def _file(name: str) -> tarfile.TarInfo:
    return tarfile.TarInfo(name)


def _link(name: str, target: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = tarfile.SYMTYPE, target
    return info


def _good_parts(tmp_path: Path, capsys) -> dict[str, bytes]:
    model = _model(tmp_path, "g", b"g" * 500)
    assert main(["push", "-q", str(model), f"oci:{tmp_path}/src:v1"]) == 0
    bundle = tmp_path / "good.tar"
    assert main(["save", f"oci:{tmp_path}/src:v1", "-o", str(bundle)]) == 0
    capsys.readouterr()
    with tarfile.open(bundle) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}  # type: ignore[union-attr]


@pytest.mark.parametrize("attack", ["escape", "symlink", "absolute", "bad-blob", "foreign-file", "no-listing",
                                    "lying-listing", "twice"])
def test_a_hostile_bundle_is_one_line_and_writes_nothing(attack, tmp_path, capsys):
    parts = _good_parts(tmp_path, capsys)
    blob = max((n for n in parts if n.startswith("blobs/")), key=lambda n: len(parts[n]))  # the weights
    entries = [(_file(n), d) for n, d in sorted(parts.items())]
    if attack == "escape":
        entries.append((_file("blobs/sha256/../../../../escaped"), b"x"))
    elif attack == "symlink":
        entries.insert(0, (_link("blobs/sha256/" + "0" * 64, "/etc/passwd"), b""))
    elif attack == "absolute":
        entries.append((_file("/tmp/absolute-" + hashlib.sha256(str(tmp_path).encode()).hexdigest()), b"x"))
    elif attack == "bad-blob":
        entries = [(_file(n), b"tampered" if n == blob else d) for n, d in sorted(parts.items())]
    elif attack == "foreign-file":
        entries.append((_file("run-me.sh"), b"#!/bin/sh\n"))
    elif attack == "no-listing":
        entries = [(f, d) for f, d in entries if f.name != "ocibridge-bundle.json"]
    elif attack == "lying-listing":
        doc = json.loads(parts["ocibridge-bundle.json"])
        doc["models"][0]["digest"] = "sha256:" + "1" * 64
        entries = [(f, json.dumps(doc).encode() if f.name == "ocibridge-bundle.json" else d) for f, d in entries]
    elif attack == "twice":
        entries.append((_file("index.json"), parts["index.json"]))
    bundle = _hostile(tmp_path / "hostile.tar", entries)
    site = tmp_path / "site"
    assert main(["load", str(bundle), f"oci:{site}"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("ocibridge: error:") and "Traceback" not in err, err
    assert not site.exists()
    assert not Path("/tmp/absolute-" + hashlib.sha256(str(tmp_path).encode()).hexdigest()).exists()
    assert not (tmp_path.parent / "escaped").exists()
