"""The one bounded zip reader (ocibridge/core/zipbound.py) on generated hostile zips, under the
rules of each format that uses it and under rules of a test's own: a member that inflates beyond
its declared size, a ratio bomb, duplicate names, ``../`` and absolute names, symlink and device
entries, names both file and directory, truncated archives. Each is one error line of the rules'
class (UnsafePath for a name), no read hands out more than a member declares, and nothing is
written beside the archive."""

from __future__ import annotations

import io
import stat
import struct
import tempfile
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ocibridge.core.zipbound import (
    METHOD_BZIP2,
    METHOD_DEFLATE,
    METHOD_LZMA,
    METHOD_STORED,
    METHOD_ZSTD,
    MemberReader,
    ZipLimits,
    ZipRules,
    scan,
)
from ocibridge.errors import OcibridgeError, UnsafePath
from ocibridge.kinds.carton.zipread import CARTON_ZIP
from ocibridge.kinds.carton.zipwrite import ZipWriter
from ocibridge.kinds.mlsteam.ziparchive import MLARCHIVE_ZIP
from tests.hostile_run import run_cli, snapshot


class ZipTestError(OcibridgeError):
    """The error class a format of the test's own passes."""


OWN = ZipRules(error=ZipTestError, methods=frozenset({METHOD_STORED, METHOD_DEFLATE, METHOD_BZIP2, METHOD_LZMA,
                                                      METHOD_ZSTD}))
RULES = {"own": OWN, "carton": CARTON_ZIP, "mlarchive": MLARCHIVE_ZIP}
#: Small limits, so a bomb costs the test a few hundred KiB.
LIMITS = ZipLimits(max_ratio=20, ratio_floor=4096)
FAST = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

#: Member content with no zip signature in it (a stray end-of-directory record could make a cut
#: archive parse).
DATA = st.binary(min_size=1, max_size=3000).filter(lambda b: b"PK" not in b)
NAME = st.text("abcxyz0", min_size=1, max_size=6)


@dataclass
class Member:
    name: str | zipfile.ZipInfo
    data: bytes
    method: int = METHOD_DEFLATE


def write_zip(path: Path, members: list[Member]) -> None:
    """Members written verbatim (names unchecked); zstd ones by Carton's writer."""
    if any(m.method == METHOD_ZSTD for m in members):
        with open(path, "wb") as out:
            zw = ZipWriter(out)
            for m in members:
                assert isinstance(m.name, str)
                zw.add(m.name, iter([m.data]), method=m.method if m.method == METHOD_ZSTD else METHOD_STORED)
            zw.close()
        return
    with warnings.catch_warnings(), zipfile.ZipFile(path, "w") as zf:
        warnings.simplefilter("ignore")  # duplicate names are the point of some cases
        for m in members:
            zf.writestr(m.name, m.data, compress_type=m.method)


def declare_size(path: Path, name: str, size: int) -> None:
    """Rewrite the size the central directory declares for ``name`` (a lying header)."""
    data = bytearray(path.read_bytes())
    central = data.find(b"PK\x01\x02")
    while data[central + 46:central + 46 + len(name)] != name.encode():
        central = data.find(b"PK\x01\x02", central + 4)
    struct.pack_into("<L", data, central + 24, size)
    path.write_bytes(bytes(data))


def read_all(archive: Path, rules: ZipRules, limits: ZipLimits = LIMITS) -> None:
    """Scan, then read every member to its end, never handed more than a member declares."""
    for member in scan(archive, rules, limits):
        with MemberReader(archive, member, rules) as r:
            got = 0
            while chunk := r.read(1000):
                got += len(chunk)
                assert got <= member.size
            assert got == member.size


def refused(archive: Path, rules: ZipRules, expected: type[OcibridgeError] | None = None,
            limits: ZipLimits = LIMITS) -> str:
    """The one error line reading ``archive`` raises; nothing is written beside it."""
    before = snapshot(archive.parent)
    with pytest.raises(OcibridgeError) as info:
        read_all(archive, rules, limits)
    assert type(info.value) is (expected or rules.error), info.value
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{archive}: "), message
    assert snapshot(archive.parent) == before
    return message


def in_tmp(members: list[Member]) -> tuple[tempfile.TemporaryDirectory[str], Path]:
    tmp = tempfile.TemporaryDirectory()
    path = Path(tmp.name) / "hostile.zip"
    write_zip(path, members)
    return tmp, path


# -- members that inflate beyond what they declare -------------------------------------------------
@FAST
@given(DATA, st.sampled_from(list(RULES)), st.sampled_from([METHOD_STORED, METHOD_DEFLATE, METHOD_ZSTD,
                                                            METHOD_BZIP2, METHOD_LZMA]),
       st.floats(min_value=0, max_value=0.99), st.booleans())
