"""What is verified is what is used (issue 34, item 1): every command that takes ``--verify-key``
resolves its source once and uses, by digest, the artifact whose signature it checked.

A fault proxy in front of the real registry moves the tag between verification and use: the
first request for the tag's manifest is answered with the signed artifact, every later one with
an unsigned artifact of the same repository. Each command must then either use the signed
artifact (files pulled, digest copied, the ModelCar image's source) or fail with one line.
The commands are found in the parser: a new command with ``--verify-key`` and no case here fails.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.faultproxy import FaultProxy, reroute
from support.fixtures import new_repo

from ocibridge.cli import main
from ocibridge.cli.parser import build_parser
from ocibridge.kinds.modelcar.build import SOURCE_ANNOTATION
from ocibridge.places.locate import open_target as open_store_target
from tests.modelgen import make_model, tree
from tests.signing_keys import key_pair


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[
        tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every (sub)command of ``parser``, once each (aliases share a parser), by its words."""
    seen: set[int] = set()
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        for name, sub in action.choices.items():
            if id(sub) in seen:
                continue
            seen.add(id(sub))
            yield (*path, name), sub
            yield from _commands(sub, (*path, name))


def verifying_commands() -> list[tuple[str, ...]]:
    return [words for words, p in _commands(build_parser())
            if any("--verify-key" in a.option_strings for a in p._actions)]


@dataclass
class Setup:
    """A repository holding ``v1`` (signed) and ``unsigned``; ``proxied`` names v1 through a
    proxy that answers the tag with the unsigned one from its second request on."""

    tmp: Path
    proxied: str
    signed: str
    unsigned: str
    public: Path
    signed_model: Path
    registry_repo: str
    private: Path


def _use_pull_dir(s: Setup, capsys: pytest.CaptureFixture[str]) -> str | None:
    out = s.tmp / "out"
    code = main(["pull", s.proxied, str(out), "--verify-key", str(s.public), "--json", "-q"])
    if code != 0:
        return _one_line_failure(capsys, out)
    assert tree(out) == tree(s.signed_model), "the files pulled are not those of the verified artifact"
    return str(json.loads(capsys.readouterr().out)["digest"])


def _use_pull_store(s: Setup, capsys: pytest.CaptureFixture[str]) -> str | None:
    layout = s.tmp / "pulled-layout"
    code = main(["pull", s.proxied, f"oci:{layout}:v1", "--verify-key", str(s.public), "--json", "-q"])
    if code != 0:
        return _one_line_failure(capsys, layout)
    capsys.readouterr()
    t = open_store_target(f"oci:{layout}:v1")
    return t.store.resolve(t.reference).digest


def _use_copy(s: Setup, capsys: pytest.CaptureFixture[str]) -> str | None:
    layout = s.tmp / "copied-layout"
    code = main(["copy", s.proxied, f"oci:{layout}:v1", "--verify-key", str(s.public), "--json", "-q"])
    if code != 0:
        return _one_line_failure(capsys, layout)
    capsys.readouterr()
    t = open_store_target(f"oci:{layout}:v1")
    return t.store.resolve(t.reference).digest


def _use_modelcar(s: Setup, capsys: pytest.CaptureFixture[str]) -> str | None:
    code = main(["k8s", "modelcar", s.proxied, "--verify-key", str(s.public), "--tag", "car", "--json"])
    if code != 0:
        return _one_line_failure(capsys, None)
    built = json.loads(capsys.readouterr().out)["digest"]
    direct = open_store_target(f"{s.registry_repo}@{built}")
    manifest = json.loads(direct.store.fetch_bytes(direct.store.resolve(built)))
    return str(manifest["annotations"][SOURCE_ANNOTATION])


def _use_save(s: Setup, capsys: pytest.CaptureFixture[str]) -> str | None:
    bundle = s.tmp / "bundle.tar"
    code = main(["save", s.proxied, "-o", str(bundle), "--verify-key", str(s.public), "--json"])
    if code != 0:
        return _one_line_failure(capsys, bundle)
    listed = json.loads(capsys.readouterr().out)["models"]
    assert main(["load", str(bundle), f"oci:{s.tmp}/loaded", "--json"]) == 0  # what the bundle holds
    capsys.readouterr()
    t = open_store_target(f"oci:{s.tmp}/loaded:v1")
    held = t.store.resolve(t.reference).digest
    assert held == listed[0]["digest"]
    return str(held)


