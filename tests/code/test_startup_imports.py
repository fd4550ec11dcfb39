"""``--help`` and ``--version`` load neither pydantic nor httpx (their import is most of a
command's start-up time; the time itself is measured by bench/startup.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.entry_probe import run_entry

REPO_ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import sys
from ocibridge.cli import main
try:
    main({args!r})
except SystemExit:
    pass
heavy = sorted(m for m in ("pydantic", "httpx", "httpcore", "ocibridge.api.model_ops") if m in sys.modules)
print("HEAVY:" + ",".join(heavy), file=sys.stderr)
"""


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["push", "--help"], ["pull", "--help"],
                                  ["convert", "--help"], ["mirror", "--help"]])
def test_help_and_version_import_nothing_heavy(args):
    done = subprocess.run([sys.executable, "-c", PROBE.format(args=args)], cwd=REPO_ROOT,
                          capture_output=True, text=True, check=True)
    assert done.stderr.strip().splitlines()[-1] == "HEAVY:", done.stderr
    assert done.stdout  # the help or the version was printed


def test_the_package_names_still_resolve():
    import ocibridge

    assert callable(ocibridge.push) and ocibridge.Kind.WEIGHT.value
    assert sorted(ocibridge.__all__) == sorted(ocibridge._HOMES)


COPY_PROBE = """
import sys
from ocibridge.cli import main
code = main({args!r})
heavy = sorted(m for m in ("pydantic", "ocibridge.api.model_ops", "ocibridge.model.builder", "ocibridge.kinds.dispatch",
                           "h2", "cryptography") if m in sys.modules)
print("HEAVY:" + ",".join(heavy), file=sys.stderr)
sys.exit(code)
"""


