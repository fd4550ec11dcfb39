"""The CLI against real registries, as a user runs it: push, pull, copy, tags, login/logout,
TLS flags, and one error line with a non-zero exit for every bad input."""

from __future__ import annotations

import io
import json

import pytest

from ocibridge.cli import main
from ocibridge.oci.models import Descriptor, Manifest
from ocibridge.places.locate import open_target as open_store_target
from tests.modelgen import make_model, tree


def one_error(capsys, code: int = 1) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("ocibridge: error: "), err
    return err


def add_referrer(ref: str) -> str:
    """Push a small signature-like manifest whose subject is ``ref``; its digest."""
    target = open_store_target(ref)
    subject = target.store.resolve(target.reference)
    blobs = []
    for media_type, data in [("application/vnd.example.sig.config+json", b"{}"),
                             ("application/vnd.example.sig", b"signature")]:
        desc = Descriptor.for_bytes(media_type, data)
        target.store.push_blob(desc, io.BytesIO(data))
        blobs.append(desc)
    manifest = Manifest(artifactType="application/vnd.example.sig", config=blobs[0],
                        layers=[blobs[1]], subject=subject)
    data = manifest.to_json_bytes()
    desc = Descriptor.for_bytes("application/vnd.oci.image.manifest.v1+json", data)
    target.store.push_manifest(desc, data)
    return desc.digest


