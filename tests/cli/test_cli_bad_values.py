"""Hostile values on the command line: each is one ``ocibridge: error:`` line naming what is
wrong and a usage exit, never "unexpected <Exception>" (the last resort of ``main``) and never
a traceback; and nothing is written where the command would have written."""

from __future__ import annotations

import os
import stat

import pytest

from ocibridge.cli import main
from tests.support.cli_run import one_error_line, output_commands_setup, pushed_layout


@pytest.mark.parametrize("flag", ["--limit-rate", "--part-size", "--upload-part-size", "--chunk-threshold"])
@pytest.mark.parametrize("value", ["1e999", "inf"])
def test_a_byte_count_beyond_any_integer_is_a_usage_error(flag, value, tmp_path, capsys):
    """float('1e999') is infinity, which int() refuses with an OverflowError, not the
    ValueError the size parser caught: "unexpected OverflowError" before."""
    model = tmp_path / "m"
    model.mkdir()
    (model / "README.md").write_text("# m\n")
    assert main(["push", str(model), f"oci:{tmp_path}/out:v1", flag, value]) == 2
    assert f"{value!r} is not a byte count" in one_error_line(capsys)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv", [
    ["inspect", "a" * 64 + ".example/team/model:v1"],
    ["login", "x" * 300, "-u", "u", "-p", "p"],
    ["repo", "ls", "x" * 300],
    ["check-registry", "x" * 64 + ".example"],
    ["login", "n\udcff.example", "-u", "u", "-p", "p"],  # a byte that is no UTF-8, as Python passes it on
], ids=["inspect", "login", "repo ls", "check-registry", "login non-utf-8"])
def test_a_host_no_resolver_can_look_up_is_one_line_before_any_connection(argv, capsys):
    """A DNS label is 1-63 characters and IDNA-encodable; the resolver refused others with a
    UnicodeError from deep in the connection ("unexpected UnicodeError: encoding with 'idna'
    codec failed"), and httpx a non-UTF-8 host with its InvalidURL."""
    assert main(argv) == 2
    assert "not a host name a resolver can look up" in one_error_line(capsys)


def test_a_path_whose_name_is_no_utf8_is_printed_escaped(tmp_path, capsys):
    """A byte that is no UTF-8 reaches Python as a lone surrogate (surrogateescape); stdout in a
    UTF-8 locale other than C refuses to write one (capsys's refuses it too): the pull was done
    and its summary line ended it with "unexpected UnicodeEncodeError". The name is escaped as
    stderr writes it."""
    model = tmp_path / "m"
    model.mkdir()
    (model / "README.md").write_text("# m\n")
    assert main(["push", str(model), f"oci:{tmp_path}/lay:v1", "-q"]) == 0  # set-up
    capsys.readouterr()
    into = tmp_path / "n\udcffv"
    assert main(["pull", f"oci:{tmp_path}/lay:v1", str(into)]) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and "unexpected" not in captured.err, captured.err
    assert "n\\udcffv" in captured.out, captured.out
    assert (into / "README.md").read_text() == "# m\n"


@pytest.mark.parametrize("argv", [
    ["save", "{ref}", "-o", "{pipe}"],
    ["mirror", "{job}", "--report", "{pipe}"],
    ["keygen", "{pipe_prefix}", "--overwrite"],
], ids=["save", "mirror --report", "keygen --overwrite"])
def test_an_output_that_is_a_pipe_or_device_is_refused_and_left_as_it_was(argv, tmp_path, capsys, monkeypatch):
    """A staged file is renamed over its target: a FIFO there, or a device (``-o /dev/stdout``,
    ``/dev/null``; as root, /dev/full itself was replaced) became a plain file, and the command
    said it had written it."""
    ref, work, job = output_commands_setup(tmp_path, tmp_path / "work", monkeypatch)
    pipe = work / "out.pub"
    os.mkfifo(pipe)
    capsys.readouterr()
    words = [a.format(ref=ref, pipe=pipe, job=job, pipe_prefix=work / "out") for a in argv]
    assert main(words) == 2
    assert "is not a regular file (a device or a pipe)" in one_error_line(capsys)
    assert stat.S_ISFIFO(os.lstat(pipe).st_mode)
    assert sorted(p.name for p in work.iterdir()) == ["job.toml", "out.pub"]
    assert not (tmp_path / "mirrored").exists()


@pytest.mark.parametrize("argv", [
    ["k8s", "serve", "registry.example/hub", "--image", "1:2:3"],
    ["k8s", "volume", "registry.example/team/m:v1", "--image", ":"],
    ["k8s", "prewarm", "registry.example/team/m:v1", "--warm-image", "Engine:latest"],
    ["k8s", "mount-daemon", "registry.example/team/m:v1", "--reader-image", "a=b"],
    ["mirror", "job.toml", "--emit", "k8s-job", "--image", ""],
], ids=["k8s serve", "k8s volume", "k8s prewarm", "k8s mount-daemon", "mirror --emit"])
def test_an_image_no_runtime_can_pull_is_a_usage_error(argv, capsys):
    """The workload commands wrote any --image into the documents (``image: '1:2:3'``), which
    ``--validate`` called valid and the kubelet refused at the first pod."""
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # no document
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "-image: invalid" in lines[0], captured.err


