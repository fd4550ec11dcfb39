"""The least CPU a GiB can cost on this machine, piece by piece, against issue 79's CPU targets.

Each path that moves a model must do some work per byte whatever its code: push hashes the
blob with SHA-256 (OCI names blobs by it), hashes the chunk table (BLAKE3, 1 MiB chunks) and
hands every byte to a socket; pull takes every byte off a socket into a file and hashes it with
SHA-256; serve takes every byte off the client's socket, hands it to the registry's, checks it
(SHA-256, the OCI digest it writes under) and hashes the table, and over Xet also checks the
xorbs' chunk hashes (BLAKE3); a read through serve (issue 91) takes the registry's bytes into
its cache, checks them (SHA-256, and the table's BLAKE3 chunks as they land) and sends them by
sendfile, and a warm read only sends. This bench measures those pieces alone, each in a process of its
own doing nothing else, and adds them up: a floor no implementation of these paths goes below
here. Measured rather than assumed, so a faster machine shows itself.

    .venv/bin/python -m bench.cpu_floor               # 1 GiB, 5 samples of each piece
    .venv/bin/python -m bench.cpu_floor --size 256 --repeat 3

Pieces (CPU seconds, user + system, of the one process doing it; medians):

- ``sha256``, ``blake3``: hashing bytes already in memory (64 MiB hashed over and over; BLAKE3
  with a new hasher per 1 MiB, as a chunk table is made);
- ``send``: a page-cached file to a loopback socket, the cheapest of ``readinto`` + ``sendall``,
  an ``mmap`` sent from, and ``sendfile`` (the sender's CPU: the receiver is another process);
- ``receive to file``: a loopback socket into a file, the cheapest of ``recv_into`` + ``pwrite``
  and ``splice`` through a pipe (what pull does), each in 1 MiB writes and in the smaller ones
  pull makes;
- ``receive to memory``: a loopback socket into one reused buffer (what a relay does).
"""

from __future__ import annotations

import argparse
import fcntl
import mmap
import os
import resource
import socket
import statistics
import sys
import tempfile
from collections.abc import Callable
from multiprocessing import get_context
from pathlib import Path

MiB = 1024 * 1024
PIECE = MiB
#: issue 79's targets, CPU seconds per GiB
TARGETS = {"push": 0.9, "pull": 0.8, "serve, LFS": 1.0, "serve, Xet": 1.0,
           # issue 91's: serve's CPU per GiB a client reads
           "serve read, cold": 1.2, "serve read, warm": 0.25}
#: ways into a file: 1 MiB writes, and the sizes pull writes in (``core/fsutil.WRITE_MAX``,
#: ``stores/registry/splicing.SPLICE_WRITE``: smaller, for the VM's large page-cache folios)
RECEIVES = (("recv+pwrite", MiB), ("splice", MiB), ("recv+pwrite", 32 * 1024), ("splice", 64 * 1024))
#: what each path must do per byte, by piece
PATHS = {
    "push": ("sha256", "blake3", "send"),
    "pull": ("receive to file", "sha256"),
    "serve, LFS": ("receive to memory", "send", "sha256", "blake3"),
    "serve, Xet": ("receive to memory", "send", "sha256", "blake3", "blake3"),
    # a read (issue 91), plain route or Xet alike: cold, the registry's bytes into serve's cache,
    # checked (the layer's SHA-256, the table's BLAKE3 chunks as they land) and sent by sendfile;
    # warm, only the sendfile
    "serve read, cold": ("receive to file", "sha256", "blake3", "send: sendfile"),
    "serve read, warm": ("send: sendfile",),
}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _hash_in_memory(name: str, size: int) -> float:
    import hashlib

    from blake3 import blake3

    block = os.urandom(64 * MiB)
    view = memoryview(block)
    start = _cpu()
    done = 0
    sha = hashlib.sha256()
    while done < size:
        for at in range(0, len(block), PIECE):
            if name == "sha256":
                sha.update(view[at:at + PIECE])
            else:
                blake3(view[at:at + PIECE]).digest()
            done += PIECE
            if done >= size:
                break
    return _cpu() - start


def _sink(port_out: object, mode: str, target: str, write: int, result: object) -> None:
    """A receiver on a free loopback port: discards, or writes into ``target`` in calls of at
    most ``write`` bytes; reports its CPU."""
    listener = socket.create_server(("127.0.0.1", 0))
    port_out.put(listener.getsockname()[1])  # type: ignore[attr-defined]
    conn, _ = listener.accept()
    start = _cpu()
    if mode == "discard":
        buf = bytearray(PIECE)
        while conn.recv_into(buf):
            pass
    elif mode == "recv+pwrite":
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        buf = bytearray(PIECE)
        view = memoryview(buf)
        at = 0
        while n := conn.recv_into(buf):
            done = 0
            while done < n:
                done += os.pwrite(fd, view[done:min(n, done + write)], at + done)
            at += n
        os.close(fd)
    else:  # splice through a pipe, as pull does (stores/registry/splicing.py)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        out, into = os.pipe()
        fcntl.fcntl(into, 1031, MiB)  # F_SETPIPE_SZ, as pull sizes its pipe
        at = 0
        while True:
            n = os.splice(conn.fileno(), into, PIECE)
            if not n:
                break
            moved = 0
            while moved < n:
                moved += os.splice(out, fd, min(n - moved, write), offset_dst=at + moved)
            at += n
        os.close(fd)
    result.put(_cpu() - start)  # type: ignore[attr-defined]


