"""A xorb checked as it arrives (hubserver/xet/xorbcheck.py) says what the xorb read back from a
file says (shards.chunk_list and the footer read back, the rules it replaced on the upload path), however
the body is cut into pieces: the same chunk hashes, the same name, the same refusals."""

from __future__ import annotations

import io
import os
import random

import lz4.frame
import pytest

from ocibridge.hubserver.xet import merkle
from ocibridge.hubserver.xet import shards as xetformat
from ocibridge.hubserver.xet.xorbcheck import XorbCheck


def chunk(data: bytes, scheme: int) -> bytes:
    if scheme == 1:
        stored = lz4.frame.compress(data)
    elif scheme == 2:
        stored = lz4.frame.compress(b"".join(data[g::4] for g in range(4)))
    else:
        stored = data
    return b"\x00" + len(stored).to_bytes(3, "little") + bytes([scheme]) + len(data).to_bytes(3, "little") + stored


def xorb(rng: random.Random, count: int = 40) -> tuple[bytes, bytes]:
    """A xorb of ``count`` chunks of mixed sizes and schemes, and its name."""
    body = b""
    for k in range(count):
        size = rng.choice([1, 7, 4096, 65536, 131072, rng.randint(1, 131072)])
        data = os.urandom(size) if k % 3 else bytes(size // 2) + os.urandom(size - size // 2)
        body += chunk(data, k % 3)
    name = xetformat.verified_xorb_hash(io.BytesIO(body), len(body))
    return body, name


def fed(body: bytes, rng: random.Random, want: bytes) -> tuple[str | None, list[tuple[bytes, int]]]:
    check = XorbCheck()
    at = 0
    while at < len(body):
        group = []
        for _ in range(rng.randint(1, 4)):
            n = rng.choice([1, 5, 8, 9, 4096, 65536, 200_000, rng.randint(1, 300_000)])
            group.append(body[at:at + n])
            at += n
        check.feed(group)
    problem, chunks = check.result(want)
    return problem, list(chunks)


@pytest.mark.parametrize("seed", range(6))
def test_any_cut_of_a_body_gives_the_chunks_a_file_gives(seed):
    rng = random.Random(seed)
    body, name = xorb(rng)
    footer = xetformat.FOOTER_IDENT + b"\x01" + b"\x00" + name + os.urandom(100)
    for whole in (body, body + footer):
        problem, chunks = fed(whole, rng, name)
        assert problem is None
        assert chunks == list(xetformat.chunk_list(io.BytesIO(whole), len(whole)))
        assert merkle.xorb_hash(chunks) == name


def footer_hash(f: io.BytesIO, size: int) -> bytes | None:
    """The xorb hash a xorb's footer names, read from its file, as the upload path read it
    before issue 64 (the reference the check as it arrives is held to)."""
    at = 0
    f.seek(0)
    while at + xetformat.HEADER <= size:
        head = f.read(xetformat.HEADER)
        if head.startswith(xetformat.FOOTER_IDENT):
            rest = f.read(33)  # the footer's version, then the hash
            return rest[1:33] if len(rest) == 33 else None
        at += xetformat.HEADER + int.from_bytes(head[1:4], "little")
        f.seek(at)
    return None


def read_back(body: bytes, want: bytes) -> str | None:
    """What the upload path said of a xorb read back from its file (before issue 64's change)."""
    f = io.BytesIO(body)
    try:
        chunks = xetformat.chunk_list(f, len(body))
        said = footer_hash(f, len(body))
    except xetformat.BadUpload as e:
        return str(e)
    if not chunks:
        return "the xorb holds no chunk"
    if merkle.xorb_hash(chunks) != want:
        return "its chunks do not hash to the name it was sent under"
    if said is not None and said != want:
        return "its footer names another xorb"
    return None


def test_what_a_file_refuses_is_refused_as_it_arrives():
    rng = random.Random(7)
    body, name = xorb(rng, 12)
    other = bytes(32)
    last = chunk(os.urandom(1000), 0)
    body += last
    name = xetformat.verified_xorb_hash(io.BytesIO(body), len(body))
    tampered = body[:-1] + bytes([body[-1] ^ 1])
    cases = {
        "its chunks do not hash to the name it was sent under": [tampered, body[:-len(last)]],
        "runs past the end of the xorb": [body[:-3]],
        "ends inside a chunk header": [body + b"\x00\x01"],
        "not a chunk header": [b"\x01" + body[1:], body + b"\x00" * 8],
        "its footer names another xorb": [body + xetformat.FOOTER_IDENT + b"\x01\x00" + other],
        "the xorb holds no chunk": [b"", xetformat.FOOTER_IDENT + b"\x01\x00" + name],
    }
    for said, bodies in cases.items():
        for wrong in bodies:
            problem, chunks = fed(wrong, rng, name)
            assert problem is not None and said in problem, (said, problem)
            assert problem == read_back(wrong, name)
            assert chunks == []


def test_a_compressed_chunk_that_holds_more_than_it_says_is_refused():
    data = bytes(100_000)
    stored = lz4.frame.compress(data)
    lying = b"\x00" + len(stored).to_bytes(3, "little") + b"\x01" + (1000).to_bytes(3, "little") + stored
    check = XorbCheck()
    check.feed([lying])
    problem, _ = check.result(bytes(32))
    assert problem is not None and "its header says 1000" in problem


@pytest.mark.parametrize("seed", range(4))
def test_the_build_ahead_reads_the_chunks_a_file_gives(tmp_path, seed):
    """The build ahead (xorbbatches.chunk_batches) reads a kept xorb through one reused buffer;
    what it hands on is what shards.chunks reads, for any range of chunks and buffer size."""
    from ocibridge.core.fsutil import writev_all
    from ocibridge.hubserver.xet.xorbbatches import chunk_batches as _chunk_batches

    rng = random.Random(seed)
    body, _ = xorb(rng, 30)
    body += xetformat.FOOTER_IDENT + b"\x01\x00" + bytes(32)
    path = tmp_path / "xorb"
    path.write_bytes(body)
    count = len(xetformat.chunk_list(io.BytesIO(body), len(body)))
    for first, end in ((0, None), (0, count), (3, count - 2), (count - 1, count), (5, 6)):
        want = b"".join(xetformat.chunks(io.BytesIO(body), len(body), first, end))
        buf = bytearray(rng.choice([300_000, 1 << 20, 4 << 20]))
        out = tmp_path / "out"
        with open(path, "rb", buffering=0) as f, open(out, "wb", buffering=0) as o:
            written = sum(writev_all(o.fileno(), batch) for batch in _chunk_batches(f.fileno(), first, end, buf))
        assert written == len(want) and out.read_bytes() == want
    with open(path, "rb", buffering=0) as f, pytest.raises(xetformat.BadUpload):
        list(_chunk_batches(f.fileno(), 0, count + 1, bytearray(1 << 20)))


@pytest.mark.parametrize("seed", range(4))
def test_the_build_ahead_gathers_the_chunks_stored_as_they_are(tmp_path, seed):
    """Given the lengths its check found, the build ahead reads a run of chunks stored as they
    are side by side, their headers apart: each batch one view; from a compressed chunk on, chunk
    by chunk. What it hands on is what shards.chunks reads, for any end and buffer size."""
    from ocibridge.core.fsutil import writev_all
    from ocibridge.hubserver.xet.xorbbatches import gathered_batches

    rng = random.Random(seed)
    plain = rng.randint(5, 40)  # the chunks before the compressed one
    body = b"".join(chunk(os.urandom(rng.choice([1, 7, 4096, 65536, 131072, rng.randint(1, 131072)])),
                          1 if k == plain else 0) for k in range(plain + 10))
    body += xetformat.FOOTER_IDENT + b"\x01\x00" + bytes(32)
    path = tmp_path / "xorb"
    path.write_bytes(body)
    lengths = xetformat.chunk_list(io.BytesIO(body), len(body)).lengths()
    for end in (None, len(lengths), plain, plain + 1, plain - 3, 1):
        want = b"".join(xetformat.chunks(io.BytesIO(body), len(body), 0, end))
        buf = bytearray(rng.choice([300_000, 1 << 20, 4 << 20]))
        out = tmp_path / "out"
        with open(path, "rb", buffering=0) as f, open(out, "wb", buffering=0) as o:
            batches = [(len(batch), writev_all(o.fileno(), batch))
                       for batch in gathered_batches(f.fileno(), lengths, end, buf)]
        assert sum(n for _, n in batches) == len(want) and out.read_bytes() == want
        if end is not None and end <= plain:
            assert all(views == 1 for views, _ in batches), "chunks stored as they are come as one view"
            assert len(batches) <= 1 + len(want) // (len(buf) - 131072)
    with open(path, "rb", buffering=0) as f, pytest.raises(xetformat.BadUpload):
        list(gathered_batches(f.fileno(), lengths, len(lengths) + 1, bytearray(1 << 20)))