@pytest.mark.parametrize(("config", "field"), [
    ('{"auths": 3}', "auths is not a JSON object"),
    ('{"auths": {"127.0.0.1:1": {"auth": 5}}}', "auths.127.0.0.1:1.auth is not a string"),
    ('{"credHelpers": ["pass"]}', "credHelpers is not a JSON object"),
    ('{"credHelpers": {"127.0.0.1:1": 5}}', "credHelpers.127.0.0.1:1 is not a string"),
], ids=["auths", "auth", "credHelpers", "helper"])
@pytest.mark.parametrize("where", ["--authfile", "docker config"])
def test_a_credentials_file_with_a_field_of_another_type_names_it(config, field, where, tmp_path, capsys, monkeypatch):
    """Read before any connection (the port is closed): a field of another type than Docker
    writes was "unexpected AttributeError: 'int' object has no attribute 'get'" or a TypeError
    from base64, whether in --authfile or in the user's own docker config."""
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "docker"))
    (tmp_path / "docker").mkdir()
    written = tmp_path / ("auth.json" if where == "--authfile" else "docker/config.json")
    written.write_text(config)
    flags = ["--authfile", str(written)] if where == "--authfile" else []
    assert main(["inspect", "127.0.0.1:1/team/model:v1", *flags]) == 1
    line = one_error_line(capsys)
    assert f"{written}: {field}" in line, line


@pytest.mark.parametrize("argv", [
    ["push", "{dir}", "oci:{tmp}/pushed:v1"],
    ["attach", "{ref}", "{dir}/n\udcffu.txt", "--artifact-type", "application/vnd.example.note"],
    ["warm", "save", "{ref}", "{dir}", "--key", "{key}", "--engine", "vllm"],
], ids=["push", "attach", "warm save"])
def test_a_file_name_that_is_no_utf8_is_named_not_a_crash(argv, tmp_path, capsys):
    """A name with a byte that is no UTF-8 (a Latin-1 file name) cannot be an artifact's path,
    a layer's title or a tar member's text name: each ended in "unexpected UnicodeEncodeError"
    when the manifest, the walk's sort or the tar header encoded it. Nothing was written."""
    from tests.signing_keys import key_pair

    ref = pushed_layout(tmp_path)
    before = sorted(p.name for p in (tmp_path / "lay").rglob("*"))
    files = tmp_path / "files"
    files.mkdir()
    (files / "README.md").write_text("# m\n")
    (files / "n\udcffu.txt").write_text("x\n")
    key, _ = key_pair(tmp_path / "k")
    capsys.readouterr()
    code = main([a.format(dir=files, tmp=tmp_path, ref=ref, key=key) for a in argv])
    assert code in (1, 2)
    assert "n\\udcffu.txt: its name is not UTF-8" in one_error_line(capsys)
    assert not (tmp_path / "pushed").exists()
    assert sorted(p.name for p in (tmp_path / "lay").rglob("*")) == before


