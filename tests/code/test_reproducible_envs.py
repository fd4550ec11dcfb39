"""Same input, same digest, whatever is installed (issue 32).

Two fresh virtualenvs run this checkout's ocibridge: one sees every optional extra (the [test]
set: gguf, sigstore, PyNaCl, the vendor SDKs, numpy), the other only the runtime dependencies
pyproject.toml declares (and theirs). Each pushes the same sources to an OCI layout; the manifest
digests must agree. Installing a wheel with pip took 30-90 s on a shared machine (the build
backend and the dependency resolution); linking the already installed distributions takes about
1 s, so the venvs are made that way, once per session.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import sysconfig
import time
from importlib import metadata
from pathlib import Path

import pytest
import tomllib

from tests.modelgen import make_model
from tests.ollama_fixtures import gguf_store, write_gguf

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parents[1] / "data"
OPTIONAL = ("gguf", "sigstore", "nacl", "mlsteam_model_sdk", "cartonml", "numpy")


def _venv(root: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    return root / "bin" / "python"


def _site(python: Path) -> Path:
    out = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         check=True, capture_output=True, text=True)
    return Path(out.stdout.strip())


def _declared_closure() -> set[str]:
    """The runtime dependencies pyproject.toml declares, and theirs, as installed here (no extras)."""
    from packaging.requirements import Requirement

    wanted = [Requirement(r) for r in tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]]
    seen: set[str] = set()
    while wanted:
        req = wanted.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        name = metadata.distribution(req.name).metadata["Name"]
        if name.lower() in seen:
            continue
        seen.add(name.lower())
        wanted += [Requirement(r) for r in metadata.distribution(name).requires or []]
    return seen


def _link_distributions(names: set[str], into: Path) -> None:
    """Every file of these installed distributions, linked into ``into`` (a site directory)."""
    for name in names:
        dist = metadata.distribution(name)
        for file in dist.files or []:
            source = Path(str(dist.locate_file(file))).resolve()
            if not source.is_file() or file.parts[0] == ".." or file.suffix == ".pyc":
                continue
            target = into / file
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists():
                target.symlink_to(source)


@pytest.fixture(scope="session")
def two_venvs(tmp_path_factory) -> dict[str, Path]:
    """``full`` (every optional extra importable) and ``none`` (declared dependencies only), both
    running this checkout's ocibridge. No pip run: a venv without pip is made in ~1 s, and the
    packages come from this test run's environment, linked (``none``: the declared closure only)."""
    started = time.monotonic()
    root = tmp_path_factory.mktemp("venvs")
    full = _venv(root / "full")
    (_site(full) / "ocibridge-env.pth").write_text(f"{REPO}\n{sysconfig.get_paths()['purelib']}\n")
    none = _venv(root / "none")
    deps = root / "declared"
    _link_distributions(_declared_closure(), deps)
    (_site(none) / "ocibridge-env.pth").write_text(f"{REPO}\n{deps}\n")
    elapsed = time.monotonic() - started
    print(f"two venvs made in {elapsed:.1f} s")
    return {"full": full, "none": none}


def _importable(python: Path, module: str) -> bool:
    return subprocess.run([str(python), "-c", f"import {module}"], capture_output=True).returncode == 0


def _safetensors(path: Path) -> Path:
    """A real safetensors file: length, JSON header, F16 and F32 tensor data."""
    header = {"__metadata__": {"format": "pt"},
              "a": {"dtype": "F16", "shape": [4, 8], "data_offsets": [0, 64]},
              "b": {"dtype": "F32", "shape": [8], "data_offsets": [64, 96]}}
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(range(96)))
    return path


