"""push and pull over a 1 Gbit/s wire (issue 79): ``bench.push_row`` and ``bench.pull_row``, curl's
rows beside ocibridge's, and a whole model into memory (issue 80: ``bench.load_tensors``, curl's
row beside it), run in a private network namespace whose loopback the kernel shapes to
1 Gbit/s (``tc qdisc … tbf``), so that a change that only helps on an unshaped loopback shows.

    sudo .venv/bin/python -m bench.shaped_wire --repeat 5
    sudo .venv/bin/python -m bench.shaped_wire --rate 1gbit --size-mib 1024 --repeat 3
    sudo .venv/bin/python -m bench.shaped_wire --rows load --repeat 5

Needs root (``unshare -n``, ``tc`` or, without iproute2, the pyroute2 package) and the kernel's
``sch_tbf``. Every process of the rows (the registry, curl, ocibridge) runs inside the namespace,
where the loopback is the only link.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys

from .scenarios import REPO_ROOT

#: each row's module and its arguments for (repeat, size in MiB)
ROWS = {
    "push": lambda repeat, size: ("bench.push_row", ["--repeat", str(repeat), "--size-mib", str(size)]),
    "pull": lambda repeat, size: ("bench.pull_row", ["--repeat", str(repeat), "--size-mib", str(size)]),
    "load": lambda repeat, size: ("bench.load_tensors", ["--repeat", str(repeat), "--size", str(size)]),
}


def _shape(rate: str) -> None:
    """Bring the namespace's loopback up and cap it at ``rate``; say what the kernel set."""
    if shutil.which("tc") is None or shutil.which("ip") is None:
        _shape_by_netlink(rate)
        return
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    subprocess.run(["tc", "qdisc", "add", "dev", "lo", "root", "tbf", "rate", rate, "burst", "1mb",
                    "latency", "50ms"], check=True)
    shown = subprocess.run(["tc", "qdisc", "show", "dev", "lo"], check=True, capture_output=True, text=True)
    print(f"shaped: {shown.stdout.strip()}", flush=True)


def _shape_by_netlink(rate: str) -> None:
    """The same queue set through netlink by pyroute2, where the machine has no iproute2 (the GPU
    machines: bench/gpu/boot_rows.sh carries its wheel); the kernel's own answer is printed."""
    try:
        from pyroute2 import IPRoute  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        raise SystemExit("bench.shaped_wire: needs iproute2's ip and tc, or the pyroute2 package") from None
    with IPRoute() as ipr:
        lo = ipr.link_lookup(ifname="lo")[0]
        ipr.link("set", index=lo, state="up")
        ipr.tc("add", "tbf", lo, 0x10000, rate=rate, burst=1024 * 1024, latency="50ms")
        queues = [q for q in ipr.get_qdiscs(index=lo) if q.get_attr("TCA_KIND") == "tbf"]
        shown = [f"tbf rate {q.get_attr('TCA_OPTIONS').get_attr('TCA_TBF_PARMS')['rate'] * 8:,} bit/s" for q in queues]
    print(f"shaped (netlink): {', '.join(shown) or 'no tbf queue on lo'}", flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.shaped_wire", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rate", default="1gbit", help="tc's rate of the loopback (default 1gbit)")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--size-mib", type=int, default=1024)
    p.add_argument("--rows", nargs="+", choices=sorted(ROWS), default=["push", "pull"],
                   help="which rows (default: push pull)")
    p.add_argument("--baseline", default=None,
                   help="another checkout measured in each row's rounds too (its push, pull, load_tensors)")
    p.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if not args.inside:
        if os.geteuid() != 0:
            print("bench.shaped_wire: needs root (unshare -n, tc)", file=sys.stderr)
            return 2
        again = [sys.executable, "-m", "bench.shaped_wire", "--inside", "--rate", args.rate,
                 "--rows", *args.rows, "--repeat", str(args.repeat), "--size-mib", str(args.size_mib),
                 *(["--baseline", args.baseline] if args.baseline else [])]
        return subprocess.run(["unshare", "-n", *again], cwd=REPO_ROOT, check=False).returncode
    _shape(args.rate)
    for row in args.rows:
        module, row_args = ROWS[row](args.repeat, args.size_mib)
        if args.baseline:
            row_args += ["--baseline", args.baseline]
        done = subprocess.run([sys.executable, "-m", module, *row_args], cwd=REPO_ROOT, check=False)
        if done.returncode:
            return done.returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
