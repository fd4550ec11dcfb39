"""Every input has a cap on what is read and on what it grows to (issue 34, item 5): a layout's
index.json, tag lists over many pages, build files (``/dev/zero``, sparse gigabytes, YAML
aliases), ``verify FILE --bundle B``, job and key files. Each refusal is one line, the child's
peak RSS stays under a stated bound, and the directories involved are as they were."""

from __future__ import annotations

import http.server
import json
import os
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from ocibridge.kinds.buildfile import MAX_BUILD_FILE
from ocibridge.stores.indexfile import MAX_INDEX_BYTES
from tests.hostile.test_hostile_servers import hostile  # noqa: F401 - the fixture
from tests.hostile_run import CLI_SECONDS, RSS_BOUND_MB, run_cli, snapshot, sparse
from tests.support.data import data
from tests.support.tiny_http import send as _send

BUNDLE = data("signing", "bundle")
CONFORMANCE_ID = ("https://github.com/sigstore-conformance/extremely-dangerous-public-oidc-beacon/"
                  ".github/workflows/extremely-dangerous-oidc-beacon.yml@refs/heads/main")
CONFORMANCE_ISSUER = "https://token.actions.githubusercontent.com"


def _bounded(ran, cpu_seconds: float = CLI_SECONDS) -> str:
    line = ran.one_error_line()
    assert ran.peak_mb < RSS_BOUND_MB, ran.peak_mb
    assert ran.cpu_seconds < cpu_seconds, ran.cpu_seconds
    return line


