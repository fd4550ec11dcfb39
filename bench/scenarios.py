"""The measured scenarios. Tools are interleaved per repetition so drift hits them all alike;
every push goes to an empty registry (started per sample) so the registry really ingests it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from . import tools
from .models import Model
from .proc import CommandFailed, Sample, Series, python_path, run_measured, run_quiet
from .registries import BenchRegistry, fresh_registry

REPO_ROOT = Path(__file__).resolve().parent.parent
TAG = "v1"
#: the imports every registry command needs before its first request, nothing of ocibridge's own
STARTUP_FLOOR = ("import ocibridge.core.httpx_defer as d; d.defer_httpx_extras(for_command=True); "
                 "import httpx, httpcore, h11")

SampleFn = Callable[[int], Sample]


@dataclass
class Results:
    """scenario → tool → series, in the order measured."""

    table: dict[str, dict[str, Series]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def get(self, scenario: str, tool: str) -> Series | None:
        return self.table.get(scenario, {}).get(tool)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


def _only(tools_: dict[str, SampleFn | str], only: tuple[str, ...]) -> dict[str, SampleFn | str]:
    return {k: v for k, v in tools_.items() if not only or k in only}


class Bench:
    def __init__(self, workdir: Path, repeat: int, results: Results, log: Callable[[str], None]):
        self.workdir = workdir
        self.repeat = repeat
        self.results = results
        self.log = log
        # ocibridge's digest cache lives in the work dir (never the user's); rows marked "cold"
        # turn it off so the files are hashed as on a first push.
        path = python_path(str(REPO_ROOT))  # + a site of wheels
        self.env = {**os.environ, "PYTHONPATH": path, "OCIBRIDGE_CACHE_DIR": str(workdir / "cache")}
        self.has_registry_store = tools.registry_store_ready()
        self.digests: dict[Path, str] = {}

    # -- plumbing -------------------------------------------------------------------------
    def tmp(self, prefix: str) -> Path:
        return Path(tempfile.mkdtemp(prefix=prefix, dir=self.workdir))

    def run(self, cmd: list[str], cwd: Path | None = None, cold: bool = False) -> Sample:
        """Flush dirty pages first (untimed) so one tool's writeback is not billed to the next."""
        os.sync()
        env = {**self.env, "OCIBRIDGE_DIGEST_CACHE": "0"} if cold else self.env
        return run_measured(cmd, cwd=str(cwd) if cwd else None, env=env)

    def digest(self, path: Path) -> str:
        if path not in self.digests:
            self.digests[path] = _sha256(path)
        return self.digests[path]

    def measure(self, scenario: str, tools_: dict[str, SampleFn | str]) -> None:
        """Run every tool ``repeat`` times, interleaved; a string instead of a function says
        why that tool cannot run (it is shown in the table)."""
        row = self.results.table.setdefault(scenario, {})
        for name, fn in tools_.items():
            row.setdefault(name, Series(name))
            if isinstance(fn, str):
                row[name].extra["error"] = fn
        for i in range(self.repeat):
            for name, fn in tools_.items():
                series = row[name]
                if isinstance(fn, str) or "error" in series.extra:
                    continue
                try:
                    sample = fn(i)
                except CommandFailed as e:
                    series.extra["error"] = str(e).splitlines()[-1][:200] if str(e) else "failed"
                    self.log(f"  {scenario} / {name}: FAILED {e}")
                    continue
                series.samples.append(sample)
                self.log(f"  {scenario} / {name} #{i + 1}: {sample.seconds:.2f} s, {sample.rss_mb:.0f} MB")

    def ocibridge_or_none(self, fn: SampleFn) -> SampleFn | str:
        return fn if self.has_registry_store else "ocibridge has no registry store yet"

    # -- push / pull ----------------------------------------------------------------------
    def push(self, model: Model, layout: str, parallel: int, only: tuple[str, ...] = ()) -> None:
        """Push ``model`` into an empty registry with every tool (or those in ``only``)."""
        weights = [model.root / f for f in model.files]

        def floor(i: int) -> Sample:
            with fresh_registry(self.workdir) as reg:
                repo = "bench/floor"
                uploads = [(p, tools.start_upload(reg.url, repo), self.digest(p)) for p in weights]
                return self.run(tools.curl_put(uploads, parallel))

        def ocibridge(i: int) -> Sample:
            with fresh_registry(self.workdir) as reg:
                return self.run(tools.ocibridge("push", str(model.root), f"{reg.host}/bench/ob:{TAG}"), cold=True)

        def ocibridge_no_chunks(i: int) -> Sample:  # what the default's chunk table costs (issue 43)
            with fresh_registry(self.workdir) as reg:
                return self.run(tools.ocibridge("push", str(model.root), f"{reg.host}/bench/obn:{TAG}",
                                                "--no-chunks"), cold=True)

        def ocibridge_cached(i: int) -> Sample:
            with fresh_registry(self.workdir) as reg:
                return self.run(tools.ocibridge("push", str(model.root), f"{reg.host}/bench/obc:{TAG}"))

        def ocibridge_layout(i: int) -> Sample:
            with fresh_registry(self.workdir) as reg:
                return self.run(tools.ocibridge("copy", layout, f"{reg.host}/bench/obl:{TAG}"))

        def skopeo(i: int) -> Sample:
            with fresh_registry(self.workdir) as reg:
                return self.run(tools.skopeo_copy(layout, f"docker://{reg.host}/bench/sk:{TAG}"))

        def oras(i: int) -> Sample:
            with fresh_registry(self.workdir) as reg:
                return self.run(tools.oras("push", f"{reg.host}/bench/oras:{TAG}", *model.files), cwd=model.root)

        self.measure(f"push {model.name}", _only({
            "curl (floor)": floor,
            "ocibridge": self.ocibridge_or_none(ocibridge),
            "ocibridge --no-chunks": self.ocibridge_or_none(ocibridge_no_chunks),
            "ocibridge (digests cached)": self.ocibridge_or_none(ocibridge_cached),
            "ocibridge (from layout)": self.ocibridge_or_none(ocibridge_layout),
            "skopeo (from layout)": skopeo,
            "oras-py": oras,
        }, only))

    def seed(self, reg: BenchRegistry, model: Model, layout: str, repo: str) -> None:
        """Put ``model`` into ``reg`` (unmeasured): with ocibridge if it can, else with skopeo."""
        if self.has_registry_store:
            run_quiet(tools.ocibridge("push", str(model.root), f"{reg.host}/{repo}:{TAG}"), env=self.env)
        else:
            run_quiet(tools.skopeo_copy(layout, f"docker://{reg.host}/{repo}:{TAG}"), env=self.env)

    def pull(self, reg: BenchRegistry, model: Model, repo: str, parallel: int, only: tuple[str, ...] = ()) -> None:
        """Pull the artifact in ``reg/repo`` with every tool, each into a fresh directory."""
        manifest = json.loads(run_quiet(["curl", "-sS", "-f", "-H",
                                         "Accept: application/vnd.oci.image.manifest.v1+json",
                                         f"{reg.url}/v2/{repo}/manifests/{TAG}"]))
        layers = [layer["digest"] for layer in manifest["layers"]]
        ref = f"{reg.host}/{repo}:{TAG}"

        def fresh(prefix: str, fn: Callable[[Path], Sample]) -> SampleFn:
            def sample(i: int) -> Sample:
                out = self.tmp(prefix)
                try:
                    return fn(out)
                finally:
                    shutil.rmtree(out, ignore_errors=True)
            return sample

        self.measure(f"pull {model.name}", _only({
            "curl (floor)": fresh("floor-", lambda out: self.run(tools.curl_get(
                reg.url, repo, [(d, out / d.split(":")[1]) for d in layers], parallel))),
            "sha256 (floor)": lambda i: self.run(tools.sha256_files([model.root / f for f in model.files])),
            "openssl sha256 (floor)": lambda i: self.run(tools.openssl_sha256([model.root / f for f in model.files])),
            # what any Python client pays at least: one GET, 32 KiB writes, a hashing thread
            "python http.client (floor 2)": fresh("raw-", lambda out: self.run(
                [tools.PY, "-m", "bench.rawpull", f"{reg.url}/v2/{repo}/blobs/{layers[0]}", str(out / "blob")]))
            if len(layers) == 1 else "one blob only (bench/rawpull.py)",
            "ocibridge": self.ocibridge_or_none(fresh("ob-", lambda out: self.run(
                tools.ocibridge("pull", ref, str(out / "model"))))),
            "ocibridge (to layout)": self.ocibridge_or_none(fresh("obl-", lambda out: self.run(
                tools.ocibridge("pull", ref, f"oci:{out / 'layout'}:{TAG}")))),
            "skopeo (to layout)": fresh("sk-", lambda out: self.run(
                tools.skopeo_copy(f"docker://{ref}", f"oci:{out / 'layout'}:{TAG}"))),
            "oras-py": fresh("oras-", lambda out: self.run(tools.oras("pull", ref, str(out / "model")))),
        }, only))

    def repush(self, reg: BenchRegistry, model: Model, repo: str) -> None:
        """Push the same model again to the same repository: nothing should be uploaded."""
        def ocibridge(i: int) -> Sample:
            reg.mark()
            sample = self.run(tools.ocibridge("push", str(model.root), f"{reg.host}/{repo}:{TAG}"))
            self._count_uploads(sample, reg, f"re-push {model.name}", "ocibridge")
            return sample

        self.measure(f"re-push {model.name}", {"ocibridge": self.ocibridge_or_none(ocibridge)})

    def fresh_copy_push(self, reg: BenchRegistry, model: Model, repo: str) -> None:
        """Push a fresh copy of the model (new inodes and times, same name: the same artifact)
        under a new tag, the digest cache cold, to the repository that holds it: every blob must
        be asked for and none sent (issue 32). Its time sets against the first push's."""
        def ocibridge(i: int) -> Sample:
            copy = model.root.parent / f"fresh-copy-{i}" / model.root.name
            shutil.copytree(model.root, copy)
            try:
                reg.mark()
                sample = self.run(tools.ocibridge("push", str(copy), f"{reg.host}/{repo}:fresh{i}"),
                                  cold=True)
                self._count_uploads(sample, reg, f"push of a fresh copy {model.name}", "ocibridge")
            finally:
                shutil.rmtree(copy.parent)
            return sample

        self.measure(f"push of a fresh copy {model.name}", {"ocibridge": self.ocibridge_or_none(ocibridge)})

    def _count_uploads(self, sample: Sample, reg: BenchRegistry, scenario: str, tool: str) -> None:
        counted = reg.uploads_since_mark()
        series = self.results.table.setdefault(scenario, {}).setdefault(tool, Series(tool))
        series.extra["registry blob bytes"] = max(int(series.extra.get("registry blob bytes", 0)),
                                                  counted.blob_bytes)
        series.extra["mounts"] = counted.mounts
        if sample.stdout.strip().startswith("{"):
            summary = json.loads(sample.stdout)
            series.extra["bytesCopied"] = max(int(series.extra.get("bytesCopied", 0)), summary["bytesCopied"])

    # -- copy -----------------------------------------------------------------------------
    def copy_within(self, reg: BenchRegistry, model: Model, repo: str) -> None:
        scenario = f"copy within a registry {model.name}"
        src = f"{reg.host}/{repo}:{TAG}"

        def ocibridge(i: int) -> Sample:
            reg.mark()
            sample = self.run(tools.ocibridge("copy", src, f"{reg.host}/bench/copy-ob{i}:{TAG}"))
            self._count_uploads(sample, reg, scenario, "ocibridge")
            return sample

        def skopeo(i: int) -> Sample:
            reg.mark()
            sample = self.run(tools.skopeo_copy(f"docker://{src}", f"docker://{reg.host}/bench/copy-sk{i}:{TAG}"))
            self._count_uploads(sample, reg, scenario, "skopeo")
            return sample

        def startup(i: int) -> Sample:
            """What any Python client on httpx pays before its first request: the interpreter
            and httpx's imports (httpx's own CLI kept out, as ocibridge does)."""
            return self.run([tools.PY, "-c", STARTUP_FLOOR])

        self.measure(scenario, {"python + import httpx (floor)": startup,
                                "ocibridge": self.ocibridge_or_none(ocibridge), "skopeo": skopeo})

    def copy_between(self, reg: BenchRegistry, model: Model, repo: str, only: tuple[str, ...] = ()) -> None:
        src = f"{reg.host}/{repo}:{TAG}"

        def ocibridge(i: int) -> Sample:
            with fresh_registry(self.workdir) as dst:
                return self.run(tools.ocibridge("copy", src, f"{dst.host}/bench/copy:{TAG}"))

        def skopeo(i: int) -> Sample:
            with fresh_registry(self.workdir) as dst:
                return self.run(tools.skopeo_copy(f"docker://{src}", f"docker://{dst.host}/bench/copy:{TAG}"))

        self.measure(f"copy between registries {model.name}",
                     _only({"ocibridge": self.ocibridge_or_none(ocibridge), "skopeo": skopeo}, only))

    # -- local conversions ----------------------------------------------------------------
    def carton(self, carton: Path, name: str) -> None:
        def floor(i: int) -> Sample:
            return self.run([tools.PY, "-m", "bench.cartonzip", str(carton)])

        def floor_write(i: int) -> Sample:
            out = self.tmp("cartonfloor-")
            try:
                return self.run([tools.PY, "-m", "bench.cartonzip", str(carton), str(out)])
            finally:
                shutil.rmtree(out, ignore_errors=True)

        def ocibridge(i: int) -> Sample:
            out = self.tmp("carton-")
            try:
                return self.run(tools.ocibridge("push", str(carton), f"oci:{out / 'layout'}:{TAG}"), cold=True)
            finally:
                shutil.rmtree(out, ignore_errors=True)

        self.measure(f"carton → layout {name}", {
            "read+hash (floor)": floor,
            "read+hash+write (floor 2)": floor_write,
            "ocibridge": ocibridge if tools.carton_ready() else "ocibridge.kinds.carton is missing",
        })

    def pack_and_push(self, model: Model) -> None:
        """Many small files: pack into a layout, and push to an empty registry."""
        def pack(i: int) -> Sample:
            out = self.tmp("pack-")
            try:
                return self.run(tools.ocibridge("push", str(model.root), f"oci:{out / 'layout'}:{TAG}"), cold=True)
            finally:
                shutil.rmtree(out, ignore_errors=True)

        def push(i: int) -> Sample:
            with fresh_registry(self.workdir) as reg:
                return self.run(tools.ocibridge("push", str(model.root), f"{reg.host}/bench/files:{TAG}"), cold=True)

        self.measure(f"files {model.name}", {
            "ocibridge pack (to layout)": pack,
            "ocibridge push": self.ocibridge_or_none(push),
        })
