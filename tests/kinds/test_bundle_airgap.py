"""Bundles at the far end: `load FILE` without a prefix fills the local store (where `ls` and
the one name rule find each model), save and load draw progress, and a one-image bundle is
what `podman load -i` reads (podman 4.3 loads single-image archives only; it refuses
non-image artifacts, so the image is the busybox one of tests/k8s/test_modelcar_base.py)."""

from __future__ import annotations

import json
import tarfile

from ocibridge.cli import main
from tests.k8s.test_modelcar_base import push_busybox
from tests.modelgen import make_model


def test_load_without_prefix_fills_the_local_store(tmp_path, capsys, monkeypatch, registry, unique_repo):
    monkeypatch.setenv("OCIBRIDGE_STORE", str(tmp_path / "store"))
    refs = [f"{registry.host}/{unique_repo}/llama:v1", f"{registry.host}/{unique_repo}/tiny:latest"]
    for n, ref in enumerate(refs):
        assert main(["push", "-q", str(make_model(tmp_path / f"m{n}", seed=n)), ref]) == 0
    bundle = tmp_path / "models.tar"
    assert main(["save", *refs, "-o", str(bundle), "--progress", "plain"]) == 0
    err = capsys.readouterr().err
    assert "started" in err  # plain progress: a line per blob
    assert main(["load", str(bundle), "--json", "-q"]) == 0
    loaded = json.loads(capsys.readouterr().out)
    store = tmp_path / "store"
    assert [d.split("@")[0] for d in loaded["destinations"]] == [f"oci:{store}:llama:v1", f"oci:{store}:tiny:latest"]
    assert main(["ls", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {(m["name"], m["tag"]) for m in listed} >= {("llama", "v1"), ("tiny", "latest")}, listed
    assert main(["resolve", "llama:v1"]) == 0  # the one name rule finds it
    assert capsys.readouterr().out.split()[-1] == loaded["destinations"][0].split("@")[1]
    assert main(["pull", "tiny", "-o", str(tmp_path / "pulled"), "-q"]) == 0
    weights = "model.safetensors"
    assert (tmp_path / "pulled" / weights).read_bytes() == (tmp_path / "m1" / weights).read_bytes()


def test_a_one_image_bundle_loads_under_podman(tmp_path, capsys, registry, podman):
    image = push_busybox(registry.host)
    bundle = tmp_path / "busybox.tar"
    assert main(["save", image, "-o", str(bundle), "-q"]) == 0
    capsys.readouterr()
    out = podman.podman("load", "-i", str(bundle))
    assert "Loaded image" in out, out
    loaded = out.strip().splitlines()[-1].split()[-1]
    said = podman.run(loaded, "sh", "-c", "echo hello")
    assert said.strip() == "hello"


def _layout_model(tmp_path, capsys, size: int):
    model = tmp_path / "big"
    model.mkdir()
    (model / "weights.bin").write_bytes(bytes(range(256)) * (size // 256))
    layout = tmp_path / "layout"
    assert main(["push", "-q", str(model), f"oci:{layout}:v1"]) == 0
    capsys.readouterr()
    return layout


def test_save_streams_blobs_from_the_source_without_staging_them(tmp_path, capsys, monkeypatch):
    from ocibridge.api import bundle as api_bundle

    layout = _layout_model(tmp_path, capsys, 3 << 20)
    seen: list[int] = []
    original = api_bundle._write_tar

    def spy(root, planned, out, progress=None):
        seen.extend(p.stat().st_size for p in (root / "blobs" / "sha256").iterdir())
        return original(root, planned, out, progress)

    monkeypatch.setattr(api_bundle, "_write_tar", spy)
    out = tmp_path / "out" / "b.tar"
    out.parent.mkdir()
    assert main(["save", f"oci:{layout}:v1", "-o", str(out), "-q"]) == 0
    assert seen and max(seen) < 64 * 1024  # manifests only: the 3 MiB weights were never staged
    with tarfile.open(out) as tar:
        names = tar.getnames()
        big = [m for m in tar.getmembers() if m.size >= 3 << 20]
    assert len(big) == 1 and names.index(big[0].name) < names.index("index.json")  # blobs first
    assert names[-3:] == ["index.json", "oci-layout", "ocibridge-bundle.json"]


def test_a_blob_that_is_not_what_it_says_stops_save_and_leaves_nothing(tmp_path, capsys):
    layout = _layout_model(tmp_path, capsys, 1 << 20)
    blob = max((layout / "blobs" / "sha256").iterdir(), key=lambda p: p.stat().st_size)
    data = bytearray(blob.read_bytes())
    data[-1] ^= 0xFF  # same size, other bytes
    blob.chmod(0o644)
    blob.write_bytes(bytes(data))
    out = tmp_path / "out"
    out.mkdir()
    assert main(["save", f"oci:{layout}:v1", "-o", str(out / "b.tar"), "-q"]) == 1
    err = capsys.readouterr().err
    assert "the bundle is not written" in err and "Traceback" not in err
    assert list(out.iterdir()) == []  # no partial output, no staging directory left