def _use_path(s: Setup, capsys: pytest.CaptureFixture[str]) -> str | None:
    code = main(["path", s.proxied, "--verify-key", str(s.public), "--json"])
    if code != 0:
        return _one_line_failure(capsys, None)
    snapshot = Path(json.loads(capsys.readouterr().out)["path"])
    assert tree(snapshot) == tree(s.signed_model), "the snapshot is not the verified artifact's files"
    return s.signed


def _use_mount(s: Setup, capsys: pytest.CaptureFixture[str]) -> str | None:
    out = s.tmp / "mounted"
    code = main(["k8s", "mount", s.proxied, str(out), "--verify-key", str(s.public)])
    if code != 0:
        return _one_line_failure(capsys, out)
    capsys.readouterr()
    weights = (out / "model.safetensors").read_bytes()  # the seed tells the two models apart
    return s.signed if weights == (s.signed_model / "model.safetensors").read_bytes() else s.unsigned


def _use_fuse_mount(s: Setup, capsys: pytest.CaptureFixture[str]) -> str | None:
    """mount (FUSE, served by a process of its own, as a user runs it) reads the files of the
    artifact it verified: the tag is asked once, then everything goes by that digest."""
    from mounting import mount_env, run

    where, env, log = s.tmp / "fuse", mount_env(s.tmp / "fuse-env"), s.tmp / "fuse-mount.log"
    if run(["mount", s.proxied, str(where), "--verify-key", str(s.public)], env, log=log, check=False).returncode:
        err = log.read_text()
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
        assert not where.exists(), "a refused mount left its directory behind"
        return None
    try:
        weights = (where / "model.safetensors").read_bytes()  # the seed tells the two models apart
    finally:
        run(["umount", str(where)], env)
    return s.signed if weights == (s.signed_model / "model.safetensors").read_bytes() else s.unsigned


def _use_load(s: Setup, capsys: pytest.CaptureFixture[str]) -> str | None:
    """load checks each model of the bundle (fixed by digest) with the signatures it carries."""
    bundle = s.tmp / "carried.tar"
    assert main(["save", s.proxied, "-o", str(bundle)]) == 0  # the tag's first answer: the signed one
    capsys.readouterr()
    code = main(["load", str(bundle), f"oci:{s.tmp}/verified-load", "--verify-key", str(s.public)])
    if code != 0:
        return _one_line_failure(capsys, s.tmp / "verified-load")
    capsys.readouterr()
    t = open_store_target(f"oci:{s.tmp}/verified-load:v1")
    return t.store.resolve(t.reference).digest


def _use_warm_load(s: Setup, capsys: pytest.CaptureFixture[str]) -> str | None:
    """warm load restores a cache of the artifact the tag named when it was asked (each model's
    own cache says which): the signed model's, or nothing, never the unsigned one's."""
    for digest, name in ((s.signed, "signed"), (s.unsigned, "unsigned")):
        cache = s.tmp / f"cache-{name}"
        cache.mkdir()
        (cache / "which").write_text(name)
        assert main(["warm", "save", f"{s.registry_repo}@{digest}", str(cache),
                     "--key", str(s.private)]) == 0
    capsys.readouterr()
    out = s.tmp / "restored"
    code = main(["warm", "load", s.proxied, str(out), "--verify-key", str(s.public)])
    if code != 0:
        return _one_line_failure(capsys, out)
    capsys.readouterr()
    return s.signed if (out / "which").read_text() == "signed" else s.unsigned


def _one_line_failure(capsys: pytest.CaptureFixture[str], output: Path | None) -> None:
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert output is None or not output.exists(), "a refused command left its output behind"
    return None


def _use_cat(s: Setup, capsys: pytest.CaptureFixture[str]) -> str | None:
    # bytes 0-5 of model.safetensors are ASCII and differ by seed (1 signed, 2 unsigned)
    code = main(["cat", s.proxied, "model.safetensors", "--range", "0-5", "--verify-key", str(s.public)])
    if code != 0:
        return _one_line_failure(capsys, None)
    out = capsys.readouterr().out.encode()
    assert len(out) == 5
    return s.signed if out == (s.signed_model / "model.safetensors").read_bytes()[:5] else s.unsigned


