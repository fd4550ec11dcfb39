"""One policy for every use: the same policy file given to the real skopeo and to ocibridge
gives the same verdict (on what Debian's skopeo can judge), ocibridge's own signatures meet
``sigstoreSigned`` by what their payload covers, and every command that uses a model, under a
policy that rejects it, writes nothing."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from ocibridge.cli import main
from tests.modelgen import make_model
from tests.signing_keys import key_pair

ACCEPT = [{"type": "insecureAcceptAnything"}]
REJECT = [{"type": "reject"}]


def _write(path: Path, doc: dict) -> Path:
    path.write_text(json.dumps(doc))
    return path


def _push(tmp_path: Path, ref: str) -> None:
    assert main(["push", str(make_model(tmp_path / "model")), ref, "-q"]) == 0


def _skopeo_accepts(policy: Path, ref: str, out: Path) -> bool:
    skopeo = shutil.which("skopeo")
    assert skopeo, "skopeo is installed by scripts/test"
    done = subprocess.run([skopeo, "copy", "--quiet", "--policy", str(policy), "--src-tls-verify=false",
                           f"docker://{ref}", f"oci:{out}:v1"], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        assert "policy" in done.stderr.lower() or "signature" in done.stderr.lower() or "rejected" in done.stderr, \
            done.stderr  # refused by the policy, not failing for another reason
    return done.returncode == 0


def _scopes(host: str, repo: str) -> list[tuple[str, dict]]:
    return [
        ("insecureAcceptAnything by default", {"default": ACCEPT}),
        ("reject by default", {"default": REJECT}),
        ("the repository's scope overrides the default", {"default": REJECT,
                                                         "transports": {"docker": {f"{host}/{repo}": ACCEPT}}}),
        ("the tag's scope overrides the repository's", {"default": ACCEPT, "transports": {"docker": {
            f"{host}/{repo}": ACCEPT, f"{host}/{repo}:v1": REJECT}}}),
        ("the host's scope", {"default": REJECT, "transports": {"docker": {host: ACCEPT}}}),
        ("the docker transport's own default", {"default": ACCEPT, "transports": {"docker": {"": REJECT}}}),
        ("another repository's scope does not apply", {"default": REJECT,
                                                       "transports": {"docker": {f"{host}/{repo}-other": ACCEPT}}}),
        ("a namespace's scope applies below it", {"default": REJECT, "transports": {"docker": {
            f"{host}/{repo.split('/')[0]}": ACCEPT}}}),
    ]


def test_skopeo_and_ocibridge_give_the_same_verdicts(tmp_path, registry, unique_repo, capsys):
    repo = f"ns/{unique_repo}"
    ref = f"{registry.host}/{repo}:v1"
    _push(tmp_path, ref)
    verdicts = []
    for number, (what, doc) in enumerate(_scopes(registry.host, repo)):
        policy = _write(tmp_path / f"policy-{number}.json", doc)
        skopeo = _skopeo_accepts(policy, ref, tmp_path / f"skopeo-{number}")
        out = tmp_path / f"pulled-{number}"
        code = main(["pull", ref, str(out), "--policy", str(policy), "-q"])
        err = capsys.readouterr().err
        ours = code == 0
        if not ours:
            assert "refused" in err and err.count("\n") == 1 and not out.exists(), err
        verdicts.append((what, skopeo, ours))
    assert [v for v in verdicts if v[1] != v[2]] == [], verdicts
    assert {v[1] for v in verdicts} == {True, False}  # both verdicts met


def test_an_unsigned_image_under_sigstore_signed_is_refused_by_both(tmp_path, registry, unique_repo, capsys):
    """What Debian's skopeo can judge of sigstoreSigned: no signature, refused (it refuses every
    image under such a policy, tests/signing/test_signing_registry.py)."""
    ref = f"{registry.host}/{unique_repo}:v1"
    _push(tmp_path, ref)
    _, public = key_pair(tmp_path / "k")
    policy = _write(tmp_path / "policy.json", {"default": [{"type": "sigstoreSigned", "keyPath": str(public)}]})
    assert not _skopeo_accepts(policy, ref, tmp_path / "skopeo")
    assert main(["pull", ref, str(tmp_path / "out"), "--policy", str(policy)]) == 1
    assert "a signature was required" in capsys.readouterr().err


@pytest.mark.parametrize("form, identity, accepted, why", [
    ("classic", "matchRepository", True, ""),
    ("bundle", "matchRepository", True, ""),
    ("classic", "matchRepoDigestOrExact", False, "is not accepted (matchRepoDigestOrExact)"),
    ("classic", "exactRepository", True, ""),
    ("oms", "matchRepository", False, "covers the model's files, not the manifest digest"),
])
def test_ocibridge_signatures_under_sigstore_signed(tmp_path, registry, unique_repo, capsys, form, identity,
                                                    accepted, why):
    """Signed by ``ocibridge sign`` (cosign's payloads: the repository as identity, as cosign
    signs), judged by the policy file with the containers/image rules."""
    ref = f"{registry.host}/{unique_repo}:v1"
    _push(tmp_path, ref)
    private, public = key_pair(tmp_path / "k")
    _, other = key_pair(tmp_path / "o", "other")
    assert main(["sign", ref, "--key", str(private), "--form", form]) == 0
    signed = {"type": identity}
    if identity == "exactRepository":
        signed["dockerRepository"] = f"{registry.host}/{unique_repo}"
    policy = _write(tmp_path / "policy.json", {"default": REJECT, "transports": {"docker": {
        f"{registry.host}/{unique_repo}": [{"type": "sigstoreSigned", "keyPath": str(public),
                                            "signedIdentity": signed}]}}})
    capsys.readouterr()
    code = main(["pull", ref, str(tmp_path / "out"), "--policy", str(policy), "-q"])
    err = capsys.readouterr().err
    assert (code == 0) is accepted, err
    assert why in err
    if accepted:
        assert (tmp_path / "out" / "model.safetensors").is_file()
        other_policy = _write(tmp_path / "other.json", {"default": [{"type": "sigstoreSigned", "keyPath": str(other),
                                                                     "signedIdentity": signed}]})
        assert main(["pull", ref, str(tmp_path / "out2"), "--policy", str(other_policy)]) == 1
        assert "does not verify" in capsys.readouterr().err and not (tmp_path / "out2").exists()


def test_the_environment_names_the_policy_and_the_flag_wins(tmp_path, monkeypatch, capsys):
    src = f"oci:{tmp_path}/src:v1"
    _push(tmp_path, src)
    monkeypatch.setenv("OCIBRIDGE_POLICY", str(_write(tmp_path / "reject.json", {"default": REJECT})))
    assert main(["pull", src, str(tmp_path / "out")]) == 1
    assert "rejects it" in capsys.readouterr().err
    accept = _write(tmp_path / "accept.json", {"default": ACCEPT})
    assert main(["pull", src, str(tmp_path / "out"), "--policy", str(accept), "-q"]) == 0


def test_no_policy_file_anywhere_changes_nothing(tmp_path, monkeypatch):
    from ocibridge.signing import policy_place

    monkeypatch.delenv("OCIBRIDGE_POLICY", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(policy_place, "SYSTEM_POLICY", tmp_path / "none.json")
    src = f"oci:{tmp_path}/src:v1"
    _push(tmp_path, src)
    assert main(["pull", src, str(tmp_path / "out"), "-q"]) == 0


# -- every command that uses a model, under one policy that rejects it -------------------------
def _snapshot(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): (hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir")
            for p in sorted(root.rglob("*"))}


def _commands(tmp_path: Path, src: str, bundle: Path) -> list[list[str]]:
    job = tmp_path / "job.toml"
    job.write_text(f'[[sync]]\nsource = "oci:{tmp_path}/src"\ntarget = "oci:{tmp_path}/mirror"\n')
    return [
        ["pull", src, str(tmp_path / "out")],
        ["pull", src, f"oci:{tmp_path}/pulled:v1"],
        ["copy", src, f"oci:{tmp_path}/copied:v1"],
        ["copy", "-r", src, f"oci:{tmp_path}/copied-r:v1"],
        ["path", src],
        ["k8s", "modelcar", src, "--tag", "v1-modelcar"],
        ["k8s", "mount", src, str(tmp_path / "mounted")],
        ["save", src, "-o", str(tmp_path / "saved.tar")],
        ["load", str(bundle), f"oci:{tmp_path}/loaded"],
        ["mirror", str(job)],
    ]


def test_every_command_that_uses_a_model_obeys_a_rejecting_policy(tmp_path, monkeypatch, capsys):
    src = f"oci:{tmp_path}/src:v1"
    _push(tmp_path, src)
    bundle = tmp_path / "bundle.tar"
    assert main(["save", src, "-o", str(bundle)]) == 0
    policy = _write(tmp_path / "policy.json", {"default": REJECT})
    monkeypatch.setenv("OCIBRIDGE_POLICY", str(policy))
    capsys.readouterr()
    for argv in _commands(tmp_path, src, bundle):
        before = _snapshot(tmp_path)
        code = main(argv)
        out, err = capsys.readouterr()
        assert code != 0, (argv, out)
        assert "rejects it" in err + out, (argv, err)
        after = _snapshot(tmp_path)
        assert after == before, argv  # nothing written anywhere under the test's folder (a mirror's
        # target layout included: it is made only for an artifact copied into it)
    # and the same commands run when the policy accepts (the refusal was the policy's)
    _write(policy, {"default": ACCEPT})
    assert main(["pull", src, str(tmp_path / "out"), "-q"]) == 0
    assert main(["load", str(bundle), f"oci:{tmp_path}/loaded"]) == 0


def test_lazy_reads_obey_the_policy(tmp_path, registry, unique_repo, monkeypatch, capsys):
    ref = f"{registry.host}/{unique_repo}:v1"
    _push(tmp_path, ref)
    monkeypatch.setenv("OCIBRIDGE_POLICY", str(_write(tmp_path / "policy.json", {"default": ACCEPT, "transports": {
        "docker": {f"{registry.host}/{unique_repo}": REJECT}}})))
    capsys.readouterr()
    before = _snapshot(tmp_path)
    assert main(["cat", ref, "model.safetensors", "--range", "0-4"]) == 1
    assert "rejects it" in capsys.readouterr().err
    assert _snapshot(tmp_path) == before
    monkeypatch.setenv("OCIBRIDGE_POLICY", str(_write(tmp_path / "accept.json", {"default": ACCEPT})))
    assert main(["cat", ref, "model.safetensors", "--range", "0-4"]) == 0

