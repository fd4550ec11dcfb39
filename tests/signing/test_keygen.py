"""``ocibridge keygen`` (issue 53 item 12): cosign's ``generate-key-pair`` without cosign or openssl.

The private key is cosign's encrypted format (read back by the project's own reader, the one
that reads cosign's files); the pair signs and verifies through the CLI, run as a process."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from ocibridge.errors import SignatureError
from ocibridge.signing import keys
from tests.modelgen import make_model


def run(*args: str, password: str | None = "s3cret", stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "COSIGN_PASSWORD"}
    if password is not None:
        env["COSIGN_PASSWORD"] = password
    return subprocess.run([sys.executable, "-m", "ocibridge", *args], capture_output=True, text=True,
                          timeout=120, env=env, input=stdin if stdin is not None else "", check=False)


def test_keygen_writes_a_cosign_key_pair_that_signs_and_verifies(tmp_path, registry, unique_repo):
    prefix = tmp_path / "release"
    done = run("keygen", str(prefix), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"privateKey": f"{prefix}.key", "publicKey": f"{prefix}.pub"}
    private, public = tmp_path / "release.key", tmp_path / "release.pub"
    assert private.read_bytes().startswith(b"-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\n")
    assert stat.S_IMODE(private.stat().st_mode) == 0o600  # as cosign writes it
    assert public.read_bytes().startswith(b"-----BEGIN PUBLIC KEY-----\n")
    # the project's reader of cosign's files decrypts it, with the password only
    key = keys.load_private_key(private, b"s3cret")
    assert keys.public_pem(key) == public.read_bytes()
    with pytest.raises(SignatureError, match="wrong password"):
        keys.load_private_key(private, b"other")

    ref = f"{registry.host}/{unique_repo}:v1"
    assert run("push", str(make_model(tmp_path / "m")), ref).returncode == 0
    signed = run("sign", ref, "--key", str(private))
    assert signed.returncode == 0, signed.stderr
    verified = run("verify", ref, "--key", str(public), "--json", password=None)
    assert verified.returncode == 0, verified.stderr
    assert len(json.loads(verified.stdout)["signatures"]) == 2


def test_keygen_refuses_to_replace_keys_and_needs_a_password(tmp_path):
    prefix = tmp_path / "cosign"
    assert run("keygen", str(prefix)).returncode == 0
    before = (tmp_path / "cosign.key").read_bytes()
    again = run("keygen", str(prefix))
    assert again.returncode == 2 and "already there" in again.stderr and "--overwrite" in again.stderr
    # a command line is told its flag, not the API's keyword (issue 63 item 7)
    assert "overwrite=True" not in again.stderr and again.stderr.count("\n") == 1, again.stderr
    assert (tmp_path / "cosign.key").read_bytes() == before

    # no $COSIGN_PASSWORD, no terminal: one line, nothing written
    none = run("keygen", str(tmp_path / "other"), password=None)
    assert none.returncode == 1 and none.stderr.startswith("ocibridge: error: no password")
    assert "Traceback" not in none.stderr and not list(tmp_path.glob("other*"))

    piped = run("keygen", str(prefix), "--overwrite", "--password-stdin", password=None, stdin="from-stdin\n")
    assert piped.returncode == 0, piped.stderr
    assert (tmp_path / "cosign.key").read_bytes() != before
    keys.load_private_key(tmp_path / "cosign.key", b"from-stdin")


def test_keygen_makes_no_directory_and_a_failed_write_keeps_the_old_pair(tmp_path, monkeypatch):
    """As cosign: a prefix in a missing directory is refused (nothing created); and when writing
    the new pair fails midway, the pair that was there is left as it was."""
    import ocibridge
    from ocibridge.errors import UsageError

    with pytest.raises(UsageError, match="no such directory"):
        ocibridge.keygen(tmp_path / "missing" / "k", password="pw")
    assert not (tmp_path / "missing").exists()
    old = ocibridge.keygen(tmp_path / "k", password="pw")
    pair = (Path(old.private_key), Path(old.public_key))
    before = [p.read_bytes() for p in pair]

    def broken(key):
        raise OSError("disk full")

    monkeypatch.setattr(keys, "public_pem", broken)
    with pytest.raises(OSError, match="disk full"):
        ocibridge.keygen(tmp_path / "k", password="pw", overwrite=True)
    assert [p.read_bytes() for p in pair] == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.key", "k.pub"]


def test_keygen_makes_p384_and_p521_keys_for_oms_that_model_signing_reads(tmp_path, registry, unique_repo):
    """Issue 78: a P-384 or P-521 key for the OMS form took ``openssl genpkey``. ``keygen --curve``
    makes one: PEM PKCS#8 (cosign's forms sign with P-256 only, and model_signing reads no cosign
    key file), encrypted with the password, plain when it is empty. ocibridge signs with either;
    model_signing 1.1.1 signs with the plain one (its ``--password`` fails on every key)."""
    import shutil

    from cryptography.hazmat.primitives import serialization

    from tests.docrun import EXAMPLE_MODEL

    ref = f"{registry.host}/{unique_repo}:v1"
    assert run("push", str(make_model(tmp_path / "m")), ref).returncode == 0
    bin_dir = str(Path(sys.executable).parent)  # model_signing's command
    for curve, size in (("p384", 384), ("p521", 521)):
        prefix = tmp_path / curve
        done = run("keygen", str(prefix), "--curve", curve)
        assert done.returncode == 0, done.stderr
        private = prefix.with_suffix(".key")
        assert private.read_bytes().startswith(b"-----BEGIN ENCRYPTED PRIVATE KEY-----\n")
        assert stat.S_IMODE(private.stat().st_mode) == 0o600
        key = serialization.load_pem_private_key(private.read_bytes(), b"s3cret")  # as openssl reads it
        assert key.curve.key_size == size  # type: ignore[attr-defined]
        assert keys.public_pem(keys.load_private_key(private, b"s3cret", any_curve=True)) == \
            prefix.with_suffix(".pub").read_bytes()
        signed = run("sign", ref, "--key", str(private), "--form", "oms")
        assert signed.returncode == 0, signed.stderr
        cosign_form = run("sign", ref, "--key", str(private), "--form", "classic")
        assert cosign_form.returncode == 1 and "P-256" in cosign_form.stderr, cosign_form.stderr

    plain = run("keygen", str(tmp_path / "plain"), "--curve", "p384", password="")
    assert plain.returncode == 0, plain.stderr
    assert (tmp_path / "plain.key").read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----\n")
    model = shutil.copytree(EXAMPLE_MODEL, tmp_path / "tiny")
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    library = subprocess.run(["model_signing", "sign", "key", str(model), "--signature", str(tmp_path / "tiny.sig"),
                              "--private_key", str(tmp_path / "plain.key")], capture_output=True, text=True,
                             timeout=120, env=env, check=False)
    assert library.returncode == 0, library.stderr
    checked = run("verify-dir", str(model), "--signature", str(tmp_path / "tiny.sig"),
                  "--key", str(tmp_path / "plain.pub"), password=None)
    assert checked.returncode == 0, checked.stderr
    # what the docs say of model_signing 1.1.1's --password: it fails on the encrypted key
    encrypted = subprocess.run(["model_signing", "sign", "key", str(model), "--signature", str(tmp_path / "e.sig"),
                                "--private_key", str(tmp_path / "p384.key"), "--password", "s3cret"],
                               capture_output=True, text=True, timeout=120, env=env, check=False)
    assert encrypted.returncode != 0 and "Cannot convert" in encrypted.stdout + encrypted.stderr

    wrong = run("keygen", str(tmp_path / "k"), "--curve", "p192")
    assert wrong.returncode == 2 and "--curve" in wrong.stderr