def test_copy_between_registry_repositories_loads_no_pydantic(registry, unique_repo, tmp_path):
    """A copy needs the copy, the two stores and httpx; not pydantic, the modules of push and
    pull, h2 (HTTP/1.1 only) or the signature verifier (no --verify-key)."""
    from ocibridge.cli import main

    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "w.bin").write_bytes(b"weights" * 100)
    src = f"{registry.host}/{unique_repo}:v1"
    assert main(["push", str(tmp_path / "m"), src, "-q"]) == 0
    for dst in (f"{registry.host}/{unique_repo}-copy:v1", f"oci:{tmp_path / 'layout'}:v1"):
        done = subprocess.run([sys.executable, "-c", COPY_PROBE.format(args=["copy", src, dst, "-q", "--json"])],
                              cwd=REPO_ROOT, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert '"blobsCopied"' in done.stdout  # it did copy
        assert done.stderr.strip().splitlines()[-1] == "HEAVY:", (dst, done.stderr)


@pytest.mark.parametrize("line", [["copy", "a", "b", "-r", "--concurrency", "2"], ["cp", "a", "b"],
                                  ["ls", "--json"], ["k8s", "check", "r", "--runtime", "containerd"],
                                  ["push", "src", "--format", "directory", "dst"]])
def test_building_only_the_command_run_parses_and_lists_alike(line):
    """main() builds the parser of the command the line names only (the others are listed
    from the table by name and help): the same namespace, the same main --help, the others
    left unbuilt."""
    from ocibridge.cli.help import subcommands
    from ocibridge.cli.parser import _Unbuilt, build_parser

    full, lazy = build_parser(), build_parser(lazy=True)
    assert vars(lazy.parse_args(line)) == vars(full.parse_args(line))
    assert lazy.format_help() == full.format_help()
    built = {name for name, p in subcommands(lazy).items() if not isinstance(p, _Unbuilt)}
    assert built and all(name.split()[0] in (line[0], {"cp": "copy", "ls": "list"}.get(line[0])) for name in built)


PULL_PROBE = """
import sys
from ocibridge.cli import main
code = main({args!r})
heavy = sorted(m for m in sys.modules if m == "pydantic" or any(m == u or m.startswith(u + ".") for u in {unused!r}))
print("HEAVY:" + ",".join(heavy), file=sys.stderr)
sys.exit(code)
"""
#: what a pull of a ModelPack artifact into a directory has no use for: building (the builder,
#: its packing and the config model with pydantic), reading a directory (classify), the other
#: formats (archives, Ollama) and the other families with their conversion; (issue 91) the
#: other calls' results, login's and the model cache's modules, a registry's upload and tag
#: list modules, a push's sample index, the chunk modules with nothing here to diff against,
#: the policy API without --verify-key/--policy, the neutral form of a conversion, and the tar
#: layers' and indexes' readers (tarfile) for an artifact of raw files, the typo suggester (difflib)
PULL_UNUSED = ("ocibridge.model.builder", "ocibridge.model.packing", "ocibridge.model.config",
               "ocibridge.model.classify", "ocibridge.kinds.carton", "ocibridge.kinds.mlsteam",
               "ocibridge.kinds.ollama", "ocibridge.kinds.kitops.family", "ocibridge.kinds.docker.family",
               "ocibridge.kinds.modelcar.family", "ocibridge.kinds.ollama.family", "ocibridge.kinds.conversion",
               "ocibridge.k8s", "ocibridge.transfer.results", "ocibridge.api.auth", "ocibridge.api.cache_ops",
               "ocibridge.kinds.hf", "ocibridge.stores.registry.upload", "ocibridge.stores.registry.streamupload",
               "ocibridge.stores.registry.taglist", "ocibridge.transfer.askfirst", "ocibridge.transfer.sampleindex",
               "ocibridge.chunks.chunktable", "ocibridge.chunks.delta", "ocibridge.chunks.chunkindex",
               "ocibridge.cache.chunks", "ocibridge.api.policy", "ocibridge.kinds.neutral", "ocibridge.kinds.origin",
               "ocibridge.layers", "ocibridge.model.changesets", "ocibridge.model.index", "tarfile", "difflib")


def test_pull_of_a_modelpack_artifact_into_a_directory_loads_no_pydantic(registry, unique_repo, tmp_path):
    """A pull into a directory needs the store, the family detection and the extractor; not
    pydantic nor the modules that build, export into other formats or convert other families
    (they are loaded when such a family or format is met)."""
    from ocibridge.cli import main

    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "w.bin").write_bytes(b"weights" * 100)
    src = f"{registry.host}/{unique_repo}:v1"
    layout = f"oci:{tmp_path / 'layout'}:v1"
    assert main(["push", str(tmp_path / "m"), src, "-q"]) == 0
    assert main(["push", str(tmp_path / "m"), layout, "-q"]) == 0
    for n, ref in enumerate((src, layout)):
        out = tmp_path / f"out{n}"
        args = ["pull", ref, str(out), "-q", "--json"]
        done = subprocess.run([sys.executable, "-c", PULL_PROBE.format(args=args, unused=PULL_UNUSED)],
                              cwd=REPO_ROOT, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert (out / "w.bin").read_bytes() == b"weights" * 100  # it did pull
        assert done.stderr.strip().splitlines()[-1] == "HEAVY:", (ref, done.stderr)


def test_the_family_table_names_each_family_as_it_names_itself():
    """The registry loads a family when detection reaches its line, by the line's name."""
    from ocibridge.kinds import families as registry
    from ocibridge.kinds import table

    assert registry.names() == table.family_names()
    for name in table.family_names():
        assert registry.by_name(name).name == name


WARM_PATH_HEAVY = ("pydantic", "httpx", "httpcore", "ssl", "email", "ocibridge.cli.transfer", "ocibridge.api.copy",
                   "ocibridge.api.model_ops", "ocibridge.cache.modelcache", "ocibridge.oci.models",
                   "ocibridge.stores.base")


def test_a_warm_offline_path_loads_only_the_cache_records(tmp_path, monkeypatch):
    """``path REF --offline`` of a snapshot the cache holds is answered by the console entry
    from the reference's record and the snapshot's directory: nothing else of ocibridge loads
    (tests/warm/test_path_warm.py checks the online case against a registry)."""
    from ocibridge.cache.records import record_bytes, ref_file

    root = tmp_path / "models"
    monkeypatch.setenv("OCIBRIDGE_CACHE", str(tmp_path))  # the cache root: the model cache is its models/
    ref, digest = "registry.example:5000/org/m:v1", "sha256:" + "ab" * 32
    ref_file(root, ref).parent.mkdir(parents=True)
    ref_file(root, ref).write_bytes(record_bytes(ref, "application/vnd.oci.image.manifest.v1+json", digest, 9, None))
    snapshot = root / "snapshots" / ("ab" * 32)
    snapshot.mkdir(parents=True)
    code, out, err, heavy = run_entry(["path", ref, "--offline"], WARM_PATH_HEAVY)
    assert code == 0 and out == str(snapshot), err
    assert heavy == [], err


LOAD_PROBE = """
import sys
from pathlib import Path
from ocibridge.signing import policy_place
policy_place.SYSTEM_POLICY = Path({absent!r})  # (this machine's own file aside: no policy file anywhere)
import ocibridge
tensors = ocibridge.load_tensors({ref!r})
print(sorted((name, array.tobytes().hex()) for name, array in tensors.items()))
heavy = sorted(m for m in sys.modules if any(m == u or m.startswith(u + ".") for u in {unused!r}))
print("HEAVY:" + ",".join(heavy), file=sys.stderr)
"""
#: what ``load_tensors(REF)`` of a safetensors model, given no keys where no containers policy
#: file applies, has no use for (issue 91: a fresh process's imports precede its first request):
#: the policy file's reader and evaluator and the use check, ``verify=``'s API, the GGUF reader
#: (the file is told apart by its magic alone) and torch on a device
LOAD_UNUSED = ("ocibridge.signing.containers_policy", "ocibridge.signing.policy_file", "ocibridge.signing.use",
               "ocibridge.signing.coverage", "ocibridge.signing.verify", "ocibridge.api.policy",
               "ocibridge.lazyread.gguf", "ocibridge.model.gguf_header", "ocibridge.lazyread.torchdevice")


def test_load_tensors_without_keys_or_policy_file_loads_no_policy_code(registry, unique_repo, tmp_path):
    """A plain ``load_tensors(REF)`` imports what reads the tensors: no policy code (there is
    no policy file to obey), no GGUF reader, no device staging; the tensors are still read, and
    a policy file found in ``$OCIBRIDGE_POLICY`` is still obeyed."""
    import numpy as np
    from safetensors.numpy import save_file

    from ocibridge.api.model_ops import push

    (tmp_path / "m").mkdir()
    weights = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.ones(4, dtype=np.int64)}
    save_file(weights, str(tmp_path / "m" / "model.safetensors"))
    ref = f"{registry.host}/{unique_repo}:v1"
    push(str(tmp_path / "m"), ref)
    env = {k: v for k, v in os.environ.items() if k != "OCIBRIDGE_POLICY"}
    env.update(HOME=str(tmp_path / "home"), OCIBRIDGE_CACHE=str(tmp_path / "cache"))
    probe = LOAD_PROBE.format(absent=str(tmp_path / "no-policy.json"), ref=ref, unused=LOAD_UNUSED)
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(sorted((k, v.tobytes().hex()) for k, v in weights.items()))  # it did load
    assert done.stderr.strip().splitlines()[-1] == "HEAVY:", done.stderr
    rejecting = tmp_path / "policy.json"  # a policy file found (not given by verify=) is still obeyed
    rejecting.write_text('{"default": [{"type": "reject"}]}')
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO_ROOT, env={**env, "OCIBRIDGE_POLICY": str(rejecting)},
                          capture_output=True, text=True)
    assert done.returncode == 1 and "SignatureError" in done.stderr and "refused" in done.stderr, done.stderr