def test_push_pull_inspect_validate_tags_copy(tmp_path, capsys, registry, unique_repo):
    model = make_model(tmp_path / "m")
    ref = f"{registry.host}/{unique_repo}:v1"
    assert main(["push", str(model), ref, "--json"]) == 0
    pushed = json.loads(capsys.readouterr().out)
    assert pushed["reference"] == f"{ref}@{pushed['digest']}" and pushed["bytesCopied"] > 400_000

    assert main(["push", str(model), ref]) == 0  # again: nothing is sent
    assert capsys.readouterr().out.endswith("already there: nothing to send\n")

    assert main(["pull", ref, "-o", str(tmp_path / "out"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["digest"] == pushed["digest"]
    assert tree(tmp_path / "out") == tree(model)

    assert main(["inspect", ref, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["digest"] == pushed["digest"] and {x["path"] for x in info["layers"]} == set(tree(model))
    assert main(["validate", ref]) == 0
    assert "valid (sha256:" in capsys.readouterr().out

    signature = add_referrer(ref)
    copy_ref = f"{registry.host}/{unique_repo}-copy:v2"
    assert main(["copy", ref, copy_ref, "--recursive", "--json"]) == 0
    copied = json.loads(capsys.readouterr().out)
    assert copied["referrers"] == [signature] and copied["blobsMounted"] >= 5
    assert main(["copy", copy_ref, f"oci:{tmp_path}/layout:v2", "-r"]) == 0
    assert "1 referrers" in capsys.readouterr().out

    assert main(["tags", f"{registry.host}/{unique_repo}-copy", "--json"]) == 0
    assert "v2" in json.loads(capsys.readouterr().out)
    assert main(["tags", f"{registry.host}/{unique_repo}-none"]) == 1  # the registry says 404
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "no such repository" in err


def test_cncf_media_types_through_a_registry(tmp_path, capsys, registry, unique_repo):
    ref = f"{registry.host}/{unique_repo}:cncf"
    assert main(["push", str(make_model(tmp_path / "m")), ref, "--media-types", "cncf"]) == 0
    capsys.readouterr()
    assert main(["inspect", ref, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["artifactType"] == "application/vnd.cncf.model.manifest.v1+json"
    assert all(x["mediaType"].startswith("application/vnd.cncf.model.") for x in info["layers"])


def test_login_logout_with_a_docker_config(tmp_path, capsys, monkeypatch, auth_registry, unique_repo):
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "docker"))
    host = auth_registry.host
    ref = f"{host}/{unique_repo}:v1"
    model = make_model(tmp_path / "m")

    assert main(["push", str(model), ref]) == 1
    err = one_error(capsys)
    assert "UNAUTHORIZED" in err and "ocibridge login" in err

    assert main(["login", host, "-u", auth_registry.username, "-p", "wrong"]) == 1
    assert "refused the credentials" in one_error(capsys)
    assert not (tmp_path / "docker" / "config.json").exists()

    monkeypatch.setattr("sys.stdin", io.StringIO(auth_registry.password + "\n"))
    assert main(["login", host, "-u", auth_registry.username, "--password-stdin"]) == 0
    config = tmp_path / "docker" / "config.json"
    assert host in json.loads(config.read_text())["auths"] and config.stat().st_mode & 0o077 == 0
    assert main(["push", str(model), ref]) == 0
    assert main(["tags", f"{host}/{unique_repo}"]) == 0
    assert capsys.readouterr().out.endswith("v1\n")

    assert main(["logout", host]) == 0
    assert capsys.readouterr().out == f"removed credentials for {host}\n"
    assert host not in json.loads(config.read_text())["auths"]
    assert main(["logout", host]) == 0
    assert capsys.readouterr().out == f"not logged in to {host}\n"
    assert main(["tags", f"{host}/{unique_repo}"]) == 1
    one_error(capsys)


def test_tls_flags(tmp_path, capsys, tls_registry, registry, unique_repo):
    model = make_model(tmp_path / "m")
    ref = f"{tls_registry.host}/{unique_repo}:v1"
    assert main(["push", str(model), ref, "--ca-file", str(tls_registry.ca_file), "--concurrency", "2"]) == 0
    capsys.readouterr()
    assert main(["inspect", ref, "--insecure", "--json"]) == 0
    capsys.readouterr()
    # --plain-http wins over the CA file: HTTP to an HTTPS server fails, in one line
    assert main(["inspect", ref, "--ca-file", str(tls_registry.ca_file), "--plain-http"]) == 1
    assert "pass --ca-file FILE or --insecure" in one_error(capsys)
    assert main(["inspect", ref]) == 1  # loopback means plain HTTP unless told otherwise
    assert "pass --ca-file FILE or --insecure" in one_error(capsys)
    assert main(["push", str(model), f"{registry.host}/{unique_repo}:v1", "--plain-http", "-q"]) == 0
    # --insecure as Docker has it: HTTPS without verification first, plain HTTP where TLS fails
    capsys.readouterr()
    assert main(["inspect", f"{registry.host}/{unique_repo}:v1", "--insecure", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["digest"].startswith("sha256:")


@pytest.mark.parametrize(
    "args, code, message",
    [
        (["push", "{model}", "{reg}/x:v1", "--concurrency", "abc"], 2, "invalid int value: 'abc'"),
        (["push", "{model}", "{reg}/x:v1", "--concurrency", "0"], 2, "--concurrency must be at least 1"),
        (["push", "{model}", "{reg}/x:v1", "--chunk-size", "0"], 2, "--chunk-size must be at least 1"),
        (["push", "{model}", "{reg}/x:v1", "--ca-file", "{tmp}/none.pem"], 1, "none.pem: No such file"),
        (["push", "{model}", "{reg}/x:v1", "--ca-file", "{model}/config.json"], 1, "no PEM certificate"),
        (["push", "{model}", "{reg}/x:v1", "--media-types", "oci"], 2, "invalid choice: 'oci'"),
        (["push"], 2, "required: SOURCE"),
        (["pull", "{reg}/x:v1"], 2, "pull needs one destination"),
        (["pull", "{reg}/x:v1", "{tmp}/a", "-o", "{tmp}/b"], 2, "pull needs one destination"),
        (["pull", "{reg}/test/none:v1", "{tmp}/out"], 1, "/test/none:v1: no such repository"),  # issue 63 item 5
        (["pull", "{reg}/test/none@sha256:" + "a" * 64, "{tmp}/out"], 1, "none@sha256:aaaa"),
        (["inspect", "{model}"], 2, "is a local path, not a store"),  # a reference typed wrong: usage
        (["copy", "{reg}/x:v1", "{model}"], 2, "is a local path, not a store"),
        (["login", "{reg}"], 2, "login needs --username"),
        (["frobnicate"], 2, "invalid choice: 'frobnicate'"),
    ],
)
def test_bad_input_is_one_line_and_nonzero(tmp_path, capsys, monkeypatch, registry, args, code, message):
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # not a terminal: login must not prompt
    model = make_model(tmp_path / "m")
    args = [a.format(tmp=tmp_path, model=model, reg=registry.host) for a in args]
    try:
        got = main(args)
    except SystemExit as exit_info:  # argparse's own usage errors
        got = exit_info.code
    assert got == code
    assert message in one_error(capsys)
    assert not (tmp_path / "out").exists() and not (tmp_path / "a").exists()

