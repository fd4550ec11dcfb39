"""Mistakes (issue 53 item 14): an unknown command, subcommand or flag suggests the nearest one
(difflib), and other tools' spellings of a reference are understood (``oci://HOST/REPO`` as helm
and flux write it, skopeo's ``docker://``) or answered with ocibridge's spelling. Run as a user
runs the command: a process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import ocibridge
from ocibridge.stores.layout import LayoutStore
from tests.modelgen import make_model
from tests.support.fulldisk import model_and_places, run_on_full_disk


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ocibridge", *args], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ), check=False)


@pytest.mark.parametrize(("argv", "hint"), [
    (["pul", "a", "b"], "invalid choice: 'pul'; did you mean 'pull'? (see 'ocibridge --help')"),
    (["k8s", "chek", "a"], "invalid choice: 'chek'; did you mean 'check'? (see 'ocibridge k8s --help')"),
    (["pull", "a", "b", "--overwirte"], "unrecognized arguments: --overwirte; did you mean '--overwrite'? "
                                         "(see 'ocibridge pull --help')"),
    (["sign", "a", "--key", "k", "--from", "all"], "did you mean '--form'?"),
    (["push", "a", "b", "--media-types", "cnfc"], "invalid choice: 'cnfc'; did you mean 'cncf'?"),
])
def test_a_mistyped_word_is_answered_with_the_nearest_one(argv, hint):
    done = run(*argv)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("ocibridge: error: ") and hint in done.stderr


def test_other_tools_spellings_of_a_reference(tmp_path, registry, unique_repo):
    ref = f"{registry.host}/{unique_repo}:v1"
    digest = ocibridge.push(str(make_model(tmp_path / "m")), ref).descriptor.digest
    for spelled in (f"oci://{ref}", f"docker://{ref}"):  # helm/flux/oras docs, skopeo
        done = run("resolve", spelled, "--json")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["digest"] == digest
    pulled = run("pull", f"docker://{ref}", str(tmp_path / "out"))
    assert pulled.returncode == 0 and (tmp_path / "out" / "config.json").is_file(), pulled.stderr

    answers = {
        "oci://models": "oci:models",  # no registry host: a layout is oci:PATH
        f"https://{ref}": f"write {ref}",
        "https://huggingface.co/org/name": "hf:org/name",
    }
    for spelled, answer in answers.items():
        done = run("inspect", spelled)
        assert done.returncode == 2 and answer in done.stderr and "Traceback" not in done.stderr, done.stderr
    hub = run("pull", "hf://org/name", str(tmp_path / "x"))
    assert hub.returncode == 2 and "hf:ORG/NAME" in hub.stderr


@pytest.mark.parametrize(("argv", "answer"), [
    (["repo", "ls", "oci:{tmp}/models"], "is an OCI image layout, not a registry; repo ls takes"),
    (["check-registry", "oci:{tmp}/models"], "is an OCI image layout, not a registry; check-registry takes"),
    (["login", "oci:{tmp}/models", "-u", "me", "-p", "pw"],
     "is an OCI image layout, not a registry; login and logout take"),
    (["repo", "ls", "hf:acme"], "hf:acme is a model (hf:), not a registry; repo ls takes"),
    (["check-registry", "https://localhost:5000"], "write localhost:5000"),
    (["login", "", "-u", "me", "-p", "pw"], "an empty registry (an unset shell variable?); login and logout take"),
    (["logout", "docker://"], "an empty registry (an unset shell variable?); login and logout take"),
])
def test_a_command_that_takes_a_registry_names_what_it_was_given(argv, answer, tmp_path):
    """``repo ls``, ``check-registry`` and ``login`` talk to a registry itself. Given a layout
    (or hf:/ollama:) they said "registry 'oci:': the port must be a number from 1 to 65535", and
    given a URL (as ``docker login`` takes one) "… is not an IPv6 address"."""
    done = run(*[a.format(tmp=tmp_path) for a in argv])
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert answer in done.stderr and "port" not in done.stderr and "IPv6" not in done.stderr, done.stderr


@pytest.mark.parametrize("inside", ["oci:{model}:v1", "oci:{model}/.store:v1", "oci:~/tiny:v1"])
def test_a_push_into_a_layout_inside_the_model_directory_is_refused(inside, tmp_path):
    """``push tiny oci:tiny:v1`` (``tiny:v1``, the local store, was meant) wrote the layout into
    the model directory: its next push packed the layout's blobs as code and config files (a
    new digest, twice the bytes). Refused in one line now, the directory as it was; ``~`` (which
    no shell expands inside ``oci:~/…``) is the home directory, as a layout's path reads it."""
    model = make_model(tmp_path / "tiny")
    before = sorted(p.relative_to(model) for p in model.rglob("*"))
    env = {**os.environ, "HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "ocibridge", "push", str(model), inside.format(model=model)],
                          capture_output=True, text=True, timeout=120, env=env, check=False)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "the directory being pushed" in done.stderr and "NAME:TAG" in done.stderr, done.stderr
    assert sorted(p.relative_to(model) for p in model.rglob("*")) == before


