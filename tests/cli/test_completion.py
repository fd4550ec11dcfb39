"""``ocibridge completion SHELL`` (issue 53 item 15): the bash script, sourced in bash, completes
commands, flags and the local store's model names (asked of ``ocibridge ls`` at each Tab)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import ocibridge
from ocibridge.cli.commandtable import COMMANDS

BASH_COMPLETE = r"""
source "$1"
shift
for line in "$@"; do
  read -ra COMP_WORDS <<< "$line"
  [[ "$line" == *" " ]] && COMP_WORDS+=("")
  COMP_LINE="$line"; COMP_POINT=${#line}; COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); COMPREPLY=()
  _shtab_ocibridge ocibridge "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
  echo "${COMPREPLY[*]}"
done
"""


def test_bash_completes_commands_flags_and_local_model_names(tmp_path, monkeypatch):
    store = tmp_path / "store"
    monkeypatch.setenv("OCIBRIDGE_STORE", str(store))
    env = {**os.environ, "OCIBRIDGE_STORE": str(store),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text("{}\n")
    ocibridge.push(str(model), "tiny-llama:v1")
    made = subprocess.run([sys.executable, "-m", "ocibridge", "completion", "bash"], capture_output=True, text=True,
                          env=env, timeout=60, check=True)
    script = tmp_path / "ocibridge.bash"
    script.write_text(made.stdout)
    lines = ["ocibridge pu", "ocibridge pull --overw", "ocibridge inspect tiny", "ocibridge k8s ch",
             "ocibridge completion "]
    done = subprocess.run(["bash", "-c", BASH_COMPLETE, "bash", str(script), *lines], capture_output=True,
                          text=True, env=env, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["push pull", "--overwrite", "tiny-llama:v1", "check", "bash zsh fish"]


def test_every_shell_script_names_every_command():
    from ocibridge.cli.parser import build_parser

    for shell in ("bash", "zsh", "fish"):
        script = ocibridge.completion_script(build_parser(), shell).script
        assert all(entry.name in script for entry in COMMANDS), shell


def test_bash_never_runs_what_a_local_name_holds(tmp_path):
    """A name in the store's index.json is anyone's text (issue 62, red team): ``$(...)``,
    backquotes and ``$VAR`` in it are completed as they are written, never run by the shell."""
    store = tmp_path / "store"
    env = {**os.environ, "OCIBRIDGE_STORE": str(store),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text("{}\n")
    subprocess.run([sys.executable, "-m", "ocibridge", "push", str(model), "tiny:v1"], env=env, check=True,
                   capture_output=True, timeout=60)
    ran = tmp_path / "ran"
    index = store / "index.json"
    hostile = f"tiny:v1$(touch${{IFS}}{ran})`touch${{IFS}}{ran}`$HOME"
    index.write_text(index.read_text().replace('"tiny:v1"', json.dumps(hostile)))
    made = subprocess.run([sys.executable, "-m", "ocibridge", "completion", "bash"], capture_output=True, text=True,
                          env=env, timeout=60, check=True)
    script = tmp_path / "ocibridge.bash"
    script.write_text(made.stdout)
    done = subprocess.run(["bash", "-c", BASH_COMPLETE, "bash", str(script), "ocibridge inspect ti"],
                          capture_output=True, text=True, env=env, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert not ran.exists(), "the shell ran what a model name holds"
    assert done.stdout.startswith(hostile), done.stdout  # as written (ls reads it as NAME:TAG as it can)
