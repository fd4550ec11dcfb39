"""A shaping TCP relay: a fixed delay each way and a rate cap per connection, in userspace.

Used by bench/network.py where the kernel has no ``sch_netem``/``sch_fq`` (the case on the
machine the figures in docs/benchmarks.md come from): every byte is released ``--delay-ms``
after it arrived (each way, so the round trip gains twice that), and no connection moves more
than ``--rate`` bytes per second in either direction, as a CDN or object store caps a stream.

    python bench/shaper.py --listen 10.77.0.2:5000 --upstream 127.0.0.1:5001 --rate 20M --delay-ms 20
"""

from __future__ import annotations

import argparse
import asyncio
import time

PIECE = 64 * 1024
QUEUE_PIECES = 64  # bytes in flight inside the relay per direction: 4 MiB


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, rate: float,
                delay: float) -> None:
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue(QUEUE_PIECES)

    async def release() -> None:
        try:
            while True:
                when, data = await queue.get()
                if not data:
                    break
                wait = when - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass  # the receiving side went away: the reading side stops below
        finally:
            writer.close()

    sender = asyncio.create_task(release())
    paced = time.monotonic()
    try:
        while data := await reader.read(PIECE):
            now = time.monotonic()
            paced = max(paced, now) + len(data) / rate  # the per-connection cap
            put = asyncio.ensure_future(queue.put((max(now + delay, paced), data)))
            await asyncio.wait({put, sender}, return_when=asyncio.FIRST_COMPLETED)
            if not put.done():  # nobody is taking: the other side closed
                put.cancel()
                break
    except (ConnectionError, OSError):
        pass
    if not sender.done():
        await queue.put((0.0, b""))
    await sender


async def _serve(listen: tuple[str, int], upstream: tuple[str, int], rate: float, delay: float) -> None:
    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            up_r, up_w = await asyncio.open_connection(*upstream)
        except OSError:
            client_w.close()
            return
        await asyncio.gather(_pump(client_r, up_w, rate, delay), _pump(up_r, client_w, rate, delay))

    server = await asyncio.start_server(handle, *listen)
    async with server:
        await server.serve_forever()


def _address(text: str) -> tuple[str, int]:
    host, port = text.rsplit(":", 1)
    return host, int(port)


def _rate(text: str) -> float:
    scale = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(text[-1].upper(), 1)
    return float(text[:-1] if scale > 1 else text) * scale


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--listen", required=True)
    p.add_argument("--upstream", required=True)
    p.add_argument("--rate", required=True, help="bytes per second per connection, e.g. 20M")
    p.add_argument("--delay-ms", type=float, default=20.0, help="added each way")
    a = p.parse_args()
    asyncio.run(_serve(_address(a.listen), _address(a.upstream), _rate(a.rate), a.delay_ms / 1000))


if __name__ == "__main__":
    main()
