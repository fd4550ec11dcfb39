"""Xorbs are their uploader's repository's until committed (issue 62, item 2), tried as the
attacker does: serve as a process on loopback, raw HTTP. A writer scoped to ``acme/`` who knows
the hash of a xorb a writer of ``secret/`` sent and never committed builds shards naming it:
each is refused as a xorb never sent is, whatever it guesses, and no refusal tells the next
value (the xorb's chunks, a segment's size, what its bytes hash to)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
from pathlib import Path

import httpx
from test_serve_hostile import serve_process
from test_serve_xet_upload import one_chunk_xorb, shard_of

from ocibridge.hubserver.xet import merkle
from ocibridge.hubserver.xet import shards as xetformat
from ocibridge.stores.layout import LayoutStore

TOKENS = "sec-token write secret/\nacme-token write acme/\n"


def grant(url: str, repo: str, token: str) -> tuple[str, str]:
    answer = httpx.get(f"{url}/api/models/{repo}/xet-write-token/main", headers={"authorization": f"Bearer {token}"})
    assert answer.status_code == 200, answer.text
    return answer.json()["casUrl"], answer.json()["accessToken"]


def post(url: str, body: bytes, token: str) -> httpx.Response:
    return httpx.post(url, content=body, headers={"authorization": f"Bearer {token}"})


def shard_with(data: bytes, xorb: str, *, size: int | None = None, end: int = 1,
               file_hash: bytes | None = None, sha256: str | None = None) -> bytes:
    """A shard naming one file of chunks ``[0, end)`` of ``xorb``, each value guessed or true."""
    sha = merkle.from_hex(sha256 or hashlib.sha256(data).hexdigest())
    named = merkle.from_hex(xorb)
    assert sha is not None and named is not None
    return (xetformat.SHARD_TAG + struct.pack("<QQ", 2, 0)
            + (file_hash or merkle.file_hash([(merkle.chunk_hash(data), len(data))]))
            + struct.pack("<IIQ", xetformat.WITH_METADATA_EXT, 1, 0)
            + named + struct.pack("<IIII", 0, len(data) if size is None else size, 0, end)
            + sha + bytes(16) + xetformat.BOOKEND + bytes(16))


def _searched_for(value: bytes, answer: bytes) -> bytes:
    """Where a held ``value`` must not show: the whole answer for a digest, else the answer
    with its digests blanked (the shard's own names are random hex, and "5000" turned up inside
    one: a false alarm in 1 of ~500 runs)."""
    return answer if len(value) == 64 else re.sub(rb"[0-9a-f]{64}", b"<digest>", answer)


def test_a_writer_cannot_rebuild_another_repositorys_uncommitted_xorb(tmp_path: Path):
    LayoutStore(tmp_path / "lay", create=True)
    (tmp_path / "tokens").write_text(TOKENS)
    secret = os.urandom(5000)
    xorb, name = one_chunk_xorb(secret)
    sha = hashlib.sha256(secret).hexdigest()
    true_file_hash = merkle.file_hash([(merkle.chunk_hash(secret), len(secret))])
    with serve_process(tmp_path, f"oci:{tmp_path}/lay", "--token-file", str(tmp_path / "tokens")) as (served, _):
        cas_secret, grant_secret = grant(served.url, "secret/vault", "sec-token")
        sent = post(f"{cas_secret}/v1/xorbs/default/{name}", xorb, grant_secret)
        assert sent.status_code == 200 and sent.json() == {"was_inserted": True}  # never committed

        cas, token = grant(served.url, "acme/x", "acme-token")
        nothing = merkle.hex_of(hashlib.sha256(b"a xorb nobody sent").digest())
        never_sent = post(f"{cas}/v1/shards", shard_with(secret, nothing), token)
        assert never_sent.status_code == 400 and "never uploaded" in never_sent.json()["error"]
        file_hex, true_shard = merkle.hex_of(true_file_hash).encode(), shard_with(secret, name)
        guesses = {  # each shard, and what the server holds that it does not name
            "the true shard": (true_shard, []),
            "a chunk too many": (shard_with(secret, name, end=2), [b"1 chunk", b"has 1"]),
            "a wrong size": (shard_with(secret, name, size=4999), [b"5000"]),
            "a wrong Xet hash": (shard_with(secret, name, file_hash=bytes(32)), [file_hex]),
            "a wrong SHA-256": (shard_with(secret, name, sha256=hashlib.sha256(b"guess").hexdigest()), [sha.encode()])}
        for what, (shard, held) in guesses.items():
            answer = post(f"{cas}/v1/shards", shard, token)
            assert answer.status_code == 400, (what, answer.text)
            assert not any(value in _searched_for(value, answer.content) for value in held), (what, answer.text)
            # refused as a xorb nobody sent is: no oracle of what another repository holds
            assert "never uploaded" in answer.json()["error"], (what, answer.text)
        # naming the hash with other bytes is no way in either: a xorb is taken whole, and checked
        claimed = post(f"{cas}/v1/xorbs/default/{name}", b"\x00" * 16, token)
        assert claimed.status_code == 400 and b"5000" not in claimed.content
        assert post(f"{cas}/v1/shards", shard_with(secret, name), token).status_code == 400
        commit = b"".join(json.dumps(line).encode() + b"\n" for line in (
            {"key": "header", "value": {"summary": "loot"}},
            {"key": "lfsFile", "value": {"path": "loot.bin", "algo": "sha256", "oid": sha, "size": len(secret)}}))
        answer = httpx.post(f"{served.url}/api/models/acme/x/commit/main", content=commit,
                            headers={"authorization": "Bearer acme-token", "content-type": "application/x-ndjson"})
        assert answer.status_code >= 400, answer.text
        assert httpx.get(f"{served.url}/acme/x/resolve/main/loot.bin").status_code >= 400

        # the owner's own shard is taken, and its own refusals echo nothing either
        wrong = post(f"{cas_secret}/v1/shards", shard_with(secret, name, size=4999), grant_secret)
        assert wrong.status_code == 400 and b"5000" not in wrong.content, wrong.text
        wrong = post(f"{cas_secret}/v1/shards", shard_with(secret, name, file_hash=bytes(32)), grant_secret)
        assert wrong.status_code == 400 and merkle.hex_of(true_file_hash).encode() not in wrong.content
        assert post(f"{cas_secret}/v2/shards", shard_with(secret, name), grant_secret).status_code == 200
        # and a writer who sends the bytes itself holds them: its shard is taken as well
        assert post(f"{cas}/v1/xorbs/default/{name}", xorb, token).json() == {"was_inserted": True}
        assert post(f"{cas}/v2/shards", shard_of(secret, name, sha), token).status_code == 200