def test_a_member_inflating_beyond_its_declared_size(data: bytes, rules: str, method: int, fraction: float,
                                                     by_digest: bool) -> None:
    if method not in RULES[rules].methods:
        method = METHOD_DEFLATE
    tmp, path = in_tmp([Member("first", b"ok"), Member("w.bin", data, method)])
    with tmp:
        declared = int(len(data) * fraction)
        declare_size(path, "w.bin", declared)
        message = refused(path, RULES[rules])
        assert "w.bin" in message
        if method in (METHOD_STORED, METHOD_DEFLATE, METHOD_ZSTD) and by_digest:
            # a caller checking a sha256 instead of the CRC: the size itself is the refusal
            member = next(m for m in scan(path, RULES[rules], LIMITS) if m.path == "w.bin")
            reader = MemberReader(path, member, RULES[rules], sha256="0" * 64)
            with reader, pytest.raises(OcibridgeError, match=f"w.bin expands beyond its declared {declared} bytes"):
                reader.read()


@pytest.mark.parametrize("rules", list(RULES))
def test_lying_bomb_yields_no_more_than_declared(rules: str, tmp_path: Path) -> None:
    """16 MiB of zeros declared as 1000 bytes: the reader stops at byte 1001."""
    path = tmp_path / "bomb.zip"
    write_zip(path, [Member("z.bin", b"\0" * (16 << 20))])
    declare_size(path, "z.bin", 1000)
    member = scan(path, RULES[rules])[0]
    reader = MemberReader(path, member, RULES[rules], crc=False)
    with reader, pytest.raises(RULES[rules].error, match="expands beyond its declared 1000 bytes"):
        reader.read()
    assert reader.count == 0  # nothing handed out: the one read asked for 1001 bytes and got them


# -- what the central directory alone refuses --------------------------------------------------------
@FAST
@given(st.integers(min_value=8 << 10, max_value=256 << 10), st.integers(min_value=2, max_value=19),
       st.sampled_from(list(RULES)))
def test_ratio_bomb(size: int, ratio: int, rules: str) -> None:
    tmp, path = in_tmp([Member("z.bin", b"\0" * size)])
    with tmp:
        message = refused(path, RULES[rules], limits=ZipLimits(max_ratio=ratio, ratio_floor=4096))
        assert f"beyond the ratio limit {ratio}:1 (zip bomb?)" in message


def test_the_ratio_follows_the_expansion_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ocibridge.core.environment import MAX_EXPANSION_RATIO

    path = tmp_path / "z.zip"
    write_zip(path, [Member("z.bin", b"\0" * (1 << 20))])
    read_all(path, OWN, ZipLimits(ratio_floor=4096))  # deflate's ~1000:1 is within the default 1100
    monkeypatch.setenv(MAX_EXPANSION_RATIO, "50")
    assert "beyond the ratio limit 50:1" in refused(path, OWN, limits=ZipLimits(ratio_floor=4096))


@FAST
@given(NAME, st.sampled_from(["{}", "./{}", "{}/", "x/../{}"]), st.sampled_from(list(RULES)), DATA)
def test_duplicate_names(name: str, twin: str, rules: str, data: bytes) -> None:
    tmp, path = in_tmp([Member(name, data), Member("other", b"x"), Member(twin.format(name), b"y")])
    with tmp:
        expected = UnsafePath if twin.startswith("x/..") else None
        message = refused(path, RULES[rules], expected)
        if expected is None:
            assert f"duplicate entry {name!r}" in message


@FAST
@given(st.sampled_from(["../{}", "a/../../{}", "a/../b/../../{}", "/{}", "/etc/{}", "C:{}", "\\{}", "a\\..\\{}"]),
       NAME, st.sampled_from(list(RULES)))
def test_names_outside_the_tree(pattern: str, name: str, rules: str) -> None:
    tmp, path = in_tmp([Member("ok", b"x"), Member(pattern.format(name), b"evil")])
    with tmp:
        message = refused(path, RULES[rules], UnsafePath)
        assert any(word in message for word in ("escapes its tree", "absolute", "backslash"))


def _special(name: str, kind: int) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.create_system = 3
    info.external_attr = (kind | 0o777) << 16
    return info


@FAST
@given(NAME, st.sampled_from([stat.S_IFLNK, stat.S_IFCHR, stat.S_IFBLK, stat.S_IFIFO, stat.S_IFSOCK]),
       st.sampled_from(list(RULES)))
def test_symlinks_and_devices(name: str, kind: int, rules: str) -> None:
    tmp, path = in_tmp([Member("ok", b"x"), Member(_special(name, kind), b"/etc/passwd")])
    with tmp:
        if kind == stat.S_IFLNK and RULES[rules].links:  # Carton keeps links: a member like another
            assert [m.path for m in scan(path, RULES[rules]) if m.is_link] == [name]
            return
        message = refused(path, RULES[rules])
        assert f"entry {name!r} is a " in message and "not a regular file" in message


