"""Compile caches as signed referrers of a model (ocibridge/warm/, docs/warm.md), against the
registry fixture: saved reproducibly, listed with their keys, restored byte for byte only when
the key is this process's and the signature verifies; a key that differs, a changed byte or a
missing signature restores nothing."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
from support.faultproxy import corrupt

import ocibridge
from ocibridge.cli import main
from ocibridge.errors import DigestMismatch, SignatureError, UnsafePath, UsageError
from ocibridge.warm.artifact import ARTIFACT_TYPE
from ocibridge.warm.cachekey import options_digest
from tests.modelgen import make_model
from tests.signing_keys import key_pair


@pytest.fixture
def model(tmp_path, registry, unique_repo) -> str:
    ref = f"{registry.host}/{unique_repo}:v1"
    ocibridge.push(str(make_model(tmp_path / "m")), ref)
    return ref


@pytest.fixture
def keys(tmp_path) -> tuple[Path, Path]:
    return key_pair(tmp_path / "k")


def _cache_dir(root: Path) -> Path:
    """A cache directory as vLLM leaves one: nested, binary, one file executable."""
    (root / "rank_0_0" / "backbone").mkdir(parents=True)
    (root / "rank_0_0" / "backbone" / "cache_key_factors.json").write_text('{"torch": "x"}\n')
    (root / "rank_0_0" / "backbone" / "kernel.so").write_bytes(bytes(range(256)) * 300)
    os.chmod(root / "rank_0_0" / "backbone" / "kernel.so", 0o755)
    (root / "triton" / "ab").mkdir(parents=True)
    (root / "triton" / "ab" / "k.cubin").write_bytes(b"\x7fELF" + b"\0" * 5000)
    return root


def _files(root: Path) -> dict[str, tuple[bytes, bool]]:
    return {p.relative_to(root).as_posix(): (p.read_bytes(), os.access(p, os.X_OK))
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_save_is_reproducible_listed_and_restored_byte_for_byte(model, keys, tmp_path, capsys):
    private, public = keys
    cache = _cache_dir(tmp_path / "cache")
    first = ocibridge.warm_save(model, cache, engine="vllm", engine_version="0.11.0", options={"level": 3},
                      sign=ocibridge.SignOptions(key=private))
    os.utime(cache / "triton" / "ab" / "k.cubin", (1, 1))  # times and order of the walk do not count
    again = ocibridge.warm_save(model, cache, engine="vllm", engine_version="0.11.0", options={"level": 3},
                      sign=ocibridge.SignOptions(key=private))
    assert again.digest == first.digest and first.files == 3 and set(first.signed) == {"classic", "bundle"}
    assert first.key.form == "dir" and first.key.engine == "vllm" and first.key.device.startswith("cpu-")
    assert first.key.model_config == json.loads(ocibridge.fetch_manifest(model).content)["config"]["digest"]
    assert first.key.options == options_digest({"level": 3})

    listed = ocibridge.warm_caches(model)
    assert [(c.digest, c.key) for c in listed.caches] == [(first.digest, first.key)]
    assert any(r.artifactType == ARTIFACT_TYPE for r in ocibridge.discover(model).referrers)

    out = tmp_path / "restored"
    done = ocibridge.warm_load(model, out, engine="vllm", engine_version="0.11.0", options={"level": 3},
                     verify=ocibridge.verification(keys=[public]))
    assert done.checked and done.digest == first.digest and done.files == 3
    assert _files(out) == _files(cache)
    assert not [p for p in out.iterdir() if p.name.startswith(".ocibridge-warm-")]  # no staging left

    capsys.readouterr()
    assert main(["warm", "ls", model, "--plain-http", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["caches"][0]["digest"] == first.digest


@pytest.mark.parametrize("field,other", [("torch", "2.0.0"), ("device", "sm_90"), ("options", "other")])
def test_a_key_that_differs_is_refused_naming_it(model, keys, tmp_path, field, other):
    private, public = keys
    here = ocibridge.warm_key(model, form="dir")
    theirs = dataclasses.replace(here, **{field: options_digest({"mode": "max-autotune"})
                                          if other == "other" else other})
    ocibridge.warm_save(model, _cache_dir(tmp_path / "cache"), key=theirs, sign=ocibridge.SignOptions(key=private))
    out = tmp_path / "out"
    with pytest.raises(ocibridge.CacheMismatch) as refused:
        ocibridge.warm_load(model, out, verify=ocibridge.verification(keys=[public]))
    message = str(refused.value)
    assert "\n" not in message and f"{field} differs (here {getattr(here, field)}, " in message
    assert f"the cache has {getattr(theirs, field)})" in message and "nothing restored" in message
    assert not out.exists()


def test_a_changed_byte_is_refused_before_anything_is_restored(model, keys, tmp_path, fault_proxy):
    private, public = keys
    saved = ocibridge.warm_save(model, _cache_dir(tmp_path / "cache"), sign=ocibridge.SignOptions(key=private))
    (layer,) = json.loads(ocibridge.fetch_manifest(saved.reference).content)["layers"]
    fault_proxy.add("GET", f"/blobs/{layer['digest']}", corrupt(offset=600), times=None)
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine").write_text("kept")
    with pytest.raises(DigestMismatch):
        ocibridge.warm_load(model.replace(model.split("/")[0], fault_proxy.host, 1), out,
                  verify=ocibridge.verification(keys=[public]))
    assert sorted(p.name for p in out.iterdir()) == ["mine"]


def test_unsigned_is_refused_by_default_and_under_a_signature_policy(model, keys, tmp_path, registry, capsys):
    private, public = keys
    ocibridge.warm_save(model, _cache_dir(tmp_path / "cache"))
    out = tmp_path / "out"
    with pytest.raises(SignatureError, match="code that runs"):
        ocibridge.warm_load(model, out)
    repo = model.rsplit(":", 1)[0]
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"default": [{"type": "reject"}], "transports": {"docker": {repo: [
        {"type": "sigstoreSigned", "keyPath": str(public), "signedIdentity": {"type": "matchRepository"}}]}}}))
    with pytest.raises(SignatureError, match="refused"):
        ocibridge.warm_load(model, out, verify=ocibridge.verification(policy=policy))
    with pytest.raises(SignatureError, match="refused"):
        ocibridge.warm_load(model, out, verify=ocibridge.verification(keys=[public]), allow_unsigned=True)
    assert not out.exists()
    # the CLI: one line, exit 1, nothing restored
    capsys.readouterr()
    assert main(["warm", "load", model, str(out), "--plain-http", "--policy", str(policy)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "refused" in err and not out.exists()

    # signed by the key the policy names: loaded under the policy alone
    signed = ocibridge.warm_save(model, _cache_dir(tmp_path / "cache2"), options={"x": 1},
                       sign=ocibridge.SignOptions(key=private, identity=repo))
    done = ocibridge.warm_load(model, out, options={"x": 1}, verify=ocibridge.verification(policy=policy))
    assert done.checked and done.digest == signed.digest
    # and unsigned, loaded unchecked only when asked
    assert not ocibridge.warm_load(model, tmp_path / "o2", allow_unsigned=True).checked


def test_torch_bytes_round_trip_through_the_cli(model, keys, tmp_path, capsys):
    private, public = keys
    blob = tmp_path / "artifacts.bin"
    blob.write_bytes(b"torch cache artifacts " * 100)
    assert main(["warm", "save", model, "--torch", str(blob), "--key", str(private), "--plain-http"]) == 0
    said = capsys.readouterr().out
    assert said.startswith("attached compile cache ") and "signed: classic, bundle" in said and "form=torch" in said
    back = tmp_path / "back.bin"
    assert main(["warm", "load", model, "--torch", str(back), "--verify-key", str(public), "--plain-http"]) == 0
    assert back.read_bytes() == blob.read_bytes()
    assert "signature verified" in capsys.readouterr().out
    # a directory cache is another form: not this one
    with pytest.raises(ocibridge.CacheMismatch, match="form differs"):
        ocibridge.warm_load(model, tmp_path / "d", verify=ocibridge.verification(keys=[public]))


def test_a_cache_directory_with_a_link_is_not_packed(model, tmp_path):
    cache = _cache_dir(tmp_path / "cache")
    (cache / "out").symlink_to("/etc/passwd")
    with pytest.raises(UsageError, match="a link; a compile cache is packed from regular files only"):
        ocibridge.warm_save(model, cache)


def test_an_archive_with_a_link_or_an_escape_restores_nothing(tmp_path):
    """The archive as a registry could hand it: a link, a path out; refused before DIR changes."""
    import io
    import tarfile

    from ocibridge.warm.restore import restore_archive

    for name, kind in (("ok/../../out", tarfile.REGTYPE), ("evil", tarfile.SYMTYPE)):
        archive = tmp_path / f"{kind!r}.tar"
        with tarfile.open(archive, "w") as tar:
            tar.addfile(tarfile.TarInfo("fine"), io.BytesIO(b""))
            bad = tarfile.TarInfo(name)
            bad.type = kind
            bad.linkname = "/etc/passwd"
            tar.addfile(bad, io.BytesIO(b""))
        out = tmp_path / "out"
        with pytest.raises(UnsafePath):
            restore_archive(archive, out)
        assert list(out.iterdir()) == [] and not (tmp_path / "out").is_symlink()


def test_copy_with_referrers_carries_the_cache(model, keys, tmp_path, registry2):
    private, public = keys
    saved = ocibridge.warm_save(model, _cache_dir(tmp_path / "cache"), sign=ocibridge.SignOptions(key=private))
    there = f"{registry2.host}/{model.split('/', 1)[1]}"
    ocibridge.copy_reference(model, there, referrers=True)
    assert [c.digest for c in ocibridge.warm_caches(there).caches] == [saved.digest]
    done = ocibridge.warm_load(there, tmp_path / "out", verify=ocibridge.verification(keys=[public]))
    assert done.checked and _files(tmp_path / "out") == _files(tmp_path / "cache")


def test_the_options_digest_is_of_their_canonical_json():
    assert options_digest({"b": [1, 2], "a": "x"}) == options_digest({"a": "x", "b": [1, 2]})
    assert options_digest({"a": 1}) != options_digest({"a": "1"})
    assert options_digest(None) == options_digest({})
    with pytest.raises(UsageError, match="JSON values"):
        options_digest({"a": object()})
