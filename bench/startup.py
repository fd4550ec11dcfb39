"""Start-up of the ``ocibridge`` command (issue 39: every command quick to start).

    .venv/bin/python -m bench.startup --repeat 21 --before 8ae3262

Three measurements, each the median of ``--repeat`` samples with the commands of a row group
alternated (one sample of each in turn), so a load that comes and goes weighs on all alike:

- ``--help`` and ``COMMAND --help``, beside ``python -c pass`` and ``python -c "import httpx"``;
- ``copy`` within one registry: a small model pushed to repository A, then ``ocibridge copy
  A B`` (every blob mounted, nothing uploaded: the registry's log is counted) against
  ``skopeo copy --all docker://A docker://B``, each to a new repository every time;
- ``path REF`` of a model the cache holds (one manifest ``HEAD``), and ``path --offline``;
- ``ls`` of a local store holding two models;
- ``pull REF DIR`` of a tiny model, each into a new directory (``--only pull``).

The copy group's floor is ``python -c "import httpx"``: the HTTP client every registry request
goes through (a fixed choice), imported by any copy before its first request.

``--before REV`` adds the same ocibridge rows for that git revision (exported with ``git
archive``), run in the same rounds. Both trees are byte-compiled first, as an installed package
is: with ``PYTHONDONTWRITEBYTECODE=1`` an uncompiled tree is compiled on every start.
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

from bench.registries import fresh_registry

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
HELP_LINES = (["--help"], ["copy", "--help"], ["push", "--help"], ["path", "--help"], ["k8s", "check", "--help"],
              ["ls", "--help"])


class Timing(NamedTuple):
    wall: float
    cpu: float  # the child's user + system time: less swayed than wall time by other work


def timed(cmd: Sequence[str], env: dict[str, str]) -> Timing:
    start = time.perf_counter()
    # run from "/": ``-m`` puts the working directory first on sys.path, before PYTHONPATH's tree
    child = subprocess.Popen(list(cmd), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd="/")
    assert child.stderr is not None
    err = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    elapsed = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    child.stderr.close()
    if child.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {child.returncode}: {err[-2000:].decode(errors='replace')}")
    return Timing(elapsed, usage.ru_utime + usage.ru_stime)


def alternate(rows: dict[str, Callable[[int], Timing]], repeat: int) -> dict[str, list[Timing]]:
    """``repeat`` rounds, each one sample of every row in turn; one round first, not kept (warm-up)."""
    samples: dict[str, list[Timing]] = {name: [] for name in rows}
    for i in range(repeat + 1):
        for name, run in rows.items():
            sample = run(i)
            if i:
                samples[name].append(sample)
    return samples


def table(title: str, samples: dict[str, list[Timing]], scale: str) -> None:
    """One markdown table: wall time (median, min–max), CPU time (median), and the ratios of
    the medians to the ``scale`` row's."""
    print(f"\n### {title}\n\n| command | median s | min–max s | × {scale} | CPU s (user+sys) | CPU × |\n"
          "|---|---|---|---|---|---|")
    base = statistics.median(t.wall for t in samples[scale])
    base_cpu = statistics.median(t.cpu for t in samples[scale])
    for name, values in samples.items():
        wall = statistics.median(t.wall for t in values)
        cpu = statistics.median(t.cpu for t in values)
        print(f"| {name} | {wall:.3f} | {min(t.wall for t in values):.3f}–{max(t.wall for t in values):.3f} | "
              f"{wall / base:.2f}× | {cpu:.3f} | {cpu / base_cpu:.2f}× |")


class Trees:
    """The ocibridge trees measured: this one, and ``--before REV`` if given."""

    def __init__(self, work: Path, before: str | None):
        self.trees = {"": ROOT}
        if before:
            out = work / f"tree-{before}"
            out.mkdir()
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", before, "ocibridge"], check=True,
                                     capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", str(out)], input=archive, check=True)
            self.trees[f" (before, {before})"] = out
        for tree in self.trees.values():
            compileall.compile_dir(str(tree / "ocibridge"), quiet=1)

    def env(self, tree: Path, base: dict[str, str]) -> dict[str, str]:
        return {**base, "PYTHONPATH": str(tree)}

    def rows(self, label: str, args: Sequence[str], base_env: dict[str, str]) -> dict[str, Callable[[int], Timing]]:
        return {f"{label}{suffix}": (lambda i, t=tree: timed([PY, "-m", "ocibridge", *args], self.env(t, base_env)))
                for suffix, tree in self.trees.items()}