@pytest.fixture(scope="session")
def sources(tmp_path_factory) -> dict[str, tuple[str, dict[str, str]]]:
    """Kind → (SOURCE argument, extra environment) for every source kind ocibridge reads."""
    from tests.kinds.test_mlsteam import make_sdk_archive_v2024

    root = tmp_path_factory.mktemp("sources")
    plain = make_model(root / "plain")
    st = root / "safetensors"
    st.mkdir()
    _safetensors(st / "model.safetensors")
    (st / "config.json").write_text('{"model_type": "llama", "architectures": ["LlamaForCausalLM"]}\n')
    gg = root / "gguf"
    gg.mkdir()
    write_gguf(gg / "model.gguf")
    gg_untyped = root / "gguf-untyped"  # no general.file_type: the dominant tensor type names it
    gg_untyped.mkdir()
    write_gguf(gg_untyped / "model.gguf", file_type=None)
    ollama_root = root / "ollama"
    gguf_store(ollama_root, root)
    archive = make_sdk_archive_v2024(root / "mlsteam")
    kit = make_model(root / "kitfile")  # a top-level Kitfile: read with PyYAML, a declared dependency
    (kit / "Kitfile").write_text("manifestVersion: 1.0.0\npackage:\n  name: kit\nmodel:\n  path: model.safetensors\n"
                                 "docs:\n  - path: README.md\n")
    return {
        "kitfile": (str(kit), {}),
        "directory": (str(plain), {}),
        "safetensors": (str(st), {}),
        "gguf": (str(gg), {}),
        "gguf-untyped": (str(gg_untyped), {}),
        "carton": (str(DATA / "carton" / "python_runner_doubler.carton"), {}),
        "mlarchive": (str(archive), {}),
        "ollama": ("ollama:tiny", {"OLLAMA_MODELS": str(ollama_root)}),
    }


def _push(python: Path, source: str, env: dict[str, str], layout: Path) -> str:
    layout.parent.mkdir(parents=True, exist_ok=True)  # a layout is made in a directory that exists
    run_env = {**os.environ, **env, "XDG_CACHE_HOME": str(layout.parent / "cache"),
               "XDG_DATA_HOME": str(layout.parent / "data")}
    out = subprocess.run([str(python), "-m", "ocibridge", "push", source, f"oci:{layout}:v1"], env=run_env,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    index = json.loads((layout / "index.json").read_text())
    return str(index["manifests"][0]["digest"])


def test_the_two_venvs_differ_in_the_optional_packages_only(two_venvs):
    """The comparison means something only if one venv has the extras and the other has none."""
    for module in OPTIONAL:
        assert _importable(two_venvs["full"], module), module
        assert not _importable(two_venvs["none"], module), module
    assert _importable(two_venvs["none"], "ocibridge") and _importable(two_venvs["none"], "yaml")


@pytest.mark.parametrize("kind", ["directory", "kitfile", "safetensors", "gguf", "gguf-untyped", "carton",
                                  "mlarchive", "ollama"])
def test_same_digest_with_and_without_the_optional_extras(two_venvs, sources, kind, tmp_path):
    source, env = sources[kind]
    digests = {name: _push(python, source, env, tmp_path / name / "layout")
               for name, python in two_venvs.items()}
    assert digests["full"] == digests["none"], digests
    if kind == "kitfile":  # read as the build file after a plain install (PyYAML is declared)
        layout = tmp_path / "none" / "layout"
        manifest = json.loads((layout / "blobs" / "sha256" / digests["none"].split(":")[1]).read_bytes())
        assert "ml.kitops.modelkit.kitfile" in manifest["annotations"]
    if kind.startswith("gguf"):  # the field that used to depend on the `gguf` package
        layout = tmp_path / "none" / "layout"
        manifest = json.loads((layout / "blobs" / "sha256" / digests["none"].split(":")[1]).read_bytes())
        config = json.loads((layout / "blobs" / "sha256" / manifest["config"]["digest"].split(":")[1]).read_bytes())
        assert config["config"]["quantization"] == "F16"  # file type, else the dominant tensor type
    shutil.rmtree(tmp_path, ignore_errors=True)
