"""serve's staging area for uploads (hubserver/staging.py): only verified bytes are kept."""

from __future__ import annotations

import hashlib
import os

import pytest

from ocibridge.errors import DigestMismatch
from ocibridge.hubserver.staging import ABANDONED_SECONDS, Staging


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