def help_rows(trees: Trees, repeat: int) -> None:
    env = dict(os.environ)
    rows: dict[str, Callable[[int], Timing]] = {
        "`python -c pass`": lambda i: timed([PY, "-c", "pass"], env),
        '`python -c "import httpx"`': lambda i: timed([PY, "-c", "import httpx"], env),
    }
    for line in HELP_LINES:
        rows.update(trees.rows(f"`ocibridge {' '.join(line)}`", line, env))
    table(f"Start-up: --help (median of {repeat})", alternate(rows, repeat), "`python -c pass`")


def copy_rows(trees: Trees, work: Path, repeat: int) -> None:
    env = dict(os.environ)
    model = work / "model"
    model.mkdir()
    for i in range(4):
        (model / f"part{i}.bin").write_bytes(os.urandom(256 * 1024))
    (model / "config.json").write_text('{"model_type": "bench"}')
    with fresh_registry(work) as reg:
        src = f"{reg.host}/bench/a:v1"
        timed([PY, "-m", "ocibridge", "push", str(model), src, "-q"], trees.env(ROOT, env))
        counted: dict[str, list[tuple[int, int]]] = {}

        def counting(name: str, cmd: Callable[[int], list[str]], run_env: dict[str, str]) -> Callable[[int], Timing]:
            def run(i: int) -> Timing:
                reg.mark()
                seconds = timed(cmd(i), run_env)
                up = reg.uploads_since_mark()
                if i:  # not the warm-up round (skopeo's first copy uploads: its blob cache is empty)
                    counted.setdefault(name, []).append((up.blob_bytes, up.mounts))
                return seconds
            return run

        rows: dict[str, Callable[[int], Timing]] = {
            '`python -c "import httpx"` (the floor)': lambda i: timed([PY, "-c", "import httpx"], env)}
        for n, (suffix, tree) in enumerate(trees.trees.items()):
            rows[f"`ocibridge copy A B`{suffix}"] = counting(
                f"ocibridge{suffix}",
                lambda i, n=n: [PY, "-m", "ocibridge", "copy", "-q", src, f"{reg.host}/bench/ob{n}-{i}:v1"],
                trees.env(tree, env))
        rows["`skopeo copy --all`"] = counting("skopeo", lambda i: [
            "skopeo", "--insecure-policy", "copy", "--all", "--quiet", "--src-tls-verify=false",
            "--dest-tls-verify=false", f"docker://{src}", f"docker://{reg.host}/bench/sk-{i}:v1"], env)
        samples = alternate(rows, repeat)
    table(f"Start-up: copy within a registry, 4 × 256 KiB + config (median of {repeat})", samples,
          "`skopeo copy --all`")
    for name, seen in counted.items():
        print(f"\n{name}: registry blob bytes uploaded per run {sorted({b for b, _ in seen})}, "
              f"mounts per run {sorted({m for _, m in seen})}")


def ls_rows(trees: Trees, work: Path, repeat: int) -> None:
    env = {**os.environ, "OCIBRIDGE_STORE": str(work / "ls-store")}
    model = work / "ls-model"
    model.mkdir()
    (model / "w.bin").write_bytes(os.urandom(64 * 1024))
    (model / "config.json").write_text('{"model_type": "bench"}')
    for tag in ("a:v1", "b:v1"):
        timed([PY, "-m", "ocibridge", "push", str(model), tag, "-q"], trees.env(ROOT, env))
    rows = {"`python -c pass`": lambda i: timed([PY, "-c", "pass"], env)}
    rows.update(trees.rows("`ocibridge ls`", ["ls"], env))
    table(f"Start-up: `ls` of a local store with two models (median of {repeat})", alternate(rows, repeat),
          "`python -c pass`")


