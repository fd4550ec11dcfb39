"""``ocibridge mount`` against ``pull`` (issue 65), on a fresh local registry, every sample a set
of whole processes with a fresh model cache and ``sync`` between, the two alternating.

    .venv/bin/python -m bench.mount                    # a 1 GiB safetensors file, 3 samples each
    .venv/bin/python -m bench.mount --size 256 --repeat 2
    .venv/bin/python -m bench.mount --timeline 3       # + when a cold read reached each offset
    .venv/bin/python -m bench.mount --size 512 --repeat 5 --baseline /tmp/main   # A/B: main's mount beside

Rows:

- the first tensor: ``ocibridge mount`` + safetensors' ``safe_open(...).get_tensor`` of a 16 KiB
  tensor + ``ocibridge umount``, against ``ocibridge pull`` + the same ``safe_open`` on the pulled
  file; bytes: what the model cache holds after the mount (every byte fetched lands there:
  chunks, layer files, blobs), the whole file for pull;
- a sequential read of the whole file through the mount (``cat FILE > /dev/null``; and mount +
  cat + umount), against ``ocibridge pull`` of it: the throughput ratio (issue 77's target: ≥ 0.9×
  on a quiet machine, the median of ≥ 5 alternating samples);
- the FUSE delivery floor (``bench.fusefloor``), every round: the mount's own machinery over a
  local copy of the pulled file, its pages cached, each sample a fresh mount and a ``cat`` timed as the
  mount's is: what delivery through FUSE costs this machine with no fill beside it; and that cat
  with a pull beside it, at the same time (until both ended): the fill's work and delivery's with
  nothing coupling them, sharing the CPUs as the mount's fill and answers do: the row's floor. The
  mount's cat ÷ each, and the bounds: max(pull, floor) with free cores, pull + floor in series;
- with ``--baseline DIR``: the whole-file rows again, the mount of another checkout's code
  (``DIR/ocibridge``) in the same rounds, the two alternating which goes first;
- the machine's landing floors beside them (``bench.landing``, issue 91), every round: curl of the
  blob to /dev/null, ``dd`` of the size into a new file, a first touch of that much new memory,
  each against curl; ``--pages`` names the free memory each sample lands in (``aged``: as on a
  machine just booted);
- with ``--timeline N``: N more cold sequential reads through the mount, 256 KiB at a time as
  ``cat`` reads, each printing the seconds since its first read at 1, 4, 8, 16, 32, 64 MiB and
  every 128 MiB after: where a whole read waits (the chunk reads before the fill, the fill).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from . import landing
from .fusefloor import Floor
from .lazy_reads import write_model
from .proc import python_path, run_measured
from .registries import fresh_registry
from .run import compile_package

FILE = "model.safetensors"

MiB = 1024 * 1024
OCIBRIDGE = [sys.executable, "-m", "ocibridge"]
FIRST_TENSOR = """
import sys
from safetensors import safe_open
with safe_open(sys.argv[1], framework="numpy") as f:
    f.get_tensor("b.small")
"""


#: a sequential reader of 256 KiB reads (as ``cat``), printing when it reached each mark
TIMELINE_READER = """
import os, sys, time
marks = {m << 20 for m in (1, 4, 8, 16, 32, 64)}
fd, buf, done, said = os.open(sys.argv[1], os.O_RDONLY), bytearray(256 * 1024), 0, []
start = time.perf_counter()
while n := os.readv(fd, [buf]):
    done += n
    if done in marks or done % (128 << 20) == 0:
        said.append(f"{done >> 20} MiB {time.perf_counter() - start:.3f} s")
