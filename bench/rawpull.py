"""The least a verified pull costs in Python: the floor a pull is compared with beside curl.

``python -m bench.rawpull URL FILE``: one HTTP/1.1 GET (the standard library's client, no
retries, no auth, no Range), the body received into 512 KiB buffers and written in calls of
32 KiB (as ocibridge writes), SHA-256 computed in a second thread from the same buffers. It
prints the digest. What it leaves out is what makes a client usable (redirects, auth,
resume, parts, interrupts); what it keeps is the work no verified pull can skip.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import queue
import sys
import threading
from urllib.parse import urlsplit

BUFFER = 512 * 1024
WRITE = 32 * 1024
BUFFERS = 8


def pull(url: str, path: str) -> str:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port or 80)
    conn.request("GET", parts.path)
    response = conn.getresponse()
    if response.status != 200:
        raise SystemExit(f"{url}: {response.status}")
    hasher = hashlib.sha256()
    free: queue.SimpleQueue[bytearray] = queue.SimpleQueue()
    full: queue.SimpleQueue[tuple[bytearray, int] | None] = queue.SimpleQueue()
    for _ in range(BUFFERS):
        free.put(bytearray(BUFFER))

    def hash_loop() -> None:
        while (item := full.get()) is not None:
            buffer, n = item
            hasher.update(memoryview(buffer)[:n])
            free.put(buffer)

    thread = threading.Thread(target=hash_loop)
    thread.start()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        offset = 0
        while True:
            buffer = free.get()
            view = memoryview(buffer)
            n = response.readinto(view)
            if not n:
                break
            done = 0
            while done < n:
                done += os.pwrite(fd, view[done:min(n, done + WRITE)], offset + done)
            offset += n
            full.put((buffer, n))
    finally:
        full.put(None)
        thread.join()
        os.close(fd)
        conn.close()
    return "sha256:" + hasher.hexdigest()


if __name__ == "__main__":
    print(pull(sys.argv[1], sys.argv[2]))
