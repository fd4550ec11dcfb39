"""Issue 63's everyday edges on the command line, each run as a user runs it (``python -m
ocibridge`` as a process): a registry repository or an Ollama model that is not there (item 5),
what ``ls`` shows of a layout another tool wrote (item 7), the extras a recipe needs (item 8), Docker
Model Runner's older weight media types read as weights (item 11)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from support.data import data

from ocibridge.cli import main
from ocibridge.stores.layout import LayoutStore
from tests.modelgen import make_model
from tests.support.fixtures import new_repo


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ocibridge", *args], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ), check=False)


def _rows(out: str) -> list[dict[str, str]]:
    head, *rows = out.splitlines()
    names = head.split()
    return [dict(zip(names, re.split(r"\s{2,}", row), strict=True)) for row in rows]


def test_ls_of_a_modelkit_layout_shows_its_name_and_its_tag():
    """kit names a layout's entry ``tiny-llama:latest-tar`` (REPOSITORY:TAG): ``ls oci:DIR``
    showed NAME ``-`` and that whole text as the TAG. It now shows the name and the tag apart,
    as the local store's NAME:TAG are (and ``--json`` keeps the stored name and the Kitfile's)."""
    layout = data("kitops", "kit-latest-tar")
    done = run("ls", f"oci:{layout}")
    assert done.returncode == 0, done.stderr
    [row] = _rows(done.stdout)
    assert (row["NAME"], row["TAG"], row["FAMILY"]) == ("tiny-llama", "latest-tar", "modelkit"), done.stdout
    [entry] = json.loads(run("ls", f"oci:{layout}", "--json").stdout)
    assert entry["ref"] == "tiny-llama:latest-tar"  # what oci:DIR:REF takes, as skopeo reads it
    assert entry["model"] == "tiny-llama-fixture"  # the Kitfile's package name
    assert run("inspect", f"oci:{layout}:{entry['ref']}").returncode == 0

    docker = run("ls", f"oci:{data('docker-model', 'gguf-dummy-v0.1')}")
    [row] = _rows(docker.stdout)
    assert (row["NAME"], row["TAG"], row["FAMILY"]) == ("docker.io/ai/dummy", "fixture", "docker-model")


# -- item 11: Docker Model Runner's older weight media types ----------------------------------------
OLDER_WEIGHT_TYPES = {"model.safetensors": "application/vnd.cncf.model.weight.v1.safetensors",
                      "model.gguf": "application/vnd.cncf.model.weight.v1.gguf"}


def _relabelled_layout(root: Path) -> str:
    """A ModelPack layout whose raw weight layers carry the older format-named types Docker Model
    Runner wrote (``…weight.v1.gguf``, ``…weight.v1.safetensors``): pushed by ocibridge, then its
    manifest rewritten with plain JSON (the layers' bytes, digests and diffIds are the same)."""
    src = root / "model"
    src.mkdir()
    (src / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    (src / "model.gguf").write_bytes(b"GGUF" + bytes(60))
    (src / "config.json").write_text('{"hidden": 4}\n')
    layout = root / "layout"
    LayoutStore(layout, create=True)  # a REF holding '/' is read after an existing layout's directory
    assert main(["push", str(src), f"oci:{layout}:acme/older:latest", "--media-types", "cncf", "-q"]) == 0  # set-up
    index = json.loads((layout / "index.json").read_text())
    entry = index["manifests"][0]
    blob = layout / "blobs" / "sha256" / entry["digest"].split(":", 1)[1]
    manifest = json.loads(blob.read_bytes())
    for layer in manifest["layers"]:
        path = layer["annotations"]["org.cncf.model.filepath"]
        if path in OLDER_WEIGHT_TYPES:
            assert layer["mediaType"] == "application/vnd.cncf.model.weight.v1.raw"
            layer["mediaType"] = OLDER_WEIGHT_TYPES[path]
    data = json.dumps(manifest).encode()
    digest = hashlib.sha256(data).hexdigest()
    (layout / "blobs" / "sha256" / digest).write_bytes(data)
    entry.update(digest=f"sha256:{digest}", size=len(data))
    (layout / "index.json").write_text(json.dumps(index))
    return f"oci:{layout}:acme/older:latest"


def test_the_older_format_named_weight_types_are_weights_everywhere(tmp_path):
    """Issue 63 item 11: such layers pulled to the right names, but ``inspect`` gave them no
    kind (``-``), ``validate`` refused them and ``convert`` stopped at them."""
    ref = _relabelled_layout(tmp_path)
    info = json.loads(run("inspect", ref, "--json").stdout)
    kinds = {layer["path"]: (layer["kind"], layer["variant"]) for layer in info["layers"]}
    assert kinds == {"model.safetensors": ("weight", "raw"), "model.gguf": ("weight", "raw"),
                     "config.json": ("weight.config", "raw")}, kinds
    text = run("inspect", ref).stdout
    assert all(line.startswith("weight ") for line in text.splitlines() if "weight.v1." in line), text

    valid = run("validate", ref)  # valid, with a word on the older name; --strict holds to the spec's
    assert valid.returncode == 0 and valid.stdout.count("is an older writer's name") == 2, valid.stdout
    assert run("validate", "--strict", ref).returncode == 1

    pulled = run("pull", ref, str(tmp_path / "out"), "-q")
    assert pulled.returncode == 0, pulled.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["config.json", "model.gguf", "model.safetensors"]

    checked = run("k8s", "check", ref, "--runtime", "cri-o", "--json")
    assert checked.returncode == 0, checked.stderr + checked.stdout
    seen = json.loads(checked.stdout)
    assert sorted(f["path"] for f in seen["tree"]) == ["config.json", "model.gguf", "model.safetensors"], seen

    converted = run("convert", "--to", "modelkit", ref, f"oci:{tmp_path / 'kit'}:v1", "-q")
    assert converted.returncode == 0, converted.stderr
    kit = json.loads(run("inspect", f"oci:{tmp_path / 'kit'}:v1", "--json").stdout)
    assert {layer["path"]: layer["kind"] for layer in kit["layers"]}["model.gguf"] == "weight", kit["layers"]


def test_serve_shows_the_older_weight_types_as_weights(tmp_path):
    """The same layout served (``ocibridge serve`` as a process): the model page's file table
    says ``weight`` of those layers, not ``file``."""
    import httpx
    from serving import stop

    from tests.serve.test_serve_cli import start_serve

    ref = _relabelled_layout(tmp_path)
    proc, url = start_serve(ref.rsplit(":", 2)[0], env=dict(os.environ))
    try:
        page = httpx.get(f"{url}/acme/older").text
    finally:
        stop(proc)
    rows = re.findall(r"<tr>(.*?)</tr>", page, flags=re.S)
    for name in OLDER_WEIGHT_TYPES:
        [row] = [r for r in rows if f">{name}<" in r]
        assert ">weight<" in row, row


# -- item 5: a name that is not there ----------------------------------------------------------
def test_pull_of_a_repository_that_is_not_there_says_so_and_names_the_near_ones(registry, tmp_path):
    """``pull REG/acme/typo:latest`` said "manifest not found", as for a missing tag: it now says
    "no such repository", as ``tags`` does, with the registry's nearest names (its catalog)."""

    repo = new_repo("acme")  # acme/<random>: this test's own name
    src = make_model(tmp_path / "m")
    assert main(["push", str(src), f"{registry.host}/{repo}:latest", "-q"]) == 0  # set-up: in this process
    typo = repo[:-1] + ("x" if repo[-1] != "x" else "y")
    missing = run("pull", f"{registry.host}/{typo}:latest", str(tmp_path / "out"))
    assert missing.returncode == 1 and missing.stdout == "", missing
    [line] = missing.stderr.splitlines()
    assert line.startswith(f"ocibridge: error: {registry.host}/{typo}:latest: no such repository"), line
    assert f"{registry.host}/{repo}" in line and "manifest not found" not in line, line
    assert not (tmp_path / "out").exists()
    # a tag missing from a repository that is there is still told as a missing tag
    no_tag = run("pull", f"{registry.host}/{repo}:v9", str(tmp_path / "out"))
    assert no_tag.returncode == 1 and "no such repository" not in no_tag.stderr, no_tag.stderr
    assert "v9" in no_tag.stderr


def test_push_of_an_ollama_model_that_is_not_there_lists_the_models_that_are(tmp_path):
    from tests.ollama_fixtures import gguf_store

    models = tmp_path / "ollama"
    gguf_store(models, tmp_path, model="tiny-safetensors")
    env = {**os.environ, "OLLAMA_MODELS": str(models)}
    done = subprocess.run([sys.executable, "-m", "ocibridge", "push", "ollama:tiny", f"oci:{tmp_path / 'out'}:v1"],
                          capture_output=True, text=True, timeout=120, env=env, check=False)
    assert done.returncode == 1, done
    [line] = done.stderr.splitlines()
    assert "ollama:tiny" in line and "no such model" in line and "tiny-safetensors:latest" in line, line
    assert "tags: none" not in line


# -- item 8: the extras a recipe needs ---------------------------------------------------------
ROOT = Path(__file__).resolve().parents[2]
#: what needs an extra: the text of its first use in docs/tasks.md, the extra, a module of it,
#: and a command line that needs it ({reg}: a registry model)
NEEDS_EXTRA = [
    ("ocibridge keygen", "signing", "nacl", ["keygen", "{tmp}/k"]),
    ("ocibridge serve", "serve", "starlette", ["serve", "oci:{tmp}/lay", "--listen", "127.0.0.1:0"]),
    ("--validate", "k8s", "kubernetes_validate", ["k8s", "volume", "{reg}", "--validate=1.33"]),
]
#: ``python -m ocibridge`` with the modules named first made unimportable, as without the extra
WITHOUT = ("import runpy, sys; [sys.modules.__setitem__(m, None) for m in sys.argv.pop(1).split(',')]; "
           "sys.argv[0] = 'ocibridge'; runpy.run_module('ocibridge', run_name='__main__')")


def test_each_extra_is_named_where_tasks_first_uses_it_and_by_the_command_without_it(registry, tmp_path):
    """Issue 63 item 8: the README installs with no extras, then docs/tasks.md used ``keygen``,
    ``serve`` and ``--validate``, each of which needs one. The section of each first use says
    which, in the PyPI and the clone form, and the command run without it names the same extra."""
    tasks = (ROOT / "docs" / "tasks.md").read_text()
    readme = (ROOT / "README.md").read_text()
    fresh = readme[readme.index("## Two commands on a fresh machine"):readme.index("## Using it")]
    ref = f"{registry.host}/{new_repo('extras')}:v1"
    assert run("push", str(make_model(tmp_path / "m")), ref, "-q").returncode == 0
    for first_use, extra, module, argv in NEEDS_EXTRA:
        at = next(i for i, line in enumerate(tasks.splitlines(keepends=True)) if first_use in line
                  and not line.startswith(("`", " ")) and line.lstrip().startswith("ocibridge"))
        before = "".join(tasks.splitlines(keepends=True)[:at])
        section = before[before.rindex("\n## "):]
        assert f"pip install 'ocibridge[{extra}]'" in section, (first_use, section)
        assert f"pip install -e '.[{extra}]'" in section, (first_use, section)
        assert extra in fresh and "-e '.[" in fresh, fresh
        args = [a.format(tmp=tmp_path, reg=ref) for a in argv]
        done = subprocess.run([sys.executable, "-c", WITHOUT, module, *args], capture_output=True, text=True,
                              timeout=120, env={**os.environ, "COSIGN_PASSWORD": "pw"}, check=False)
        assert done.returncode == 1, (args, done)
        [line] = done.stderr.splitlines()
        assert f"pip install 'ocibridge[{extra}]'" in line, line


def test_push_to_a_new_layout_with_a_name_holding_a_slash_splits_as_skopeo_does(tmp_path):
    """``oci:NEW:acme/x:v1`` for a layout not there yet made the folder ``NEW:acme`` holding a layout
    ``x`` tagged ``v1``: the split depended on whether the layout existed. It is now the layout ``NEW``
    holding ``acme/x:v1``, as skopeo reads it, first push or second."""
    model = make_model(tmp_path / "m")
    target = tmp_path / "new"
    for _ in range(2):  # the second push finds the layout the first made, and names the same entry
        done = run("push", "-q", str(model), f"oci:{target}:acme/x:v1")
        assert done.returncode == 0, done.stderr
    assert not list(tmp_path.glob("new:*"))  # no folder named after the text up to the last colon
    index = json.loads((target / "index.json").read_text())
    names = [m["annotations"]["org.opencontainers.image.ref.name"] for m in index["manifests"]]
    assert names == ["acme/x:v1"]
    seen = subprocess.run(["skopeo", "inspect", "--raw", f"oci:{target}:acme/x:v1"], capture_output=True,
                          text=True, timeout=60, check=False)
    assert seen.returncode == 0, seen.stderr
    assert json.loads(seen.stdout)["layers"]  # skopeo found the manifest by that name