print(", ".join(said))
"""


def _held(cache: Path) -> int:
    """Bytes of blobs and chunks in a model cache (what was fetched into it), manifests aside."""
    root = cache / "models"
    return sum(p.stat().st_size for sub in ("chunks", "blobs") if (root / sub).is_dir()
               for p in (root / sub).rglob("*") if p.is_file() and p.stat().st_size > 64 * 1024)


class Bench:
    """One registry, one pushed file; each ``sample`` a fresh cache, ``sync`` after."""

    def __init__(self, work: Path, ref: str, pages: str = "as-is", size: int = 0, code: Path | None = None):
        self.work, self.ref = work, ref
        self.pages, self.size = pages, size
        self.cache = work / "cache"
        self.env = {**os.environ, "OCIBRIDGE_CACHE": str(self.cache)}
        #: where its commands run: ``python -m`` puts the working directory first on the path (and the
        #: mount's process inherits it), so another checkout's code runs only from that checkout
        self.cwd: str | None = None
        if code is not None:
            self.cwd = str(code.resolve())
            self.env["PYTHONPATH"] = python_path(self.cwd)
        self.log = open(work / "mount.log", "a")  # noqa: SIM115  # the detached mounts write here

    def run(self, *args: str) -> None:
        done = subprocess.run([*OCIBRIDGE, *args], env=self.env, cwd=self.cwd, stdout=subprocess.DEVNULL,
                              stderr=self.log)
        if done.returncode:  # say why, not only that it failed: the detached mounts' log is the only record
            self.log.flush()
            tail = (self.work / "mount.log").read_text(errors="replace")[-2000:]
            raise SystemExit(f"ocibridge {args[0]} exited {done.returncode}:\n{tail}")

    def sample(self, steps: Callable[[Path], float]) -> tuple[float, int]:
        """(seconds ``steps`` reports, bytes the cache holds after), then everything removed."""
        shutil.rmtree(self.cache, ignore_errors=True)
        shutil.rmtree(self.work / "out", ignore_errors=True)
        subprocess.run(["sync"], check=True)
        landing.prepare(self.pages, self.size)
        took = steps(self.work / "out")
        held = _held(self.cache)
        shutil.rmtree(self.cache, ignore_errors=True)
        shutil.rmtree(self.work / "out", ignore_errors=True)
        subprocess.run(["sync"], check=True)
        return took, held

    def mount_first_tensor(self, out: Path) -> float:
        t = time.perf_counter()
        self.run("mount", self.ref, str(out))
        subprocess.run([sys.executable, "-c", FIRST_TENSOR, str(out / FILE)], check=True)
        took = time.perf_counter() - t
        self.run("umount", str(out))
        return took

    def pull_first_tensor(self, out: Path) -> float:
        t = time.perf_counter()
        self.run("pull", self.ref, str(out), "-q")
        subprocess.run([sys.executable, "-c", FIRST_TENSOR, str(out / FILE)], check=True)
        return time.perf_counter() - t

    def mount_whole(self, out: Path) -> float:
        t = time.perf_counter()
        self.run("mount", self.ref, str(out))
        read = time.perf_counter()
        subprocess.run(f"cat '{out}/{FILE}' > /dev/null", shell=True, check=True)
        self.cat = time.perf_counter() - read
        self.run("umount", str(out))
        return time.perf_counter() - t

    def mount_timeline(self, out: Path) -> float:
        self.run("mount", self.ref, str(out))
        subprocess.run([sys.executable, "-c", TIMELINE_READER, str(out / FILE)], check=True)
        self.run("umount", str(out))
        return 0.0

    def pull_whole(self, out: Path) -> float:
        t = time.perf_counter()
        self.run("pull", self.ref, str(out), "-q")
        return time.perf_counter() - t


def _cell(samples: list[float]) -> str:
    return f"{statistics.median(samples):.2f} s ({', '.join(f'{x:.2f}' for x in samples)})"


def _blob_url(registry: str, ref: str) -> str:
    """The URL of the largest layer of ``ref`` (``host/repo:tag``) on a plain-HTTP registry."""
    repo, tag = ref.split("/", 1)[1].rsplit(":", 1)
    manifest = json.loads(subprocess.run(
        ["curl", "-sSf", "-H", "Accept: application/vnd.oci.image.manifest.v1+json",
         f"http://{registry}/v2/{repo}/manifests/{tag}"], check=True, capture_output=True).stdout)
    layer = max(manifest["layers"], key=lambda d: d["size"])
    return f"http://{registry}/v2/{repo}/blobs/{layer['digest']}"


def floor_lines(pull: float, cat: float, floor: float, beside: float) -> list[str]:
    """The mount's cat (seconds, medians) against the FUSE delivery floor, against pull and that
    floor's cat run at the same time (``beside``: the row's floor), and the bounds they set."""
    ideal = max(pull, floor)
    return [f"- the mount's cat ÷ the FUSE delivery floor alone (time): {cat / floor:.2f}×",
            f"- the row's floor: the cat waits for the fill (pull's engine) and for delivery through FUSE, which "
            f"share the machine's CPUs: pull and the floor's cat at the same time took {beside:.2f} s: "
            f"the mount's cat ÷ that: **{cat / beside:.2f}×**; the row at that floor: pull ÷ it = {pull / beside:.2f}×",
            f"- bounds: with the fill and delivery wholly overlapped on free cores, max(pull, floor) = {ideal:.2f} s, "
            f"pull ÷ it = {pull / ideal:.2f}×; one after the other, pull ÷ (pull + floor) = "
            f"{pull / (pull + floor):.2f}×"]


def run(size_mib: int, work: Path, repeat: int, timeline: int = 0, pages: str = "as-is",
        baseline: Path | None = None) -> list[str]:
    compile_package(baseline)  # (as an installed copy is: compiled)
    with fresh_registry(work) as reg:
        src = work / "src"
        write_model(src, size_mib * MiB)
        size = (src / FILE).stat().st_size
        ref = f"{reg.host}/bench/mount{size_mib}:v1"
        subprocess.run([*OCIBRIDGE, "push", str(src), ref, "-q"], check=True, stdout=subprocess.DEVNULL)
        shutil.rmtree(src)
        url = _blob_url(reg.host, ref)
        b = Bench(work, ref, pages, size)
        base = Bench(work, ref, pages, size, code=baseline) if baseline is not None else None
        b.sample(b.pull_whole)  # warm-up: the interpreter's and the registry's first touch
        if base is not None:
            base.sample(base.mount_whole)  # (its modules read once, as this checkout's were)
        b.run("pull", ref, str(work / "floor-src"), "-q")  # the floor's local copy: the same bytes
        shutil.rmtree(b.cache, ignore_errors=True)
        floor = Floor(work / "floor-src", work / "floor-mount")
        first: dict[str, list[float]] = {"mount": [], "pull": []}
        moved: list[int] = []
        whole: dict[str, list[float]] = {"mount": [], "cat": [], "pull": [], "floor": [], "beside": [], "base": [],
                                   "base cat": []}
        floors: dict[str, list[float]] = {landing.CURL_NULL: [], landing.FILE_WRITE: [], landing.FRESH_MEMORY: []}
        for round_ in range(repeat):
            took, held = b.sample(b.mount_first_tensor)
            first["mount"].append(took)
            moved.append(held)
            first["pull"].append(b.sample(b.pull_first_tensor)[0])
            mounts = [(b, "mount", "cat"), *([(base, "base", "base cat")] if base is not None else [])]
            for bench, total, cat in mounts if round_ % 2 == 0 else reversed(mounts):  # (which goes first alternates)
                whole[total].append(bench.sample(bench.mount_whole)[0])
                whole[cat].append(bench.cat)
            whole["pull"].append(b.sample(b.pull_whole)[0])
            landing.prepare(pages, size)
            whole["floor"].append(floor.cat(FILE))
            whole["beside"].append(b.sample(lambda out: floor.cat(FILE, beside=lambda: b.pull_whole(out)))[0])
            landing.prepare(pages, size)
            floors[landing.CURL_NULL].append(run_measured(landing.curl_null(url)).seconds)
            landing.prepare(pages, size)
            floors[landing.FILE_WRITE].append(landing.write_sample(work / "written", size).seconds)
            landing.prepare(pages, size)
            floors[landing.FRESH_MEMORY].append(run_measured(landing.fresh_memory(size)).seconds)
        for _ in range(timeline):
            print("timeline of a cold read through the mount: ", end="", flush=True)
            b.sample(b.mount_timeline)
        m = {k: statistics.median(v) for k, v in {**first, **{f"w{k}": v for k, v in whole.items() if v}}.items()}
        most = max(moved)
        mib = size / MiB
        return [
            f"| {size_mib} MiB safetensors | first tensor (16 KiB): mount + safe_open + umount, "
            f"{most / MiB:.1f} MiB fetched at most ({most / size:.2%}) | {_cell(first['mount'])} "
            f"| pull + safe_open {_cell(first['pull'])}, {size / MiB:.0f} MiB | {m['mount'] / m['pull']:.3f}× |",
            f"| {size_mib} MiB | whole file, sequential: cat through the mount (throughput "
            f"{mib / m['wcat']:.0f} MiB/s) | {_cell(whole['cat'])} | pull {_cell(whole['pull'])} "
            f"({mib / m['wpull']:.0f} MiB/s) | {m['wpull'] / m['wcat']:.2f}× pull's |",
            f"| {size_mib} MiB | the same, mount + cat + umount | {_cell(whole['mount'])} "
            f"| pull {_cell(whole['pull'])} | {m['wpull'] / m['wmount']:.2f}× pull's |",
            *([f"| {size_mib} MiB | cat through the baseline's mount ({baseline}), same rounds (throughput "
               f"{mib / m['wbase cat']:.0f} MiB/s) | {_cell(whole['base cat'])} | pull {_cell(whole['pull'])} "
               f"| {m['wpull'] / m['wbase cat']:.2f}× pull's |",
               f"| {size_mib} MiB | the baseline's mount + cat + umount | {_cell(whole['base'])} "
               f"| pull {_cell(whole['pull'])} | {m['wpull'] / m['wbase']:.2f}× pull's |"] if base is not None else []),
            f"| {size_mib} MiB | FUSE delivery floor: cat through a fresh mount of a local copy, its pages cached "
            f"(throughput {mib / m['wfloor']:.0f} MiB/s) | {_cell(whole['floor'])} | cat through the mount "
            f"{_cell(whole['cat'])} | {m['wcat'] / m['wfloor']:.2f}× the floor's time |",
            f"| {size_mib} MiB | pull and the FUSE floor's cat at the same time, until both ended | "
            f"{_cell(whole['beside'])} | cat through the mount {_cell(whole['cat'])} "
            f"| {m['wcat'] / m['wbeside']:.2f}× its time |",
            *(f"| {size_mib} MiB | {name} (the machine's floor) | {_cell(xs)} | | |" for name, xs in floors.items()),
            "",
            *floor_lines(m["wpull"], m["wcat"], m["wfloor"], m["wbeside"]),
            "",
            "against curl to /dev/null, each median (which figure is the machine's floor):",
            *landing.ratio_lines({**{name: statistics.median(xs) for name, xs in floors.items()},
                                  "cat through the mount": m["wcat"], "pull": m["wpull"],
                                  "FUSE delivery floor": m["wfloor"], "pull beside the floor's cat": m["wbeside"]}),
        ]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.mount", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=int, default=1024, help="the file's size in MiB (default 1024)")
    p.add_argument("--repeat", type=int, default=3, help="alternating samples of each (medians, every sample shown)")
    p.add_argument("--timeline", type=int, default=0, metavar="N",
                   help="N cold sequential reads more, each printing when it reached each offset")
    p.add_argument("--baseline", type=Path, default=None, metavar="DIR",
                   help="another checkout whose mount is timed in the same rounds (DIR/ocibridge)")
    landing.pages_argument(p)
    args = p.parse_args(argv)
    print(f"machine before: {landing.state()}; each sample's pages: {args.pages}\n")
    print("| file | measure | ocibridge mount | against | ratio |\n|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="mountbench-") as tmp:
        for row in run(args.size, Path(tmp), args.repeat, args.timeline, args.pages, args.baseline):
            print(row, flush=True)
    print("load average (1, 5, 15 min) at the end: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    print(f"machine after: {landing.state()}")


if __name__ == "__main__":
    main()