def _use_serve(s: Setup, capsys: pytest.CaptureFixture[str]) -> str | None:
    """serve answers by the manifest digest it verified: the files a client downloads are those
    of the signed model, or the request is refused (403), never the unsigned one's."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError
    from serving import point_hub_at, serving

    from ocibridge.signing.verify import VerifyPolicy

    host, _, rest = s.proxied.partition("/")
    repo_id, _, tag = rest.rpartition(":")
    with serving([host], verify=VerifyPolicy.from_files([str(s.public)])) as served, \
            pytest.MonkeyPatch.context() as patch:
        point_hub_at(patch, served.url, s.tmp / "serve-hub")
        try:
            where = Path(snapshot_download(repo_id, revision=tag))
        except HfHubHTTPError:
            return None
    weights = (where / "model.safetensors").read_bytes()  # the seed tells the two models apart
    return s.signed if weights == (s.signed_model / "model.safetensors").read_bytes() else s.unsigned


Use = Callable[[Setup, pytest.CaptureFixture[str]], "str | None"]

# every command taking --verify-key, with each way it uses its source
USES: dict[tuple[str, ...], list[Use]] = {
    ("pull",): [_use_pull_dir, _use_pull_store],
    ("copy",): [_use_copy],
    ("k8s", "modelcar"): [_use_modelcar],
    ("save",): [_use_save],
    ("path",): [_use_path],
    ("cat",): [_use_cat],
    ("k8s", "mount"): [_use_mount],
    ("mount",): [_use_fuse_mount],
    ("load",): [_use_load],
    ("serve",): [_use_serve],
    ("warm", "load"): [_use_warm_load],
}

# commands that verify nothing themselves but hand --verify-key to another command's process, with that
# command (k8s serve puts it in the pods' serve args: tests/k8s/test_k8s_serve_flags.py checks it lands there)
CARRIED: dict[tuple[str, ...], tuple[str, ...]] = {
    ("k8s", "serve"): ("serve",),
}


def test_every_verifying_command_has_a_moved_tag_case():
    """A command that gains ``--verify-key`` must gain a case here (and pin what it verified)."""
    found = set(verifying_commands())
    assert found, "no command takes --verify-key: the parser walk is broken"
    known = set(USES) | set(CARRIED)
    assert found == known, f"commands with --verify-key and no moved-tag case: {sorted(found - known)}"
    assert set(CARRIED.values()) <= set(USES), "a carried --verify-key names a command with no case of its own"


@dataclass(frozen=True)
class Published:
    """``v1`` (signed) and ``unsigned`` in one repository, with the key pair and the signed model's files."""

    repo: str
    repo_name: str
    signed: str
    unsigned: str
    private: Path
    public: Path
    signed_model: Path


@pytest.fixture(scope="module")
def published(tmp_path_factory, registry) -> Published:
    """Pushed and signed once for the module: each test reads the two artifacts through a proxy of its own."""
    root = tmp_path_factory.mktemp("verified-is-used")
    name = new_repo("verified-is-used")
    repo = f"{registry.host}/{name}"

    def digest_of(argv: list[str]) -> str:
        with contextlib.redirect_stdout(io.StringIO()) as out:
            assert main(argv) == 0
        return str(json.loads(out.getvalue())["digest"])

    signed_model = make_model(root / "signed", seed=1)
    signed = digest_of(["push", str(signed_model), f"{repo}:v1", "--json", "-q"])
    unsigned = digest_of(["push", str(make_model(root / "unsigned", seed=2)), f"{repo}:unsigned", "--json", "-q"])
    private, public = key_pair(root / "k")
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["sign", f"{repo}:v1", "--key", str(private)]) == 0
    return Published(repo, name, signed, unsigned, private, public, signed_model)


@pytest.fixture
def setup(tmp_path, published, registry) -> Iterator[tuple[Setup, FaultProxy]]:
    p = published
    with FaultProxy(registry) as proxy:
        proxy.add(None, rf"/{p.repo_name}/manifests/v1$", reroute(f"/v2/{p.repo_name}/manifests/unsigned"),
                  skip=1, times=None)
        yield Setup(tmp_path, f"{proxy.host}/{p.repo_name}:v1", p.signed, p.unsigned, p.public, p.signed_model,
                    p.repo, p.private), proxy