def test_keygen_with_an_empty_prefix_writes_no_hidden_pair(tmp_path, capsys, monkeypatch):
    """``keygen "$PREFIX"`` with PREFIX unset wrote the hidden files .key and .pub into the
    working directory and said so; every other command refuses an empty name."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COSIGN_PASSWORD", "pw")
    assert main(["keygen", ""]) == 2
    assert "an empty key prefix" in one_error_line(capsys)
    assert list(tmp_path.iterdir()) == []


def test_prune_grace_nan_is_a_usage_error(tmp_path, capsys):
    """No age compares with nan, so no blob was kept as recent: a push in flight lost its blobs."""
    with pytest.raises(SystemExit) as done:
        main(["prune", f"oci:{tmp_path}/lay", "--grace", "nan"])
    assert done.value.code == 2
    assert "argument --grace: must be 0 or more" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["1:2:3", " ", "card"])
def test_attach_refuses_an_artifact_type_that_is_no_media_type(kind, tmp_path, capsys):
    """image-spec's schema (and registries that check it) refuse such an artifactType: attach
    wrote the manifest anyway and answered success."""
    ref = pushed_layout(tmp_path)
    before = sorted(p.name for p in (tmp_path / "lay").rglob("*"))
    note = tmp_path / "note.md"
    note.write_text("hi\n")
    capsys.readouterr()
    assert main(["attach", ref, str(note), "--artifact-type", kind]) == 2
    assert "is not a media type (RFC 6838" in one_error_line(capsys)
    assert sorted(p.name for p in (tmp_path / "lay").rglob("*")) == before


@pytest.mark.parametrize("flag", [["--license", "\udcff"], ["--description", "caf\udce9"],
                                  ["--annotation", "a=\udcff"]], ids=["license", "description", "annotation"])
def test_a_flag_value_that_is_no_utf8_is_a_usage_error(flag, tmp_path, capsys):
    """A byte of another encoding on the command line reaches Python as a lone surrogate: the
    config or manifest holding it could not be encoded ("unexpected UnicodeEncodeError")."""
    model = tmp_path / "m"
    model.mkdir()
    (model / "README.md").write_text("# m\n")
    assert main(["push", str(model), f"oci:{tmp_path}/out:v1", *flag]) == 2
    assert "a value is not UTF-8 text" in one_error_line(capsys)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv", [["inspect", "x" * 300], ["k8s", "mount-daemon", "team/" + "x" * 260 + ":v1"]],
                         ids=["inspect", "k8s mount-daemon"])
def test_a_repository_name_over_docker_s_limit_is_a_usage_error(argv, capsys):
    """distribution refuses a name over 255 characters, its registry included (NAME_INVALID):
    inspect asked docker.io for it, and the k8s commands wrote it into their documents."""
    assert main(argv) == 2
    assert "over 255 characters (Docker's limit)" in one_error_line(capsys)


@pytest.mark.parametrize("argv", [["warm", "save", "{ref}", ""], ["warm", "load", "{ref}", "", "--allow-unsigned"]],
                         ids=["save", "load"])
def test_warm_with_an_empty_directory_leaves_the_working_directory_alone(argv, tmp_path, capsys, monkeypatch):
    """``warm save REF "$DIR"`` with DIR unset packed the whole working directory (Path('') is
    '.') and attached it; ``warm load`` restored the attached cache into it."""
    ref = pushed_layout(tmp_path)
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "kernel.bin").write_bytes(b"\x00" * 16)
    assert main(["warm", "save", ref, str(cache)]) == 0  # set-up: a cache to restore
    before = sorted(p.name for p in (tmp_path / "lay").rglob("*"))
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("mine\n")
    monkeypatch.chdir(work)
    capsys.readouterr()
    assert main([a.format(ref=ref) for a in argv]) == 2
    assert "(an unset shell variable?)" in one_error_line(capsys)
    assert sorted(p.name for p in (tmp_path / "lay").rglob("*")) == before
    assert sorted(p.name for p in work.iterdir()) == ["notes.txt"]


@pytest.mark.parametrize(("argv", "said"), [
    (["mirror", "{toml}"], "{toml}: invalid TOML: nested too deeply to read"),
    (["mirror", "{yaml}"], "{yaml}: invalid YAML: nested too deeply to read"),
    (["k8s", "check", "oci:{tmp}/lay:v1", "--node-registries-d", "{tmp}/registries.d"],
     "registries.d file {tmp}/registries.d/deep.yaml: nested too deeply to read"),
    (["serve-usage", "oci:{tmp}/lay", "--quotas", "{toml}"], "--quotas {toml}: not TOML: nested too deeply to read"),
], ids=["mirror job", "mirror yaml job", "registries.d", "quotas"])
def test_toml_or_yaml_nested_too_deeply_names_its_file(argv, said, tmp_path, capsys):
    """tomllib and PyYAML recurse once per level: 50,000 nested arrays ended them in a
    RecursionError, which only the entry point's last resort caught, with a line naming no file."""
    toml, yaml = tmp_path / "deep.toml", tmp_path / "deep.yaml"
    toml.write_text("x = " + "[" * 50_000 + "\n")
    yaml.write_text("x: " + "[" * 50_000 + "\n")
    (tmp_path / "registries.d").mkdir()
    (tmp_path / "registries.d" / "deep.yaml").write_text("x: " + "[" * 50_000 + "\n")
    if "k8s" in argv:
        pushed_layout(tmp_path)
    else:
        (tmp_path / "lay").mkdir()
    capsys.readouterr()
    code = main([a.format(toml=toml, yaml=yaml, tmp=tmp_path) for a in argv])
    assert code in (1, 2)
    assert said.format(toml=toml, yaml=yaml, tmp=tmp_path) in one_error_line(capsys)


@pytest.mark.parametrize("text", [b'{"level": 3', b"", b"\xff{}"], ids=["truncated", "empty", "not utf-8"])
def test_warm_options_that_are_no_json_name_the_file(text, tmp_path, capsys):
    """``--options FILE`` that is no JSON was "unexpected JSONDecodeError" (or UnicodeDecodeError)."""
    ref = pushed_layout(tmp_path)
    options = tmp_path / "options.json"
    options.write_bytes(text)
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "kernel.bin").write_bytes(b"\x00" * 16)
    capsys.readouterr()
    assert main(["warm", "save", ref, str(cache), "--options", str(options)]) == 2
    assert f"--options {options}: not JSON (" in one_error_line(capsys)


@pytest.mark.parametrize("tag", [":", "-1", "a=b", "x" * 200])
def test_k8s_serve_refuses_a_default_tag_its_pods_would_refuse(tag, capsys):
    """serve refuses such a --default-tag at start; k8s serve wrote it into the pods' arguments,
    so every replica would have crashed at start."""
    assert main(["k8s", "serve", "registry.example/hub", "--default-tag", tag]) == 2
    assert "is not a tag" in one_error_line(capsys)