@pytest.mark.parametrize("argv", [["push", "", "oci:{tmp}/layout:v1"], ["pull", "oci:{tmp}/layout:v1", ""],
                                  ["pull", "oci:{tmp}/layout:v1", "-o", ""]], ids=["push", "pull", "pull -o"])
def test_an_empty_source_or_destination_is_refused(argv, tmp_path):
    """``push "$MODEL" …`` with MODEL unset packed the whole current directory; ``pull REF ""``
    failed with "unexpected AttributeError", and ``-o ""`` wrote the files into the current
    directory. Each is one line now, and the current directory is left as it was."""
    ocibridge.push(str(make_model(tmp_path / "m")), f"oci:{tmp_path}/layout:v1")  # set-up: in this process
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("mine\n")
    done = subprocess.run([sys.executable, "-m", "ocibridge", *[a.format(tmp=tmp_path) for a in argv]],
                          capture_output=True, text=True, timeout=120, cwd=work, check=False,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "empty" in done.stderr and "unset shell variable" in done.stderr, done.stderr
    assert sorted(p.name for p in work.iterdir()) == ["notes.txt"]
    assert LayoutStore(tmp_path / "layout").tags() == ["v1"]


@pytest.mark.parametrize(("argv", "written"), [
    (["pull", "oci:{tmp}/lay:v1", "{full}/out"], "{full}/out"),
    (["pull", "oci:{tmp}/lay:v1", "out"], "{full}/out"),  # relative to the working directory, on the tmpfs
    (["push", "{tmp}/m", "tiny:v1"], "{full}/store"),  # the local store
    (["push", "{tmp}/m"], "{full}/store"),
    (["copy", "oci:{tmp}/lay:v1", "oci:{full}/copied:v1"], "{full}/copied"),
    (["k8s", "mount", "oci:{tmp}/lay:v1", "{full}/mounted"], "{full}/mounted"),  # the directory the runtime presents
], ids=["pull", "pull relative", "push NAME:TAG", "push", "copy", "k8s mount"])
def test_a_full_disk_names_the_places_the_command_writes(argv, written, tmp_path, monkeypatch):
    """A full disk reported by a buffered write's flush carries no file name: the line names the
    destination (the local store for a bare NAME:TAG) and the cache, so the user knows which disk
    to free; nothing is left there. The disk is a 64 KiB tmpfs (tests/support/fulldisk.py)."""
    model, full, cache = model_and_places(tmp_path)
    monkeypatch.setenv("OCIBRIDGE_CACHE", str(cache))
    monkeypatch.setenv("OCIBRIDGE_STORE", str(full / "store"))
    ocibridge.push(str(model), f"oci:{tmp_path / 'lay'}:v1")  # set-up: in this process, with the command's env
    words = " ".join(f'"{a.format(tmp=tmp_path, full=full)}"' for a in argv)
    done = run_on_full_disk(full, f'cd "{full}" && "$0" -m ocibridge {words}; echo "exit $?"; ls -A "{full}"')
    assert done.stdout.splitlines() == ["exit 1"], (done.stdout, done.stderr)  # and the tmpfs is left empty
    assert done.stderr == (f"ocibridge: error: No space left on device (writing to "
                           f"{written.format(full=full)} or the cache {cache}: free some space there, then run it "
                           "again)\n")


@pytest.mark.parametrize("words", [["push"], ["k8s", "check"], []])
def test_help_command_prints_the_commands_own_help(words):
    """``ocibridge help push`` is ``ocibridge push --help`` (git, kubectl, oras, skopeo take it)."""
    asked, flagged = run("help", *words), run(*words, "--help")
    assert asked.returncode == 0 and asked.stdout == flagged.stdout and asked.stderr == "", asked.stderr
    assert asked.stdout.startswith(f"usage: {' '.join(['ocibridge', *words])} ")


def test_help_of_a_mistyped_command_names_the_nearest_one():
    done = run("help", "pul")
    assert done.returncode == 2 and "did you mean 'pull'?" in done.stderr and done.stdout == ""


@pytest.mark.parametrize("argv", [["pull", "s3://bucket/m:v1", "{tmp}/out"], ["push", "{tmp}/m", "gs://bucket/m:v1"],
                                  ["copy", "ftp://host/m:v1", "oci:{tmp}/layout:v1"]], ids=["pull", "push", "copy"])
def test_a_scheme_ocibridge_does_not_read_says_what_to_write(argv, tmp_path):
    """``s3://``, ``gs://``, ``ftp://`` were answered "invalid reference '…': no scheme expected",
    which names no way to write a model: the line now says the scheme is not one ocibridge reads,
    and how a registry model, a layout and a path are written."""
    make_model(tmp_path / "m")
    argv = [a.format(tmp=tmp_path) for a in argv]
    scheme = next(a for a in argv if "://" in a).split("://")[0]
    done = run(*argv)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert f"ocibridge reads no {scheme}:// places; write a registry model as HOST/REPO[:TAG]" in done.stderr
    assert "oci:PATH[:TAG]" in done.stderr and "no scheme expected" not in done.stderr, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]


