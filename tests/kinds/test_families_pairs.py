"""Every ordered pair of model families, A -> B -> A, each A built the way its own tool builds it.

Where B can carry A's origin (ModelPack both names, ModelKit, Docker model, and ModelCar images
of ours, which keep their ModelPack form beside them) the way back gives A's manifest digest.
Where it cannot (into Ollama, which has no annotations; out of a ModelCar built by another
tool, whose base image no model family holds) the report lists what was lost, field by field,
and the test names each field. Files pulled from B are byte-identical to A's in every case;
Ollama keeps the GGUF (under the name of its role) and reports the rest.
"""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path

import pytest
from support.data import data

from ocibridge import PushOptions
from ocibridge.api import model_ops as api
from ocibridge.api.convert import convert
from ocibridge.kinds import WriteOptions, identify
from ocibridge.oci.mediatypes import Family
from ocibridge.places.locate import open_target as open_store_target
from tests.modelcar_images import kserve_modelcar
from tests.modelgen import tree
from tests.ollama_fixtures import gguf_store, write_gguf

KIT_DIGEST = "sha256:9e968bb72078b3787d2362f20657d1d69d6aeda467bfacf0ed04d65423e480ea"
DOCKER_DIGEST = "sha256:2475c4c8713d635fc76ae73aea2a56cad511da0f717eac7614b8b5aa0505b36c"
FAMILIES = {  # key as a conversion reports it → (--to, --media-types)
    "modelpack-cnai": ("modelpack", Family.CNAI),
    "modelpack-cncf": ("modelpack", Family.CNCF),
    "modelkit": ("modelkit", Family.CNAI),
    "docker-model": ("docker-model", Family.CNAI),
    "modelcar": ("modelcar", Family.CNAI),
    "ollama": ("ollama", Family.CNAI),
}
IMAGE = {"image.base", "image.config.Env", "image.config.Cmd"}  # a KServe image's, in any target
#: a GGUF model's config fields, which an Ollama manifest has no place for
GGUF_CONFIG = {"config.architecture", "config.format", "config.paramSize", "config.quantization"}
#: what each source loses on its way into Ollama (nothing else loses anything), field by field:
#: files it has no layer for, and those it keeps under the name of their role (tiny.gguf is
#: model.gguf there, LICENSE is license)
INTO_OLLAMA = {
    "modelpack-cnai": {"file README.md", "file LICENSE", "file tiny.gguf", "descriptor.name"} | GGUF_CONFIG,
    "modelkit": {"kitfile.model.description", "kitfile.model.framework", "kitfile.model.license",
                 "kitfile.model.name", "kitfile.model.parameters", "kitfile.model.version",
                 "kitfile.package.license", "file model/chat_template.jinja", "file src", "file data/eval.jsonl",
                 "file README.md", "file model/tiny-llama.gguf", "descriptor.createdAt", "descriptor.authors",
                 "descriptor.name", "descriptor.version", "descriptor.licenses", "descriptor.title",
                 "descriptor.description", "config.format"},
    "docker-model": {"docker.context_size", "docker.gguf", "docker.size", "file template.jinja",
                     "file dummy.mmproj", "file dummy.gguf", "file license.txt", "descriptor.createdAt",
                     "descriptor.family"} | GGUF_CONFIG,
    "modelcar": IMAGE | {"file README.md", "file LICENSE", "file tiny.gguf"} | GGUF_CONFIG,
}
INTO_OLLAMA["modelpack-cncf"] = INTO_OLLAMA["modelpack-cnai"]


def _gguf_model(tmp: Path) -> Path:
    """A model directory as a user has it: a GGUF, its licence and model card."""
    root = tmp / "tiny"
    root.mkdir()
    write_gguf(root / "tiny.gguf")
    (root / "LICENSE").write_text("MIT License\n")
    (root / "README.md").write_text("# tiny\n")
    return root