def path_rows(trees: Trees, work: Path, repeat: int) -> None:
    env = {**os.environ, "OCIBRIDGE_CACHE": str(work / "cache")}
    model = work / "path-model"
    model.mkdir()
    (model / "w.bin").write_bytes(os.urandom(64 * 1024))
    (model / "config.json").write_text('{"model_type": "bench"}')
    with fresh_registry(work) as reg:
        ref = f"{reg.host}/bench/p:v1"
        timed([PY, "-m", "ocibridge", "push", str(model), ref, "-q"], trees.env(ROOT, env))
        for tree in trees.trees.values():  # cold, then once more: this name's record is written
            for _ in range(2):
                timed([PY, "-m", "ocibridge", "path", ref], trees.env(tree, env))
        rows = {"`python -c pass`": lambda i: timed([PY, "-c", "pass"], env)}
        rows.update(trees.rows("`ocibridge path REF` (warm)", ["path", ref], env))
        rows.update(trees.rows("`ocibridge path REF --offline` (warm)", ["path", ref, "--offline"], env))
        samples = alternate(rows, repeat)
    table(f"Start-up: warm `path` (median of {repeat})", samples, "`python -c pass`")


def pull_rows(trees: Trees, work: Path, repeat: int) -> None:
    """``pull REF DIR`` of a tiny model (64 KiB and a config), each into a new directory, with a
    new pull cache: what a pull costs before its bytes (issue 91)."""
    env = {**os.environ, "OCIBRIDGE_CACHE": str(work / "pull-cache")}
    model = work / "pull-model"
    model.mkdir()
    (model / "w.bin").write_bytes(os.urandom(64 * 1024))
    (model / "config.json").write_text('{"model_type": "bench"}')
    out = work / "pulled"
    with fresh_registry(work) as reg:
        ref = f"{reg.host}/bench/pull:v1"
        timed([PY, "-m", "ocibridge", "push", str(model), ref, "-q"], trees.env(ROOT, env))
        rows: dict[str, Callable[[int], Timing]] = {"`python -c pass`": lambda i: timed([PY, "-c", "pass"], env)}
        for n, (suffix, tree) in enumerate(trees.trees.items()):
            rows[f"`ocibridge pull REF DIR`{suffix}"] = (
                lambda i, n=n, t=tree: timed([PY, "-m", "ocibridge", "pull", ref, str(out / f"{n}-{i}"), "-q"],
                                             trees.env(t, env)))
        samples = alternate(rows, repeat)
    table(f"Start-up: `pull` of a tiny model into a new directory (median of {repeat})", samples,
          "`python -c pass`")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.startup", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=21)
    p.add_argument("--before", metavar="REV", help="also measure the ocibridge of this git revision")
    p.add_argument("--only", choices=["help", "copy", "path", "ls", "pull"], action="append", default=[])
    args = p.parse_args(argv)
    if shutil.which("skopeo") is None and (not args.only or "copy" in args.only):
        print("skopeo is not on PATH", file=sys.stderr)
        return 1
    rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True).stdout.strip()
    print(f"- command: `{' '.join(['python -m bench.startup', *(argv if argv is not None else sys.argv[1:])])}`")
    print(f"- git {rev}{' (with uncommitted changes)' if _dirty() else ''}; python {sys.version.split()[0]}; "
          f"{os.cpu_count()} CPUs; load average before: {_load()}")
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        work = Path(tmp)
        trees = Trees(work, args.before)
        if not args.only or "help" in args.only:
            help_rows(trees, args.repeat)
        if not args.only or "copy" in args.only:
            copy_rows(trees, work, args.repeat)
        if not args.only or "path" in args.only:
            path_rows(trees, work, args.repeat)
        if not args.only or "ls" in args.only:
            ls_rows(trees, work, args.repeat)
        if not args.only or "pull" in args.only:
            pull_rows(trees, work, args.repeat)
    print(f"\nload average after: {_load()}")
    return 0


def _load() -> str:
    return " / ".join(f"{x:.1f}" for x in os.getloadavg())


def _dirty() -> bool:
    return bool(subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "ocibridge", "bench"],
                               capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    raise SystemExit(main())