PUSH_PROBE = """
import sys, threading
import ocibridge.api.model_ops, ocibridge.cli.transfer, ocibridge.model.builder, ocibridge.model.deliver
import ocibridge.stores.registry.store, ocibridge.stores.registry.streamupload
from ocibridge.kinds.directory.source import read_directory
from ocibridge.model.builder import PlannedArtifact
def loading():
    return sorted(m for m in ("pydantic", "ocibridge.model.config", "ocibridge.api.pull_ops") if m in sys.modules) \\
        + [t.name for t in threading.enumerate() if t.name == "preload"]
before = loading()
artifact = PlannedArtifact(read_directory({root!r}))
pending = artifact.pending_blobs()
with pending[0].open() as reader:
    opened = loading()
    first = reader.read(4)
for thread in threading.enumerate():
    if thread.name == "preload":
        thread.join()
after = "ocibridge.model.config" in sys.modules
print(f"BEFORE:{{','.join(before)}} OPENED:{{','.join(opened)}} PENDING:{{len(pending)}} READ:{{first!r}} "
      f"LOADED:{{after}}", file=sys.stderr)
"""


def test_a_push_sends_its_new_files_before_the_config_model_is_needed(tmp_path):
    """A push's modules load without pydantic's config model nor pull's (their import came
    before a push's first byte); the config model loads in a thread from the first read of a
    file sent while hashed (not before: its import would hold up the requests before that
    read), since the config that names their digests is built after them."""
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "w.bin").write_bytes(b"weights" * 100)
    done = subprocess.run([sys.executable, "-c", PUSH_PROBE.format(root=str(tmp_path / "m"))], cwd=REPO_ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "BEFORE: OPENED: PENDING:1 READ:b'weig' LOADED:True", done.stderr


#: what a push of a directory (no model card) into a registry has no use for: the pull side's
#: extractor and its cache of pulled files, the local store's layout (the name rules of a
#: destination need none), the scanner without --scan, and the card's YAML parser without a card
PUSH_UNUSED = ("ocibridge.model.extract", "ocibridge.transfer.pullcache", "ocibridge.stores.layout",
               "ocibridge.api.scan_ops", "ocibridge.scanning", "yaml")


def test_a_push_to_a_registry_loads_no_pull_layout_scanner_or_yaml(registry, unique_repo, tmp_path):
    """Whatever a push imports comes before its first request: a push of a directory into a
    registry loads none of :data:`PUSH_UNUSED`; with a card that has front matter, YAML loads
    and the card's fields land in the config."""
    model = tmp_path / "m"
    model.mkdir()
    (model / "w.bin").write_bytes(b"weights" * 100)
    code, _, err, heavy = run_entry(["push", str(model), f"{registry.host}/{unique_repo}:v1", "-q"], PUSH_UNUSED)
    assert code == 0, err
    assert heavy == [], err
    (model / "README.md").write_text("---\nlicense: apache-2.0\n---\n# m\n")
    code, _, err, heavy = run_entry(["push", str(model), f"{registry.host}/{unique_repo}:v2", "-q", "--json"],
                                    PUSH_UNUSED)
    assert code == 0, err
    assert heavy == ["yaml"], err
    from ocibridge.oci.models import Manifest, parse_manifest_bytes
    from ocibridge.stores.registry.store import open_repository

    store = open_repository(host=registry.host, repository=unique_repo)
    manifest = parse_manifest_bytes(store.fetch_bytes(store.resolve("v2")))
    assert isinstance(manifest, Manifest)
    assert json.loads(store.fetch_bytes(manifest.config))["descriptor"]["licenses"] == ["apache-2.0"]
