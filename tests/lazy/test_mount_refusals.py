"""What may be mounted is what may be pulled (issue 77): one table of artifacts whose paths pull
refuses (a path twice across raw and tar layers, an absolute path, ``..``, a link out, alone or
through another, a file that is also a directory), each run through ``pull``, ``mount`` (its
own process, the real registry; pull and cat in the test's) and ``cat``: the same one error
line from all three, nothing mounted, no byte read."""

from __future__ import annotations

import io
import json
import tarfile

import pytest
from mounting import mount_env, run
from support.fixtures import new_repo

from ocibridge.cli import main
from ocibridge.lazymount.mounttable import is_mounted
from ocibridge.oci.mediatypes import ANNOTATION_TITLE, OCI_MANIFEST, Family, Kind, Variant, layer_media_type
from ocibridge.oci.models import Descriptor, Manifest
from ocibridge.stores.registry import open_repository

RAW = layer_media_type(Kind.WEIGHT, Variant.RAW)
TAR = layer_media_type(Kind.DOC, Variant.TAR)
CONFIG = Family.CNAI.config_media_type
FILEPATH = Family.CNAI.filepath_key


def raw(path: str, data: bytes) -> tuple[Descriptor, bytes]:
    """A raw layer: one file at ``path`` (as written, never normalised), its bytes the blob's."""
    return Descriptor.for_bytes(RAW, data, annotations={FILEPATH: path, ANNOTATION_TITLE: path}), data


def tar(*members: tuple[str, bytes | str]) -> tuple[Descriptor, bytes]:
    """A tar layer: bytes are a file, a str the target of a symlink."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, body in members:
            info = tarfile.TarInfo(name)
            if isinstance(body, str):
                info.type, info.linkname = tarfile.SYMTYPE, body
                t.addfile(info)
            else:
                info.size, info.mode = len(body), 0o644
                t.addfile(info, io.BytesIO(body))
    data = out.getvalue()
    return Descriptor.for_bytes(TAR, data, annotations={FILEPATH: "docs", ANNOTATION_TITLE: "docs"}), data


#: a raw file every artifact below holds first (that would read, were the artifact mounted)
README = raw("README.md", b"# a model\n")

#: name -> (layers after README, a file to ``cat``, pull's one error line)
CASES: dict[str, tuple[list[tuple[Descriptor, bytes]], str, str]] = {
    "a path twice: two raw layers": (
        [raw("model.bin", b"A" * 1000), raw("model.bin", b"B" * 1000)], "model.bin",
        "duplicate path in artifact: model.bin"),
    "a path twice: ./ and plain": (
        [raw("model.bin", b"A" * 1000), raw("./model.bin", b"B" * 1000)], "model.bin",
        "duplicate path in artifact: model.bin"),
    "a path twice: a raw layer and a tar layer": (
        [raw("model.bin", b"A" * 1000), tar(("model.bin", b"B" * 1000))], "model.bin",
        "duplicate path in artifact: model.bin"),
    "an absolute path": (
        [raw("/etc/evil.bin", b"E" * 1000)], "etc/evil.bin",
        "absolute layer file path '/etc/evil.bin'"),
    "a path that climbs out": (
        [raw("../evil.bin", b"E" * 1000)], "evil.bin",
        "layer file path '../evil.bin' escapes its tree"),
    "an absolute tar entry": (
        [tar(("/etc/evil.bin", b"E" * 1000))], "README.md",
        "absolute tar entry '/etc/evil.bin'"),
    "a link out of the model": (
        [tar(("docs/passwd", "/etc/passwd"))], "README.md",
        "docs/passwd: symlink points outside the model (/etc/passwd)"),
    "a chain of links out of the model": (  # each link stays inside on its own; b through a does not
        [tar(("d/a", ".."), ("d/b", "a/../.."))], "README.md",
        "d/b: symlink points outside the tree (a/../..)"),
    "a file that is also a directory: raw layers": (
        [raw("weights", b"W" * 1000), raw("weights/a.bin", b"A" * 1000)], "weights/a.bin",
        "the artifact holds weights as a file and as a directory"),
    "a file that is also a directory: a raw file, a tar directory": (
        [raw("weights", b"W" * 1000), tar(("weights/a.bin", b"A" * 1000))], "weights",
        "the artifact holds weights as a file and as a directory"),
}


@pytest.fixture(scope="module")
def artifacts(registry) -> dict[str, str]:
    """Every case pushed as it is (no ocibridge push would write these): name -> reference."""
    config = json.dumps({"descriptor": {"name": "x"}, "config": {}, "modelfs": {"type": "layers", "diffIds": []}})
    config_desc = Descriptor.for_bytes(CONFIG, config.encode())
    refs = {}
    for name, (layers, _, _) in CASES.items():
        repo = new_repo("refusals")
        every = [README, *layers]
        body = Manifest(artifactType=Family.CNAI.artifact_type, config=config_desc,
                        layers=[desc for desc, _ in every]).to_json_bytes()
        with open_repository(host=registry.host, repository=repo) as store:
            store.push_blob(config_desc, io.BytesIO(config.encode()))
            for desc, data in every:
                if not store.exists(desc):
                    store.push_blob(desc, io.BytesIO(data))
            store.push_manifest(Descriptor.for_bytes(OCI_MANIFEST, body), body, "v1")
        refs[name] = f"{registry.host}/{repo}:v1"
    return refs


@pytest.mark.parametrize("case", CASES, ids=CASES)
def test_mount_and_cat_refuse_what_pull_refuses_in_the_same_line(artifacts, tmp_path, capsys, case):
    _, path, line = CASES[case]
    ref = artifacts[case]
    env = mount_env(tmp_path / "env")
    said = {}
    pulled = main(["pull", ref, str(tmp_path / "pulled"), "-q"])
    said["pull"] = (pulled, capsys.readouterr().err)
    assert not (tmp_path / "pulled").exists()
    where = tmp_path / "mnt"
    mounted = run(["mount", ref, str(where)], env, check=False)
    said["mount"] = (mounted.returncode, mounted.stderr)
    if is_mounted(where):  # (what the mount must not do: undone, then failed below)
        run(["umount", str(where)], env)
        said["mount"] = (mounted.returncode, "mounted!")
    assert not (tmp_path / "mnt").exists()  # nothing mounted, no directory left
    cat = main(["cat", ref, path])
    out, err = capsys.readouterr()
    said["cat"] = (cat, err)
    assert out == ""  # not a byte
    assert said == dict.fromkeys(("pull", "mount", "cat"), (1, f"ocibridge: error: {line}\n"))