@FAST
@given(st.lists(NAME, min_size=1, max_size=3), st.sampled_from(["file", "dir entry"]), st.sampled_from(list(RULES)))
def test_a_name_both_file_and_directory(parts: list[str], how: str, rules: str) -> None:
    name = "/".join(parts)
    under = f"{name}/" if how == "dir entry" else f"{name}/inner"
    tmp, path = in_tmp([Member(name, b"file"), Member("ok", b"x"), Member(under, b"" if how == "dir entry" else b"y")])
    with tmp:
        message = refused(path, RULES[rules])
        assert (f"{name!r} is both a file and a directory" in message
                or f"duplicate entry {name!r}" in message)  # a directory entry of a file's name


@FAST
@given(st.lists(st.tuples(NAME, DATA), min_size=1, max_size=4, unique_by=lambda m: m[0]), st.data(),
       st.sampled_from(list(RULES)))
def test_truncated_archive(members: list[tuple[str, bytes]], data: st.DataObject, rules: str) -> None:
    tmp, path = in_tmp([Member(name, content) for name, content in members])
    with tmp:
        whole = path.read_bytes()
        path.write_bytes(whole[:data.draw(st.integers(min_value=0, max_value=len(whole) - 1))])
        message = refused(path, RULES[rules])
        assert "not a readable zip archive" in message or "truncated" in message


def test_overlapping_members_and_a_local_name_not_the_central_one(tmp_path: Path) -> None:
    path = tmp_path / "o.zip"
    write_zip(path, [Member("a", b"A" * 100), Member("b", b"B" * 100)])
    raw = bytearray(path.read_bytes())
    struct.pack_into("<L", raw, raw.rfind(b"PK\x01\x02") + 42, 0)  # b's record points at a's data
    path.write_bytes(bytes(raw))
    assert "entries 'a' and 'b' overlap" in refused(path, OWN)
    write_zip(path, [Member("a", b"A" * 100)])
    raw = bytearray(path.read_bytes())
    raw[30:31] = b"z"  # the local header's name
    path.write_bytes(bytes(raw))
    assert "entry 'a': local and central names differ" in refused(path, OWN)


def test_a_member_whose_crc_is_wrong(tmp_path: Path) -> None:
    """Each format's words for it: carton's, and zipfile's as the mlarchive reader gave them."""
    for rules, words in ((CARTON_ZIP, "w.bin: CRC-32 mismatch"), (MLARCHIVE_ZIP, "w.bin: corrupt entry data: Bad CRC"),
                         (OWN, "w.bin: CRC-32 mismatch")):
        path = tmp_path / "c.zip"
        write_zip(path, [Member("w.bin", bytes(range(256)) * 20)])
        raw = bytearray(path.read_bytes())
        central = raw.find(b"PK\x01\x02")
        struct.pack_into("<L", raw, central + 16, struct.unpack_from("<L", raw, central + 16)[0] ^ 1)
        path.write_bytes(bytes(raw))
        assert words in refused(path, rules)


def test_good_members_of_every_method_read_back(tmp_path: Path) -> None:
    content = bytes(range(256)) * 300
    for method in (METHOD_STORED, METHOD_DEFLATE, METHOD_BZIP2, METHOD_LZMA, METHOD_ZSTD):
        path = tmp_path / f"{method}.zip"
        write_zip(path, [Member("d/", b"", METHOD_STORED)] * (method != METHOD_ZSTD) + [Member("d/w", content, method)])
        (member,) = scan(path, OWN)
        with MemberReader(path, member, OWN) as r:
            out = io.BytesIO()
            while chunk := r.read(777):
                out.write(chunk)
        assert (member.path, out.getvalue()) == ("d/w", content)


# -- through the CLI: one error line, the destination untouched --------------------------------------
@pytest.mark.parametrize("suffix", ["carton", "mlarchive"])
def test_cli_push_of_a_member_inflating_beyond_its_size(suffix: str, tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    path = src / f"bad.{suffix}"
    if suffix == "carton":
        write_zip(path, [Member("carton.toml", b"spec_version = 1\n", METHOD_ZSTD),
                         Member("model/w.bin", b"w" * 100, METHOD_ZSTD),
                         Member("MANIFEST", b"#" * 100_000, METHOD_ZSTD)])
        name = "MANIFEST"
    else:
        write_zip(path, [Member("manifest.json", b'{"models": [{"name": "a"}]}' + b" " * 100_000)])
        name = "manifest.json"
    declare_size(path, name, 10)
    before = snapshot(tmp_path)
    line = run_cli("push", str(path), f"oci:{tmp_path / 'layout'}:v1").one_error_line()
    assert line.count(str(path)) == 1 and name in line, line
    assert snapshot(tmp_path) == before