def _source(key: str, tmp: Path) -> str:
    if key.startswith("modelpack-"):  # as modctl / ocibridge push build it: raw layers
        from ocibridge.model.builder import BuildOptions

        ref = f"oci:{tmp / key}:v1"
        api.push(str(_gguf_model(tmp)), ref, options=PushOptions(build=BuildOptions(family=FAMILIES[key][1])))
        return ref
    if key == "modelkit":  # kit pack (tests/data/kitops/PROVENANCE.md)
        shutil.copytree(data("kitops", "kit-latest-tar"), tmp / key)
        return f"oci:{tmp / key}@{KIT_DIGEST}"
    if key == "docker-model":  # docker model package (tests/data/docker-model/PROVENANCE.md)
        shutil.copytree(data("docker-model", "gguf-dummy-v0.1"), tmp / key)
        return f"oci:{tmp / key}@{DOCKER_DIGEST}"
    if key == "modelcar":  # KServe's FROM busybox + COPY model /models (tests/modelcar_images.py)
        model = _gguf_model(tmp)
        files = {p.name: (p.read_bytes(), 0o644) for p in model.iterdir()}
        return kserve_modelcar(tmp / key, files)
    assert key == "ollama"  # ollama pull's store layout (tests/ollama_fixtures.py)
    gguf_store(tmp / "ollama-models", tmp)
    return "ollama:tiny"


def _dest(key: str, tmp: Path, name: str) -> str:
    return f"ollama:{name}" if key == "ollama" else f"oci:{tmp / 'out'}:{name}"


def _convert(src: str, dst: str, key: str):
    to, media = FAMILIES[key]
    return convert(src, dst, to, options=WriteOptions(media_types=media))


def _digest(ref: str) -> str:
    target = open_store_target(ref)
    return target.store.resolve(target.reference).digest


def _files(ref: str, out: Path) -> dict:
    api.pull(ref, str(out))
    return tree(out)


def _lost(result) -> set[str]:
    return {loss.field for loss in result.conversion.losses if not loss.kept}


@pytest.mark.parametrize("a,b", [(a, b) for a, b in itertools.product(FAMILIES, FAMILIES) if a != b])
def test_every_pair_round_trips_or_reports_its_losses(tmp_path, monkeypatch, a, b):
    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path / "ollama-models"))
    src = _source(a, tmp_path)
    target = open_store_target(src)
    assert identify(target.store, target.reference).family.key(
        identify(target.store, target.reference).manifest, WriteOptions()) == a
    there = _convert(src, _dest(b, tmp_path, "there"), b)
    back = _convert(_dest(b, tmp_path, "there"), _dest(a, tmp_path, "back"), a)
    assert (there.conversion.source_family, there.conversion.target_family) == (a, b)
    assert not _lost(back)  # the way back never loses: whatever is lost went on the way there
    # one layer is rewritten in all 30: the kit's model/ tar, unpacked so Ollama has its GGUF
    unpacked = {"layers[model/tiny-llama.gguf].tar"} if (a, b) == ("modelkit", "ollama") else set()
    assert {change.field for change in there.conversion.changes} == unpacked
    original = _files(src, tmp_path / "a")
    in_b = _files(_dest(b, tmp_path, "there"), tmp_path / "b")
    returned = _files(_dest(a, tmp_path, "back"), tmp_path / "c")
    if b == "ollama" and a != "ollama":
        assert _lost(there) == INTO_OLLAMA[a]
        assert _digest(_dest(a, tmp_path, "back")) != _digest(src)
        gguf = {body for path, (body, _) in original.items() if path.endswith(".gguf") and "mmproj" not in path}
        assert {in_b["model.gguf"][0]} <= gguf  # the model itself, byte for byte
        assert returned == in_b
    elif a == "modelcar":  # a KServe image: the files come back, the base image does not
        assert _lost(there) == IMAGE
        assert in_b == original and returned == original
    else:
        assert not _lost(there)
        assert _digest(_dest(a, tmp_path, "back")) == _digest(src)
        assert in_b == original and returned == original