def _send_file(path: str, port: int, how: str) -> float:
    sock = socket.create_connection(("127.0.0.1", port))
    fd = os.open(path, os.O_RDONLY)
    size = os.fstat(fd).st_size
    start = _cpu()
    if how == "sendfile":
        at = 0
        while at < size:
            at += os.sendfile(sock.fileno(), fd, at, min(size - at, 16 * MiB))
    elif how == "mmap":
        with mmap.mmap(fd, size, prot=mmap.PROT_READ) as mapped:
            view = memoryview(mapped)
            for at in range(0, size, PIECE):
                sock.sendall(view[at:at + PIECE])
            view.release()
    else:
        buf = bytearray(PIECE)
        view = memoryview(buf)
        while n := os.readv(fd, [buf]):
            sock.sendall(view[:n])
    took = _cpu() - start
    sock.close()
    os.close(fd)
    return took


def _transfer(source: str, sink_mode: str, target: str, send_how: str, write: int = MiB) -> tuple[float, float]:
    """(sender's CPU, receiver's CPU) for ``source`` over loopback."""
    ctx = get_context("fork")
    ports, results = ctx.Queue(), ctx.Queue()
    receiver = ctx.Process(target=_sink, args=(ports, sink_mode, target, write, results))
    receiver.start()
    sent = _send_file(source, ports.get(), send_how)
    received = float(results.get())
    receiver.join()
    return sent, received


def sendfile_cpu(path: Path) -> float:
    """The sender's CPU seconds of ``path`` (page-cached) sent by ``sendfile`` to a loopback
    reader that discards it: the least a read through serve costs serve when warm."""
    return _transfer(str(path), "discard", str(path) + ".unused", "sendfile")[0]


def _in_child(fn: Callable[..., float], *args: object) -> float:
    """``fn(*args)`` in a fresh process: its CPU counted apart from everything before."""
    ctx = get_context("fork")
    out = ctx.Queue()
    child = ctx.Process(target=lambda: out.put(fn(*args)))
    child.start()
    value = float(out.get())
    child.join()
    return value


def measure(size: int, repeat: int, work: Path) -> dict[str, list[float]]:
    source = work / "source.bin"
    with open(source, "wb") as f:
        for _ in range(size // (64 * MiB)):
            f.write(os.urandom(64 * MiB))
    source.read_bytes()  # in the page cache, as a file just written or read is
    target = str(work / "target.bin")
    samples: dict[str, list[float]] = {}
    for _ in range(repeat):
        samples.setdefault("sha256", []).append(_in_child(_hash_in_memory, "sha256", size))
        samples.setdefault("blake3", []).append(_in_child(_hash_in_memory, "blake3", size))
        for how in ("readinto", "mmap", "sendfile"):
            samples.setdefault(f"send: {how}", []).append(_transfer(str(source), "discard", target, how)[0])
        for mode, write in RECEIVES:
            received = _transfer(str(source), mode, target, "readinto", write)[1]
            samples.setdefault(f"receive to file: {mode}, {write // 1024} KiB writes", []).append(received)
            os.unlink(target)
        received = _transfer(str(source), "discard", target, "readinto")[1]
        samples.setdefault("receive to memory", []).append(received)
    return samples


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.cpu_floor", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=int, default=1024, help="MiB moved by each piece (default 1024)")
    p.add_argument("--repeat", type=int, default=5, help="samples of each piece (default 5)")
    args = p.parse_args(argv)
    if args.size % 64:
        sys.exit("bench.cpu_floor: --size must be a multiple of 64 (MiB)")
    per_gib = 1024 / args.size
    with tempfile.TemporaryDirectory(prefix="cpu-floor-") as tmp:
        samples = measure(args.size * MiB, args.repeat, Path(tmp))
    piece = {name: statistics.median(values) * per_gib for name, values in samples.items()}
    for way in ("send", "receive to file"):  # the cheapest way of each
        piece[way] = min(value for name, value in piece.items() if name.startswith(f"{way}: "))
    print(f"{os.cpu_count()} CPUs, {args.repeat} samples of each piece, CPU seconds per GiB (medians)\n")
    print("| piece | CPU s a GiB | samples |\n|---|---|---|")
    for name, values in samples.items():
        print(f"| {name} | {piece[name]:.2f} | {', '.join(f'{v * per_gib:.2f}' for v in values)} |")
    print(f"\nsend: the cheapest way, {piece['send']:.2f}; "
          f"receive to file: the cheapest way, {piece['receive to file']:.2f}")
    print("\n| path | its least work | floor, CPU s a GiB | target (issues 79, 91) | floor ÷ target |")
    print("|---|---|---|---|---|")
    for path, parts in PATHS.items():
        floor = sum(piece[name] for name in parts)
        print(f"| {path} | {' + '.join(parts)} | {floor:.2f} | {TARGETS[path]:.2f} | {floor / TARGETS[path]:.2f}× |")
    print("\nload average (1, 5, 15 min) at the end: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
