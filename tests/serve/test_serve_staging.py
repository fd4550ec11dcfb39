"""serve's staging area for uploads (hubserver/staging.py): only verified bytes are kept."""

from __future__ import annotations

import hashlib
import os
import time

import pytest

from ocibridge.errors import DigestMismatch
from ocibridge.hubserver.uploads.staging import ABANDONED_SECONDS, Staging


def test_a_verified_upload_is_kept_read_only_and_a_wrong_one_is_removed(tmp_path):
    staging = Staging(tmp_path / "staging")
    data = b"weights" * 1000
    sha = hashlib.sha256(data).hexdigest()
    with staging.new_file() as (path, fd):
        os.write(fd, data)
        kept = staging.commit_file(path, sha)
    assert kept.read_bytes() == data and staging.path_for(sha) == kept
    assert kept.stat().st_mode & 0o777 == 0o444
    with staging.new_file() as (path, fd):
        os.write(fd, b"other bytes")
        with pytest.raises(DigestMismatch):
            staging.commit_file(path, "0" * 64)
    assert not staging.has("0" * 64) and list(staging.tmp.iterdir()) == []
    assert staging.path_for("../../etc/passwd") is None and staging.path_for(sha.upper()) is None


def test_an_abandoned_upload_is_cleaned_up(tmp_path):
    staging = Staging(tmp_path / "staging")
    staging.tmp.mkdir(parents=True)
    old, fresh = staging.tmp / "upload-old", staging.tmp / "upload-fresh"
    old.write_bytes(b"x")
    fresh.write_bytes(b"y")
    past = old.stat().st_mtime - ABANDONED_SECONDS - 10
    os.utime(old, (past, past))
    assert staging.clean() == 1
    assert not old.exists() and fresh.exists()


def test_a_file_another_flow_was_told_is_here_stays_until_that_flow_commits(tmp_path):
    """Two repositories' flows name one staged file (the second was told "here already" by the
    batch API): the first commit leaves it for the second, the second's removes it."""
    staging = Staging(tmp_path / "staging")
    data = b"shared weights"
    sha = hashlib.sha256(data).hexdigest()
    with staging.new_file() as (path, fd):
        os.write(fd, data)
        staging.commit_file(path, sha)
    assert staging.pin(sha, "acme/one") and staging.pin(sha, "Acme/Two")
    staging.release([sha], "acme/one")
    assert staging.has(sha)
    staging.release([sha, sha], "acme/two")
    assert not staging.has(sha) and not staging.pin(sha, "acme/one")


def test_the_budget_counts_staged_files_and_uploads_in_flight(tmp_path):
    from ocibridge.hubserver.uploads.staging import StagingFull

    staging = Staging(tmp_path / "staging", budget=100)
    with staging.new_file() as (path, fd):
        os.write(fd, b"x" * 60)
        staging.commit_file(path, hashlib.sha256(b"x" * 60).hexdigest())
    with staging.reserve(30):
        assert staging.room_for(11) is not None and staging.room_for(10) is None
        with pytest.raises(StagingFull, match="--staging-budget"), staging.reserve(11):
            pass
    with staging.reserve(40):
        pass


def test_a_flow_still_uploading_keeps_what_it_uploaded_first(tmp_path):
    """Expiry counts from a repository's last upload: a file staged first is not abandoned while
    the same flow is still sending its next file (a large model takes longer than the expiry)."""
    staging = Staging(tmp_path / "staging", expiry=60)
    data = b"first file"
    sha = hashlib.sha256(data).hexdigest()
    with staging.new_file() as (path, fd):
        os.write(fd, data)
        staging.commit_file(path, sha)
    assert staging.pin(sha, "acme/big")
    later = time.time() + 120
    with staging.reserve(10, "acme/big"):  # the next file of the flow, still arriving
        assert staging.clean(now=later) == 0 and staging.has(sha)
    assert staging.clean(now=time.time() + 30) == 0 and staging.has(sha)  # refreshed when it ended
    assert staging.clean(now=time.time() + 120) >= 1 and not staging.has(sha)