def test_a_mirror_job_source_with_a_scheme_it_does_not_read_lists_the_ones_it_does(tmp_path):
    job = tmp_path / "job.toml"
    job.write_text(f'[[sync]]\nsource = "s3://bucket/models"\ntarget = "oci:{tmp_path}/out"\n')
    done = run("mirror", str(job))
    assert done.returncode == 1, done.stderr
    assert "ocibridge reads no s3:// places" in done.stdout and "hf://ORG/NAME" in done.stdout, done.stdout
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("written", ["./m", "{tmp}/m"], ids=["relative", "absolute"])
def test_a_model_directory_given_where_a_registry_reference_goes_says_push_it_first(written, tmp_path):
    """``ocibridge mount ./tiny DIR`` (the model directory, not yet pushed) said "invalid registry
    host '.' in './tiny'": the line now says it is a local path and that a registry reference is
    needed, pushed first; the mount point is not made."""
    make_model(tmp_path / "m")
    ref = written.format(tmp=tmp_path)
    done = subprocess.run([sys.executable, "-m", "ocibridge", "mount", ref, str(tmp_path / "mnt")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"ocibridge: error: {ref} is a local path; a registry reference is needed here "
                                  f"(host/repo:tag or @digest: push it to a registry first: ocibridge push {ref} "
                                  "HOST/REPO:TAG)"), done.stderr
    assert not (tmp_path / "mnt").exists()
