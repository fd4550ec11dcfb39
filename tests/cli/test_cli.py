import json
import os
import subprocess
import sys

import pytest

from ocibridge.cli import main
from tests.modelgen import make_model, tree
from tests.support.data import data


def run(*args, env=None):
    proc = subprocess.run(
        [sys.executable, "-m", "ocibridge", *args],
        capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})},
    )
    return proc.returncode, proc.stdout, proc.stderr


def test_push_inspect_validate_pull_round_trip(tmp_path):
    model = make_model(tmp_path / "m")
    code, out, err = run("push", str(model), f"oci:{tmp_path}/store:v1", "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["digest"].startswith("sha256:") and summary["blobsCopied"] >= 8
    code, out, _ = run("inspect", f"oci:{tmp_path}/store:v1", "--json")
    info = json.loads(out)
    assert info["digest"] == summary["digest"]
    assert {x["path"] for x in info["layers"]} == set(tree(model))
    code, out, _ = run("inspect", f"oci:{tmp_path}/store:v1")
    assert "KIND" in out and "model.safetensors" in out
    assert run("validate", f"oci:{tmp_path}/store:v1")[0] == 0
    code, out, err = run("pull", f"oci:{tmp_path}/store:v1", str(tmp_path / "out"))
    assert code == 0, err
    assert tree(tmp_path / "out") == tree(model)


def test_default_store_when_dest_is_left_out(tmp_path):
    model = make_model(tmp_path / "my-model")
    store = tmp_path / "default-store"
    code, out, err = run("push", str(model), env={"OCIBRIDGE_STORE": str(store)})
    assert code == 0, err
    assert f"oci:{store}:my-model:latest@sha256:" in out  # NAME:TAG, DIRNAME:latest
    assert (store / "index.json").exists()


def test_push_twice_same_digest_and_nothing_uploaded(tmp_path, capsys):
    model = make_model(tmp_path / "m")
    assert main(["push", str(model), f"oci:{tmp_path}/s:a", "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert main(["push", str(model), f"oci:{tmp_path}/s:b", "--json"]) == 0
    second = json.loads(capsys.readouterr().out)
    assert first["digest"] == second["digest"]
    assert second["bytesCopied"] == 0 and second["manifestsCopied"] == 0 and first["manifestsCopied"] == 1
    # every blob the first push sent is reported as already there, not as "0 skipped"
    assert (second["blobsCopied"], second["blobsSkipped"]) == (0, first["blobsCopied"]) != (0, 0)
    assert main(["push", str(model), f"oci:{tmp_path}/s:c"]) == 0
    assert "already there: nothing to send" in capsys.readouterr().out


def test_cncf_media_types_flag(tmp_path, capsys):
    model = make_model(tmp_path / "m")
    assert main(["push", str(model), f"oci:{tmp_path}/s:c", "--media-types", "cncf", "--layer", "doc=tar+zstd"]) == 0
    capsys.readouterr()
    assert main(["inspect", f"oci:{tmp_path}/s:c", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["artifactType"] == "application/vnd.cncf.model.manifest.v1+json"
    assert any(x["mediaType"] == "application/vnd.cncf.model.doc.v1.tar+zstd" for x in info["layers"])
    assert main(["validate", f"oci:{tmp_path}/s:c"]) == 0


@pytest.mark.parametrize(
    "args, message",
    [
        (["push", "/nonexistent/model", "oci:{tmp}/s:v"], "no such file or directory"),
        (["push", "{model}", "host.io/UPPER/x:v"], "invalid"),
        (["push", "{model}", "oci:{tmp}/s:bad tag"], "invalid tag"),
        (["pull", "oci:{tmp}/missing:v", "{tmp}/out"], "not an OCI image layout"),
        (["push", "{model}", "oci:{tmp}/s:v", "--layer", "doc=zip"], "--layer expects"),
        (["push", "{model}", "oci:{tmp}/s:v", "--kind", "*.json=nope"], "unknown kind"),
        (["push", "{model}", "oci:{tmp}/s:v", "--kind", "x"], "--kind"),
    ],
)
def test_bad_input_one_line_nonzero_nothing_written(tmp_path, capsys, args, message):
    model = make_model(tmp_path / "m")
    args = [a.format(tmp=tmp_path, model=model) for a in args]
    # a flag's value or a reference typed wrong is a usage mistake (issue 42)
    usage_mistake = any(a in args for a in ("--layer", "--kind")) or message.startswith("invalid")
    assert main(args) == (2 if usage_mistake else 1)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("ocibridge: error:")
    assert message in err
    assert not (tmp_path / "s").exists()
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_unreadable_and_special_files_are_refused(tmp_path, capsys, monkeypatch):
    model = make_model(tmp_path / "m")
    os.mkfifo(model / "pipe")
    assert main(["push", str(model), f"oci:{tmp_path}/s:v"]) == 1
    assert "pipe: not a regular file" in capsys.readouterr().err
    os.unlink(model / "pipe")
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, m: False if str(p).endswith("config.json") else real_access(p, m))
    assert main(["push", str(model), f"oci:{tmp_path}/s:v"]) == 1
    assert "config.json: file is not readable" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


def test_validate_reports_field_and_rule(tmp_path, capsys):
    model = make_model(tmp_path / "m")
    assert main(["push", str(model), f"oci:{tmp_path}/s:v"]) == 0
    capsys.readouterr()
    # Break the artifact: drop a layer from the manifest so diffIds no longer match.
    from ocibridge.oci.models import Descriptor, Manifest
    from ocibridge.stores.layout import LayoutStore

    layout = LayoutStore(tmp_path / "s")
    desc = layout.resolve("v")
    manifest = Manifest.model_validate_json(layout.fetch_bytes(desc))
    manifest.layers = manifest.layers[1:]
    manifest.layers[0].annotations.pop("org.cnai.model.filepath")
    data = manifest.to_json_bytes()
    layout.push_manifest(Descriptor.for_bytes(desc.mediaType, data), data, "broken")
    assert main(["validate", f"oci:{tmp_path}/s:broken"]) == 1
    err = capsys.readouterr().err
    # the file path annotation is optional in the spec: its absence is a readiness warning
    assert "modelfs.diffIds" in err and "warning: layers[0].annotations: no org.cnai.model.filepath" in err


@pytest.mark.parametrize("path", ["../../escape.txt", "/etc/passwd", "a/../../b"])
def test_validate_rejects_a_file_path_that_escapes(tmp_path, capsys, path):
    """An artifact pull would refuse is reported invalid, naming the layer and the rule."""
    model = make_model(tmp_path / "m")
    assert main(["push", str(model), f"oci:{tmp_path}/s:v", "--group", "doc"]) == 0
    from ocibridge.oci.models import Descriptor, Manifest
    from ocibridge.stores.layout import LayoutStore

    layout = LayoutStore(tmp_path / "s")
    desc = layout.resolve("v")
    manifest = Manifest.model_validate_json(layout.fetch_bytes(desc))
    i, raw = next((i, x) for i, x in enumerate(manifest.layers) if x.mediaType.endswith(".raw"))
    raw.annotations["org.cnai.model.filepath"] = raw.annotations["org.opencontainers.image.title"] = path
    data = manifest.to_json_bytes()
    layout.push_manifest(Descriptor.for_bytes(desc.mediaType, data), data, "bad")
    capsys.readouterr()
    assert main(["validate", f"oci:{tmp_path}/s:v"]) == 0  # the grouped tar layer's path is fine
    assert main(["validate", f"oci:{tmp_path}/s:bad"]) == 1
    err = capsys.readouterr().err
    assert f"layers[{i}].annotations.org.cnai.model.filepath: " in err
    assert "escapes" in err or "absolute" in err
    assert main(["pull", f"oci:{tmp_path}/s:bad", str(tmp_path / "out")]) == 1
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_flags_may_stand_between_positionals(tmp_path):
    """`push SRC --flag DEST` and `pull SRC -q DIR`, as oras and skopeo users type them."""
    model = make_model(tmp_path / "m")
    code, out, err = run("push", str(model), "--format", "directory", f"oci:{tmp_path}/store:v1", "--json")
    assert code == 0, err
    assert json.loads(out)["reference"].startswith(f"oci:{tmp_path}/store:v1@sha256:")
    code, _, err = run("pull", f"oci:{tmp_path}/store:v1", "-q", str(tmp_path / "out"))
    assert code == 0, err
    assert tree(tmp_path / "out") == tree(model)
    code, _, err = run("push", str(model), "--format", "directory", "oci:x:y", "extra")
    assert code == 2 and err == "ocibridge: error: unrecognized arguments: extra (see 'ocibridge push --help')\n"


def test_tags_of_an_empty_layout_is_nothing(tmp_path):
    """An emptied repository or layout has no tags, which is no error (issue 42); a repository
    the registry does not know is (tests/docs/test_documented_outputs.py)."""
    model = make_model(tmp_path / "m")
    assert run("push", str(model), f"oci:{tmp_path}/store:v1")[0] == 0
    assert run("tags", f"oci:{tmp_path}/store")[1] == "v1\n"
    from ocibridge.stores.layout import LayoutStore

    LayoutStore(tmp_path / "empty", create=True)
    assert run("tags", f"oci:{tmp_path}/empty") == (0, "", "")


def test_closed_pipe_is_not_reported_as_an_error(tmp_path):
    """`inspect … | head`: output well past the pipe's 64 KiB buffer, so the write really fails."""
    model = tmp_path / "m"
    model.mkdir()
    for i in range(400):
        (model / f"part-{i:04d}.txt").write_text(str(i))
    assert run("push", str(model), f"oci:{tmp_path}/store:v1", "--no-auto-group")[0] == 0
    cmd = f"{sys.executable} -m ocibridge inspect oci:{tmp_path}/store:v1 --json | head -c 1"
    proc = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=120)
    assert proc.stdout == "{" and proc.stderr == ""


def test_local_work_does_not_import_httpx(tmp_path):
    """httpx takes ~0.2 s to import here: pushes into a layout (a directory, a carton without
    LINKS) and pulls from one must not pay it."""

    carton = sorted(data("carton").glob("*.carton"))[0]
    model = make_model(tmp_path / "m")
    script = (
        "import sys\nfrom ocibridge.cli import main\n"
        f"assert main(['push', {str(model)!r}, 'oci:{tmp_path}/l:d', '-q']) == 0\n"
        f"assert main(['push', {str(carton)!r}, 'oci:{tmp_path}/l:c', '-q']) == 0\n"
        f"assert main(['pull', 'oci:{tmp_path}/l:c', {str(tmp_path / 'out')!r}, '-q']) == 0\n"
        "print('httpx' in sys.modules)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "False"


def test_mistakes_a_user_makes_with_local_paths_are_named(tmp_path, capsys):
    """What a user typing paths meets: each one line naming what is wrong and what to type."""
    model = make_model(tmp_path / "m")
    layout = tmp_path / "x"
    assert main(["push", str(model), f"oci:{layout}:tag", "-q"]) == 0
    capsys.readouterr()

    def error(*args: str, code: int = 1) -> str:
        assert main(list(args)) == code, args
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("ocibridge: error: "), err
        return err.removeprefix("ocibridge: error: ").rstrip("\n")

    # a layout typed without oci:, with a tag, or as a destination that does not exist yet: the
    # hint says how to write it (it used to be "invalid repository '/…'")
    # (a reference typed wrong is a usage mistake: exit 2, naming the command's help)
    assert error("inspect", f"{layout}:tag", code=2) == (
        f"{layout}:tag is a local path, not a store (oci:PATH[:TAG] or host/repo[:tag]); "
        f"as an OCI image layout it is written oci:{layout}:tag (see 'ocibridge inspect --help')")
    new = tmp_path / "y"
    assert error("copy", f"oci:{layout}:tag", str(new), code=2) == (
        f"{new} is a local path, not a store (oci:PATH[:TAG] or host/repo[:tag]); "
        f"as an OCI image layout it is written oci:{new} (see 'ocibridge copy --help')")
    assert not new.exists()
    # not "invalid registry host '.'"
    assert error("validate", "./x", code=2).startswith("./x is a local path, not a store")
    # a layout that is not there at all says so (not "no oci-layout", as for a directory lacking one)
    assert error("pull", f"oci:{tmp_path}/nope:tag", str(tmp_path / "out")) == (
        f"{tmp_path}/nope is not an OCI image layout (no such directory)")
    assert error("tags", f"oci:{model}") == f"{model} is not an OCI image layout (no oci-layout)"
    # --format carton on a directory names it a directory (it said "no such file")
    assert error("push", str(model), f"oci:{layout}:c", "--format", "carton") == (
        f"{model}: a directory, not a file (--format carton reads a file)")
    # a bad --created is a usage mistake naming the flag (it was a config field, exit 1)
    assert error("push", str(model), f"oci:{layout}:d", "--created", "yesterday", code=2) == (
        "--created 'yesterday': not an RFC 3339 date-time such as 2025-01-01T00:00:00Z (or give no value: "
        "now) (see 'ocibridge push --help')")