def test_a_landed_upload_counts_once_while_it_is_still_relayed(tmp_path):
    """An LFS PUT's file is in place before its relay to the registry ends: from then on the file
    counts against the budget, not its reservation too (counted twice, a 3 MiB PUT of a 6 MiB budget
    refused the model's 50-byte tokenizer.json beside it: a whole-suite failure of
    test_serve_staging_bounds)."""
    staging = Staging(tmp_path / "staging", budget=100)
    data = b"x" * 60
    sha = hashlib.sha256(data).hexdigest()
    with staging.reserve(len(data), "acme/m", "w") as landed:
        with staging.new_file() as (tmp, fd):
            os.write(fd, data)
            staging.commit_file(tmp, sha)
        assert staging.used() == 120  # the file and its reservation, until it is said to have landed
        landed()
        assert staging.used() == 60
        assert staging.room_for(40, "w") is None  # the rest of the budget, while the relay goes on
        landed()  # once only
        assert staging.used() == 60
    assert staging.used() == 60


def test_a_file_the_registry_holds_is_staged_without_its_bytes_until_committed_or_abandoned(tmp_path):
    """A Xet file sent to the registry as it was built (xet/ahead.py) is staged as held: a commit
    may name it, with its chunk table, and nothing of its bytes is on serve's disk; the commit
    (or the expiry) takes the record and the table away as it would a file."""
    from ocibridge.chunks.chunktable import DEFAULT_CHUNK_SIZE, PUSH_THRESHOLD, chunk_count

    staging = Staging(tmp_path / "staging")
    size = PUSH_THRESHOLD + 5
    sha, other = hashlib.sha256(b"held").hexdigest(), hashlib.sha256(b"other").hexdigest()
    chunks = tuple(f"sha256:{n:064x}" for n in range(chunk_count(size, DEFAULT_CHUNK_SIZE)))
    staging.commit_held(sha, size, chunks)
    assert staging.has(sha) and staging.size_of(sha) == size and staging.path_for(sha) is None
    table = staging.table_for(sha)
    assert table is not None and table.size == size and table.chunks == chunks
    assert staging.used() == 0  # no bytes of it here
    assert staging.pin(sha, "acme/a") and staging.pinned(sha, "acme/a")
    assert not staging.pin(other, "acme/a")  # neither kept nor held: nothing to pin
    with pytest.raises(DigestMismatch):
        staging.commit_held("../x", 1, None)
    staging.release([sha], "acme/a")
    assert not staging.has(sha) and staging.table_for(sha) is None and list(staging.tables.iterdir()) == []

    staging.commit_held(sha, size, chunks)  # the registry collected it before a commit came
    assert staging.pin(sha, "acme/a")
    staging.drop_held(sha)
    assert not staging.has(sha) and not staging.pinned(sha, "acme/a") and list(staging.tables.iterdir()) == []
    staging.drop_held("../pins")  # not a SHA-256: nothing is touched
    assert staging.pins.is_dir()

    staging.commit_held(other, 10, None)  # never committed: the expiry takes it
    assert staging.has(other)
    assert staging.clean(time.time() + ABANDONED_SECONDS + 10) == 1 and not staging.has(other)


def test_a_large_released_file_is_removed_off_the_commits_path(tmp_path):
    """A committed file of REMOVE_ASIDE_MIN bytes or more leaves its name at once (the same bytes
    can be uploaded and committed again right away), and its bytes go on a thread of their own;
    one a stopped serve left behind goes with the sweep after the expiry."""
    from ocibridge.hubserver.uploads.staging import REMOVE_ASIDE_MIN

    staging = Staging(tmp_path / "staging")
    data = os.urandom(REMOVE_ASIDE_MIN)
    sha = hashlib.sha256(data).hexdigest()
    for _ in range(2):  # committed, released, and the same bytes staged again at once
        with staging.new_file() as (path, fd):
            os.write(fd, data)
            kept = staging.commit_file(path, sha)
        assert staging.pin(sha, "acme/big") and staging.has(sha)
        staging.release([sha], "acme/big")
        assert not staging.has(sha) and not kept.exists()
    deadline = time.monotonic() + 30
    while any(staging.released.iterdir()):
        assert time.monotonic() < deadline, "the released files were never removed"
        time.sleep(0.01)
    left = staging.released / ("f" * 32)  # what a serve stopped mid-removal leaves
    left.write_bytes(b"x")
    past = left.stat().st_mtime - ABANDONED_SECONDS - 10
    os.utime(left, (past, past))
    assert staging.clean() == 1 and not left.exists()
