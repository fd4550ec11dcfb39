"""Where one publish through serve spends its wall time (issue 64): the CPU seconds of the client
(huggingface_hub and hf_xet), serve and the registry, sampled every 0.1 s over one
``upload_folder``, and the moments serve's log names (each xorb received, the file built, the
commit), beside an ``ocibridge push`` of the same model into the same registry.

    .venv/bin/python -m bench.publish_timeline                 # 1024 MiB over Xet
    .venv/bin/python -m bench.publish_timeline --lfs --size 4096

The ratios are ``bench.publish``'s; this shows why a ratio is what it is: when each process
works, and what is left when the client has sent its last byte.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from .proc import run_measured
from .publish import UPLOAD, make_model, serving
from .registries import fresh_registry
from .serve import base_env, cpu_of

#: seconds between two samples of the three processes' CPU
TICK = 0.1
#: the log lines shown as moments (the rest of serve's log is left out)
MOMENTS = ("xorb received", "was built as its xorbs came", "committed", "relayed")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=int, default=1024, help="weights size in MiB")
    p.add_argument("--lfs", action="store_true", help="over LFS (HF_HUB_DISABLE_XET=1), not Xet")
    p.add_argument("--every", type=int, default=3, help="print every N-th sample")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-timeline-") as tmp:
        work = Path(tmp)
        model = make_model(work / "model", args.size)
        with fresh_registry(work) as reg:
            env = {**base_env(work), "OCIBRIDGE_CACHE": str(work / "push-cache")}
            r0 = reg.cpu_seconds()
            push = run_measured([sys.executable, "-m", "ocibridge", "push", str(model),
                                 f"{reg.host}/bench/push:latest", "-q"], env=env)
            print(f"push: wall {push.seconds:.2f} s, client CPU {push.cpu:.2f} s, "
                  f"registry CPU {reg.cpu_seconds() - r0:.2f} s")
            log = work / "serve.log"
            with serving(work, f"{reg.host}/bench", log) as (url, proc):
                env = {**base_env(work), "HF_ENDPOINT": url, "HF_TOKEN": "bench-token", "HF_HOME": str(work / "hf")}
                if args.lfs:
                    env["HF_HUB_DISABLE_XET"] = "1"
                samples: list[tuple[float, float, float, float]] = []
                moments: list[tuple[float, str]] = []
                s0, g0 = cpu_of(proc.pid), reg.cpu_seconds()
                done = threading.Event()
                started = time.monotonic()

                def sample(client_pid: int) -> None:
                    used = 0.0
                    seen = 0
                    while not done.wait(TICK):
                        with contextlib.suppress(OSError):  # exited: its last figure stands
                            used = cpu_of(client_pid)
                        at = time.monotonic() - started
                        samples.append((at, used, cpu_of(proc.pid) - s0, reg.cpu_seconds() - g0))
                        lines = log.read_text(errors="replace").splitlines()
                        moments.extend((at, line) for line in lines[seen:] if any(m in line for m in MOMENTS))
                        seen = len(lines)

                uploader = subprocess.Popen([sys.executable, "-c", UPLOAD, "acme/timeline", str(model)], env=env)
                sampler = threading.Thread(target=sample, args=(uploader.pid,))
                sampler.start()
                _, status, usage = os.wait4(uploader.pid, 0)  # its own CPU, to the end (the samples miss the last)
                wall = time.monotonic() - started
                done.set()
                sampler.join()
                uploader.returncode = os.waitstatus_to_exitcode(status)
                if uploader.returncode != 0 or not samples:
                    tail = log.read_text(errors="replace")[-2000:]
                    sys.exit(f"bench.publish_timeline: the upload exited {uploader.returncode}; "
                             f"serve's log ends:\n{tail}")
                samples.append((wall, usage.ru_utime + usage.ru_stime, cpu_of(proc.pid) - s0, reg.cpu_seconds() - g0))
        way = "LFS" if args.lfs else "Xet"
        last = samples[-1]
        print(f"{way}: wall {wall:.2f} s = {wall / push.seconds:.2f}× push; CPU client {last[1]:.2f} s, "
              f"serve {last[2]:.2f} s, registry {last[3]:.2f} s: {sum(last[1:]):.2f} s in all")
        print("\n| s | client CPU s | serve CPU s | registry CPU s | cores busy since the row before |")
        print("|---|---|---|---|---|")
        before = (0.0, 0.0, 0.0, 0.0)
        for row in samples[args.every - 1::args.every]:
            busy = (sum(row[1:]) - sum(before[1:])) / max(row[0] - before[0], 1e-9)
            print(f"| {row[0]:.1f} | {row[1]:.2f} | {row[2]:.2f} | {row[3]:.2f} | {busy:.2f} |")
            before = row
        print("\nserve's log, by when it was seen (±0.1 s):")
        for at, line in moments:
            said = line.split(": ", 2)[-1] if "xorb received" in line else line.split(": ", 1)[-1]
            print(f"  {at:5.1f} s  {said[:110]}")


if __name__ == "__main__":
    main()