# -- a layout's index.json -----------------------------------------------------------------------
def _layout(root: Path) -> Path:
    root.mkdir()
    (root / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    (root / "blobs" / "sha256").mkdir(parents=True)
    return root


INDEXES = {
    "1.5 GiB of zeros (sparse)": lambda p: sparse(p, 3 << 29),
    "a valid index padded past the cap": lambda p: p.write_bytes(
        b'{"schemaVersion": 2, "manifests": []' + b" " * (MAX_INDEX_BYTES + 10) + b"}"),
    "an index opening a 1 GiB string": lambda p: sparse(p, 1 << 30, b'{"schemaVersion": 2, "x": "'),
}


@pytest.mark.parametrize("make", INDEXES.values(), ids=INDEXES.keys())
@pytest.mark.parametrize("command", [["ls"], ["inspect"], ["pull"]])
def test_an_index_json_beyond_the_cap_is_one_line_in_bounded_memory(tmp_path, make, command) -> None:
    lay = _layout(tmp_path / "lay")
    make(lay / "index.json")
    before = snapshot(tmp_path)
    ref = f"oci:{lay}" if command == ["ls"] else f"oci:{lay}:v1"
    args = [*command, ref] + ([str(tmp_path / "dest"), "-q"] if command == ["pull"] else [])
    line = _bounded(run_cli(*args))
    assert "index.json is larger than" in line and "OCIBRIDGE_MAX_INDEX_BYTES" in line
    assert snapshot(tmp_path) == before


def test_the_index_cap_can_be_raised(tmp_path) -> None:
    lay = _layout(tmp_path / "lay")
    (lay / "index.json").write_bytes(b'{"schemaVersion": 2, "manifests": []' + b" " * (2 << 20) + b"}")
    assert "index.json is larger than" in run_cli("ls", f"oci:{lay}", env={"OCIBRIDGE_MAX_INDEX_BYTES": "1048576"}
                                                  ).one_error_line()
    ran = run_cli("ls", f"oci:{lay}", env={"OCIBRIDGE_MAX_INDEX_BYTES": str(4 << 20)})
    assert ran.code == 0, ran.err


# -- tag lists over many pages --------------------------------------------------------------------
def _paging(tags_on_page):
    """A tag-list server that always has a next page; ``tags_on_page(n)`` fills page n."""
    def answer(h: http.server.BaseHTTPRequestHandler) -> None:
        query = parse_qs(urlparse(h.path).query)
        page = int(query.get("page", ["0"])[0])
        body = json.dumps({"name": "m", "tags": tags_on_page(page)}).encode()
        _send(h, 200, body, {"Content-Type": "application/json",
                             "Link": f'</v2/m/tags/list?page={page + 1}>; rel="next"'})
    return answer


PAGES = {
    "1000 new tags a page, for ever": lambda n: [f"t{n}-{i}" for i in range(1000)],
    "one 100 KB tag a page": lambda n: [f"{n}" + "x" * 100_000],
    "new tags among non-strings": lambda n: [f"t{n}-{i}" for i in range(500)] + [None, 7, {"a": 1}, ["x"]],
}


@pytest.mark.parametrize("page", PAGES.values(), ids=PAGES.keys())
def test_tags_accumulated_across_pages_stop_at_a_total_cap(hostile, page) -> None:  # noqa: F811
    server = hostile(_paging(page))
    line = _bounded(run_cli("tags", f"{server.host}/m", env={"OCIBRIDGE_MAX_TAGS": "2000"}))
    assert "more than 2000 tags" in line and "OCIBRIDGE_MAX_TAGS" in line
    assert len(server.paths) < 60  # stopped on the total, long before the page limit


# -- build files ---------------------------------------------------------------------------------
def _model(tmp_path: Path) -> Path:
    model = tmp_path / "model"
    model.mkdir()
    (model / "w.bin").write_bytes(b"w" * 100)
    return model


LAUGHS = "manifestVersion: 1.0.0\na0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 10)) + "package:\n  name: *a9\n"
BUILD_FILES = {
    "/dev/zero": lambda d: "/dev/zero",
    "a sparse 2 GiB Modelfile": lambda d: str(sparse(d / "Modelfile", 2 << 30, b"MODEL w.bin\n")),
    "a Kitfile one byte over the cap": lambda d: str(sparse(d / "Kitfile", MAX_BUILD_FILE + 1,
                                                            b"manifestVersion: 1\n")),
    "a Kitfile of YAML aliases (billion laughs)": lambda d: _write(d / "Kitfile", LAUGHS),
    "a Kitfile with one alias in a key": lambda d: _write(d / "Kitfile", "manifestVersion: 1.0.0\nx: &k v\n*k : 1\n"),
    "a Kitfile nested 100,000 deep": lambda d: _write(d / "Kitfile", "manifestVersion: 1.0.0\nx: " + "[" * 100_000),
    "a Kitfile nested 100 deep in block style": lambda d: _write(
        d / "Kitfile", "manifestVersion: 1.0.0\n" + "".join(" " * i + f"k{i}:\n" for i in range(100)) + " " * 100
        + "v\n"),
}


def _write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("make", BUILD_FILES.values(), ids=BUILD_FILES.keys())
def test_a_hostile_build_file_is_one_line_in_bounded_memory_and_writes_nothing(tmp_path, make) -> None:
    model = _model(tmp_path)
    build_file = make(tmp_path)
    before = snapshot(tmp_path)
    line = _bounded(run_cli("push", str(model), f"oci:{tmp_path / 'out'}:v1", "-f", build_file, "-q"))
    assert any(word in line for word in ("too large", "aliases", "nested", "larger than")), line
    assert snapshot(tmp_path) == before


def test_laughs_would_expand_beyond_a_gigabyte() -> None:
    """The billion laughs above really is one: 9^10 strings once its aliases are expanded."""
    assert len(LAUGHS) < 1000 and 9**10 * 3 > 1 << 30


# -- verify FILE --bundle B ----------------------------------------------------------------------
def _verify(path: str, bundle: str):
    return run_cli("verify", path, "--bundle", bundle, "--certificate-identity", CONFORMANCE_ID,
                   "--certificate-oidc-issuer", CONFORMANCE_ISSUER,
                   "--trusted-root", str(BUNDLE / "public-good.trusted_root.json"))


@pytest.mark.parametrize("bundle", ["/dev/zero", "sparse"])
def test_a_bundle_without_end_is_read_only_up_to_its_cap(tmp_path, bundle) -> None:
    if bundle == "sparse":
        bundle = str(sparse(tmp_path / "b.json", 1 << 30, b'{"mediaType": "'))
    line = _bounded(_verify(str(BUNDLE / "artifact"), bundle))
    assert "larger than" in line and "not a bundle" in line


def test_a_large_file_is_verified_as_it_streams(tmp_path) -> None:
    big = sparse(tmp_path / "big", 320 << 20, (BUNDLE / "artifact").read_bytes())
    ran = _verify(str(big), str(BUNDLE / "bundle.sigstore.json"))
    assert "digest mismatch" in _bounded(ran)
    assert ran.peak_mb < 200, ran.peak_mb  # hashed whole (320 MiB), never held in memory


def test_the_real_bundle_still_verifies_by_streaming() -> None:
    ran = _verify(str(BUNDLE / "artifact"), str(BUNDLE / "bundle.sigstore.json"))
    assert ran.code == 0 and "bundle by " + CONFORMANCE_ID in ran.out, ran.err


# -- other files named on the command line ---------------------------------------------------------
def test_a_mirror_job_or_key_without_end_is_one_line(tmp_path) -> None:
    job = tmp_path / "job.toml"
    os.symlink("/dev/zero", job)
    assert "larger than" in _bounded(run_cli("mirror", str(job), "--dry-run"))
    key = tmp_path / "k.pub"
    os.symlink("/dev/zero", key)
    assert "larger than" in _bounded(run_cli("verify", str(BUNDLE / "artifact"), "--bundle",
                                             str(BUNDLE / "bundle.sigstore.json"), "--key", str(key)))