@pytest.mark.parametrize("words,use", [(w, u) for w, uses in USES.items() for u in uses],
                         ids=lambda v: " ".join(v) if isinstance(v, tuple) else v.__name__)
def test_moved_tag_is_not_used(setup, capsys, words, use):
    s, proxy = setup
    used = use(s, capsys)
    assert proxy.requests_matching(None, r"/manifests/v1$"), "the tag was never asked through the proxy"
    if used is not None:
        assert used == s.signed, f"{' '.join(words)} verified {s.signed} but used {used}"
    # the tag did move: asked now, it names the unsigned artifact
    t = open_store_target(s.proxied)
    assert t.store.resolve(t.reference).digest == s.unsigned


@pytest.mark.parametrize("convert", [None, "cncf"])
def test_mirror_entry_with_verify_copies_what_it_verified(setup, tmp_path, registry2, unique_repo, convert):
    """A mirror entry's ``verify`` block (the job-file form of ``--verify-key``), as it is and
    re-labelled: what is copied is the artifact whose signature verified."""
    s, proxy = setup
    proxy_host = s.proxied.split("/", 1)[0]
    job = tmp_path / "job.toml"
    job.write_text(f"""
[registries."{proxy_host}"]
plain_http = true
[registries."{registry2.host}"]
plain_http = true

[[sync]]
source = "{s.proxied}"
target = "{registry2.host}/{unique_repo}:v1"
verify = {{ keys = ["{s.public}"] }}
{f'convert = "{convert}"' if convert else ''}
""")
    from ocibridge.mirror import load_job, run_job

    (result,) = run_job(load_job(job)).artifacts
    assert proxy.requests_matching(None, r"/manifests/v1$"), "the tag was never asked through the proxy"
    if result.status == "failed":
        assert "\n" not in (result.reason or "")
        return
    assert result.status == "copied", result
    copied = open_store_target(f"{registry2.host}/{unique_repo}:v1")
    manifest = json.loads(copied.store.fetch_bytes(copied.store.resolve(copied.reference)))
    layers = sorted(layer["digest"] for layer in manifest["layers"])
    signed = open_store_target(f"{s.registry_repo}@{s.signed}")
    expected = sorted(layer["digest"] for layer in json.loads(
        signed.store.fetch_bytes(signed.store.resolve(s.signed)))["layers"])
    assert layers == expected, "the mirror copied another artifact than the one it verified"


def test_k8s_volume_pins_what_it_checked(setup, capsys):
    """``k8s volume`` checks that the runtime will mount the artifact, then pins it by digest
    in the Pod: the pinned digest is the one checked, not what the tag names afterwards."""
    s, proxy = setup
    assert main(["k8s", "volume", s.proxied, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    pinned = json.dumps(doc)
    assert s.signed in pinned and s.unsigned not in pinned, pinned
    assert proxy.requests_matching(None, r"/manifests/v1$")


@pytest.mark.parametrize("argv", [
    ["inspect", "{ref}"], ["validate", "{ref}"], ["k8s", "check", "{ref}"], ["k8s", "volume", "{ref}"],
    ["k8s", "mount", "{ref}", "{tmp}/mnt"], ["k8s", "modelcar", "{ref}"], ["verify", "{ref}", "--key", "{pub}"],
    ["pull", "{ref}", "{tmp}/out", "-q"], ["copy", "{ref}", "oci:{tmp}/layout:v1", "-q"],
    ["convert", "{ref}", "oci:{tmp}/converted:v1", "--to", "modelkit", "-q"],
], ids=lambda argv: " ".join(w for w in argv if not w.startswith("{") and not w.startswith("-")))
def test_every_command_asks_for_the_tag_once(setup, capsys, argv):
    """The rule at its root: a command asks for the tag once; all else goes by digest."""
    s, proxy = setup
    words = [w.format(ref=s.proxied, tmp=s.tmp, pub=s.public) for w in argv]
    code = main(words)
    assert code == 0, capsys.readouterr().err
    asked = proxy.requests_matching(None, r"/manifests/v1$")
    assert len(asked) == 1, [f"{r.method} {r.path}" for r in asked]
