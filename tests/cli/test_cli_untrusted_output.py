"""Whatever an artifact holds, the CLI prints one line per error and never lets it drive the
terminal: deep nesting, unexpected exceptions and control characters (issue 13, classes 5 and 8)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ocibridge.cli import inspect as inspect_commands
from ocibridge.cli import main
from ocibridge.core.terminal import printable
from tests.modelgen import make_model

ESC = "\x1b"


def run(*args: str) -> tuple[int, str, str]:
    proc = subprocess.run([sys.executable, "-m", "ocibridge", *args], capture_output=True, text=True,
                          timeout=120, env=os.environ.copy())
    return proc.returncode, proc.stdout, proc.stderr


def _layout_with_manifest(root: Path, body: bytes, tag: str = "v1") -> str:
    """A layout whose one tag names ``body`` as a manifest: what an untrusted copy could hold."""
    digest = hashlib.sha256(body).hexdigest()
    (root / "blobs" / "sha256").mkdir(parents=True)
    (root / "blobs" / "sha256" / digest).write_bytes(body)
    (root / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
    entry = {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": f"sha256:{digest}",
             "size": len(body), "annotations": {"org.opencontainers.image.ref.name": tag}}
    (root / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [entry]}))
    return f"oci:{root}:{tag}"


@pytest.mark.parametrize("command", ["inspect", "validate", "pull"])
def test_json_nested_100000_deep_is_one_line(tmp_path: Path, command: str) -> None:
    ref = _layout_with_manifest(tmp_path / "layout", b'{"a":' * 100_000 + b"1" + b"}" * 100_000)
    args = [command, ref] + ([str(tmp_path / "out")] if command == "pull" else [])
    code, out, err = run(*args)
    assert code == 1 and out == ""
    # refused before the parser recurses (core/boundedjson.py), naming the limit
    assert err.splitlines() == [
        "ocibridge: error: manifest is not valid JSON: JSON nested deeper than 64 levels, refused"]
    assert not (tmp_path / "out").exists()


def test_debug_prints_the_traceback_as_well(tmp_path: Path) -> None:
    ref = _layout_with_manifest(tmp_path / "layout", b"[" * 100_000)
    code, _, err = run("--debug", "inspect", ref)
    assert code == 1 and "Traceback (most recent call last)" in err
    assert err.rstrip().splitlines()[-1].startswith("ocibridge: error: ")
    code, _, err = run("inspect", ref, "--debug")  # accepted after the command too
    assert code == 1 and "Traceback" in err


def test_an_unexpected_exception_is_one_line(monkeypatch, capsys) -> None:
    def broken(args):
        raise ValueError("something nobody foresaw\nwith a second line")

    monkeypatch.setattr(inspect_commands, "cmd_tags", broken)
    assert main(["tags", "oci:/nonexistent"]) == 1
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "ocibridge: error: unexpected ValueError: something nobody foresaw with a second line "
        "(run with --debug for the traceback)"]


def test_control_characters_in_a_tag_are_escaped_in_the_error(tmp_path: Path) -> None:
    code, _, err = run("inspect", f"oci:{tmp_path}/l:v{ESC}]0;owned{chr(7)}x")
    assert code == 2 and ESC not in err and "\x07" not in err  # a reference typed wrong: a usage mistake
    assert "\\x1b]0;owned\\x07" in err and len(err.splitlines()) == 1


def test_annotations_and_paths_from_an_artifact_are_escaped_by_inspect(tmp_path: Path) -> None:
    model = make_model(tmp_path / "m")
    (model / f"evil{ESC}[2Jname.txt").write_text("x")
    layout = f"oci:{tmp_path}/store:v1"
    code, _, err = run("push", str(model), layout, "-a", f"note=hi{ESC}[31m\u202eevil")
    assert code == 0, err
    code, out, _ = run("inspect", layout)
    assert code == 0 and ESC not in out and "\u202e" not in out
    assert "evil\\x1b[2Jname.txt" in out
    code, out, _ = run("inspect", layout, "--json")  # JSON keeps the real value, escaped by JSON itself
    assert code == 0 and ESC not in out and json.loads(out)["annotations"]["note"].startswith("hi\x1b")


def test_printable_escapes_what_drives_a_terminal_and_keeps_text() -> None:
    assert printable("a\tb\nc") == "a\tb\nc"
    assert printable("caf\u00e9 \u6a21\u578b") == "caf\u00e9 \u6a21\u578b"
    assert printable("\x1b[2J\r\x00\x7f\x9b") == "\\x1b[2J\\x0d\\x00\\x7f\\x9b"
    assert printable("\u202eevil\u2066") == "\\u202eevil\\u2066"


def test_a_newline_in_a_title_or_annotation_prints_no_line_of_its_own(tmp_path: Path) -> None:
    """inspect prints one line per annotation and per layer: a value holding a newline must not
    add a row that the artifact made up."""
    model = make_model(tmp_path / "m")
    layout = f"oci:{tmp_path}/store:v1"
    code, _, err = run("push", str(model), layout, "-a", "note=hi\nweight  raw  1 GiB  forged.bin")
    assert code == 0, err
    code, out, _ = run("inspect", layout)
    assert code == 0
    assert [line for line in out.splitlines() if "note" in line] == [
        "annotation note: hi\\nweight  raw  1 GiB  forged.bin"]
    assert not any(line.startswith("weight  raw  1 GiB") for line in out.splitlines())


def test_one_line_escapes_newlines_as_well() -> None:
    from ocibridge.core.terminal import one_line

    assert one_line("a\tb\nc\x1b") == "a\tb\\nc\\x1b"


@pytest.mark.parametrize("error", ["OcibridgeError", "OSError"])
def test_an_error_message_holding_a_newline_is_one_line(monkeypatch, capsys, error: str) -> None:
    """An error quoting a name from an artifact ('a\\nb') stays on the one error line."""
    from ocibridge.errors import OcibridgeError

    def broken(args):
        if error == "OSError":
            raise FileNotFoundError(2, "No such file", "dir/a\nocibridge: pulled")
        raise OcibridgeError("layer a\nocibridge: pulled into DIR")

    monkeypatch.setattr(inspect_commands, "cmd_tags", broken)
    assert main(["tags", "oci:/nonexistent"]) == 1
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "a\\nocibridge: pulled" in err
