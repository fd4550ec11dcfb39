"""oras-py as a command, so the benchmark can time it and read its peak RSS like any other tool.

    python -m bench.oras_cli push HOST/REPO:TAG FILE...   (run in the model directory)
    python -m bench.oras_cli pull HOST/REPO:TAG OUTDIR
"""

from __future__ import annotations

import sys

import oras.client


def main(argv: list[str]) -> int:
    command, target, *rest = argv
    client = oras.client.OrasClient(insecure=True)
    if command == "push":
        client.push(target=target, files=rest, quiet=True)
    elif command == "pull":
        client.pull(target=target, outdir=rest[0])
    else:
        raise SystemExit(f"unknown command {command}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
