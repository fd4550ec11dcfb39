"""Regular and LFS files as the Hub tells them apart (issue 75): a file sent inline is a regular
file, listed and resolved by its git blob id with no ``lfs`` (huggingface_hub's own client reads
them back), an ``lfsFile`` one in git-lfs; a commit carries small files inline, a line at a time.
serve in-process (tests/serving.py) over the real registry, writing commits as ``ocibridge serve`` does."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import huggingface_hub
import pytest
from huggingface_hub import HfApi
from huggingface_hub.hf_api import RepoFile
from serving import Served, point_hub_at, serving
from test_serve_hostile import send_until_refused, status_of

from ocibridge.hubserver.repo.publishing import Publishing

#: huggingface_hub's own LFS upload passes bytes as data= to httpx, which warns (not ours)
pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning")

MIB = 1024 * 1024
TOKENS = ("writer write * ci-bot", "reader")
WRITE = {"Authorization": "Bearer writer"}
READ = {"Authorization": "Bearer reader"}


def line(key: str, value: Any) -> bytes:
    return json.dumps({"key": key, "value": value}).encode() + b"\n"


def inline(path: str, data: bytes) -> bytes:
    return line("file", {"path": path, "content": base64.b64encode(data).decode(), "encoding": "base64"})


def commit(s: Served, body: bytes, repo: str = "acme/m") -> httpx.Response:
    return httpx.post(f"{s.url}/api/models/{repo}/commit/main", content=line("header", {"summary": "kinds"}) + body,
                      headers=WRITE, timeout=120)


def resolve(s: Served, path: str, repo: str = "acme/m", method: str = "GET") -> httpx.Response:
    return httpx.request(method, f"{s.url}/{repo}/resolve/main/{path}", headers=READ, timeout=60)


def lfs_line(s: Served, path: str, data: bytes, repo: str = "acme/m") -> bytes:
    """An ``lfsFile`` line for ``data``, its bytes uploaded over the LFS batch API first."""
    oid = hashlib.sha256(data).hexdigest()
    answer = httpx.post(f"{s.url}/{repo}.git/info/lfs/objects/batch", headers=WRITE,
                        json={"operation": "upload", "objects": [{"oid": oid, "size": len(data)}]})
    item = answer.json()["objects"][0]
    if "actions" in item:
        assert httpx.put(item["actions"]["upload"]["href"], content=data).status_code == 200
    return line("lfsFile", {"path": path, "algo": "sha256", "oid": oid, "size": len(data)})


def git_hash_object(data: bytes) -> str:
    """git's own blob id of ``data``, from git."""
    return subprocess.run(["git", "hash-object", "--stdin"], input=data, capture_output=True, check=True,
                          timeout=30).stdout.decode().strip()


def listed(api: HfApi, repo: str = "acme/m") -> dict[str, RepoFile]:
    """The files of ``repo``'s main as list_repo_tree gives them, checked against get_paths_info's."""
    tree = {e.path: e for e in api.list_repo_tree(repo, recursive=True) if isinstance(e, RepoFile)}
    info = {e.path: e for e in api.get_paths_info(repo, list(tree)) if isinstance(e, RepoFile)}
    assert {p: (e.blob_id, e.size, e.lfs) for p, e in info.items()} == \
        {p: (e.blob_id, e.size, e.lfs) for p, e in tree.items()}
    return tree


@pytest.fixture
def served(registry: Any, unique_repo: str) -> Iterator[Served]:
    with serving([f"{registry.host}/{unique_repo}"], tokens=TOKENS, publish=Publishing()) as s:
        made = httpx.post(f"{s.url}/api/repos/create", json={"name": "m", "organization": "acme"}, headers=WRITE)
        assert made.status_code == 200, made.text
        yield s


def test_a_commit_carries_files_inline_past_two_mib(served):
    """A commit's body is read a line at a time, each inline file staged as it comes: one of
    9 MiB and one of 5 MiB in a 19 MiB body land (the 2 MiB every other body may be was 413)."""
    big, other = b"a" * 9 * MIB + b"\n", os.urandom(5 * MIB)
    answer = commit(served, inline("big.txt", big) + inline("sub/other.bin", other))
    assert answer.status_code == 200, answer.text
    assert resolve(served, "big.txt").content == big
    assert resolve(served, "sub/other.bin").content == other


def test_a_commit_line_past_its_limit_is_refused_without_reading_the_rest(served):
    """One line of a commit is at most 16 MiB (a 10 MiB file in base64 and its path): a longer
    one is a 400 once 16 MiB of it came, the rest of the body never read; nothing is committed."""
    from ocibridge.hubserver.repo.commits import LINE_MAX

    assert commit(served, inline("a.txt", b"a\n")).status_code == 200
    port = int(served.url.rsplit(":", 1)[1])
    head = (b"POST /api/models/acme/m/commit/main HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer writer\r\n"
            b"Content-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n")
    start = line("header", {"summary": "endless"}) + b'{"key": "file", "value": {"path": "b.txt", "content": "'
    chunk = b"%x\r\n%s\r\n" % (MIB, b"Q" * MIB)
    sent, answer = send_until_refused(port, head + b"%x\r\n%s\r\n" % (len(start), start), chunk, 1024 * MIB)
    assert status_of(answer) == 400 and b"longer than" in answer, answer[:300]
    assert sent < LINE_MAX + 64 * MIB  # what the kernel's buffers hold besides
    tree = httpx.get(f"{served.url}/api/models/acme/m/tree/main", headers=READ).json()
    assert [e["path"] for e in tree] == [".gitattributes", "a.txt"]


def test_a_commit_of_more_operations_than_the_hub_takes_is_refused(served):
    from ocibridge.hubserver.repo.commits import OPERATIONS_MAX

    many = b"".join(line("deletedFile", {"path": f"f{n}.txt"}) for n in range(OPERATIONS_MAX + 1))
    answer = commit(served, inline("a.txt", b"a\n") + many)
    assert answer.status_code == 400 and f"at most {OPERATIONS_MAX} operations" in answer.json()["error"]


REGULAR = {"notes.txt": b"hello, regular file\n", "empty.txt": b"", "two.txt": b"hi", "sub/card.md": b"# card\n"}


def test_a_file_sent_inline_is_regular_and_an_lfs_file_is_not(served, tmp_path, monkeypatch):
    """Files sent inline come back from list_repo_tree, get_paths_info and model_info without
    ``lfs``, named by git's blob id (0 and 2 bytes too); resolve's ETag is that id, with no linked
    ETag or size, and hf_hub_download caches the file as ``blobs/<git blob id>``. An ``lfsFile`` is
    in git-lfs, as before: its SHA-256 in ``lfs``, the resolve's linked ETag and size."""
    weights = os.urandom(4096)
    body = b"".join(inline(path, data) for path, data in REGULAR.items()) + lfs_line(served, "w.bin", weights)
    assert commit(served, body).status_code == 200
    api = HfApi(endpoint=served.url, token="reader")
    files = listed(api)
    for path, data in REGULAR.items():
        assert files[path].lfs is None and files[path].size == len(data), path
        assert files[path].blob_id == git_hash_object(data), path
    assert files["w.bin"].lfs is not None and files["w.bin"].lfs.sha256 == hashlib.sha256(weights).hexdigest()
    siblings = {s.rfilename: s for s in api.model_info("acme/m", files_metadata=True).siblings or []}
    assert siblings["empty.txt"].lfs is None and siblings["empty.txt"].blob_id == git_hash_object(b"")
    assert siblings["w.bin"].lfs is not None and siblings["w.bin"].lfs.sha256 == hashlib.sha256(weights).hexdigest()

    for method in ("HEAD", "GET"):  # the same ETag either way: the cache's name for it is stable
        answer = resolve(served, "two.txt", method=method)
        assert answer.headers["etag"] == f'"{git_hash_object(b"hi")}"', method
        assert "x-linked-etag" not in answer.headers and "x-linked-size" not in answer.headers
        assert answer.headers["content-length"] == "2"
    lfs = resolve(served, "w.bin", method="HEAD")
    sha = hashlib.sha256(weights).hexdigest()
    assert lfs.headers["etag"] == lfs.headers["x-linked-etag"] == f'"{sha}"'
    assert lfs.headers["x-linked-size"] == str(len(weights))

    point_hub_at(monkeypatch, served.url, tmp_path / "hub")
    for path, data in [*REGULAR.items(), ("w.bin", weights)]:
        got = Path(huggingface_hub.hf_hub_download("acme/m", path, token="reader"))
        assert got.read_bytes() == data, path
        name = git_hash_object(data) if path in REGULAR else hashlib.sha256(data).hexdigest()
        assert got.resolve().name == name and got.resolve().parent.name == "blobs", path
    # a second download finds the cache as the first left it (HEAD's ETag is the blob's name)
    again = Path(huggingface_hub.hf_hub_download("acme/m", "notes.txt", token="reader"))
    assert again.resolve().name == git_hash_object(REGULAR["notes.txt"])


def test_a_file_keeps_its_kind_until_it_is_sent_again(served):
    """A file the next commit keeps from its parent keeps its kind (the parent's record carried
    on); one sent again takes the kind it is sent as; one deleted leaves the record."""
    weights = os.urandom(2048)
    body = b"".join(inline(f"{n}.txt", f"{n}\n".encode()) for n in "abc") + lfs_line(served, "w.bin", weights)
    assert commit(served, body).status_code == 200
    second = inline("new.txt", b"new\n") + lfs_line(served, "b.txt", b"b as lfs\n") + inline("w.bin", weights)
    assert commit(served, second + line("deletedFile", {"path": "c.txt"})).status_code == 200
    api = HfApi(endpoint=served.url, token="reader")
    files = listed(api)
    assert sorted(files) == [".gitattributes", "a.txt", "b.txt", "new.txt", "w.bin"]
    assert files["a.txt"].lfs is None and files["a.txt"].blob_id == git_hash_object(b"a\n")  # kept, still regular
    assert files["new.txt"].lfs is None and files["w.bin"].lfs is None  # sent inline: regular
    assert files["w.bin"].blob_id == git_hash_object(weights)
    assert files["b.txt"].lfs is not None  # sent as an lfsFile: in git-lfs now
    third = commit(served, inline("d.txt", b"d\n"))  # nothing of the record is lost on the way
    assert third.status_code == 200
    assert {p: f.lfs is None for p, f in listed(api).items()} == \
        {".gitattributes": True, "a.txt": True, "b.txt": False, "d.txt": True, "new.txt": True, "w.bin": True}


def test_a_manifest_pushed_outside_serve_lists_every_file_in_lfs(served, registry, unique_repo, tmp_path):
    """``ocibridge push`` records no regular files: every file is in git-lfs, small text included,
    and the manifest's layers are the same whether serve or push wrote them."""
    from ocibridge.cli import main

    src = tmp_path / "model"
    src.mkdir()
    (src / "config.json").write_text('{"model_type": "bert"}')
    (src / "empty.txt").write_bytes(b"")
    assert main(["push", str(src), f"{registry.host}/{unique_repo}/acme/pushed:latest", "-q"]) == 0
    files = listed(HfApi(endpoint=served.url, token="reader"), "acme/pushed")
    assert sorted(files) == ["config.json", "empty.txt"]
    for path in ("config.json", "empty.txt"):
        sha = hashlib.sha256((src / path).read_bytes()).hexdigest()
        assert files[path].lfs is not None and files[path].lfs.sha256 == sha, path
    head = resolve(served, "config.json", repo="acme/pushed", method="HEAD")
    assert head.headers["x-linked-etag"] == head.headers["etag"]


def test_a_regular_file_is_never_offered_over_xet(registry, unique_repo):
    """The Hub keeps a regular file in git, never in Xet: however small ``--xet-min-size``, its
    tree entry has no ``xetHash`` and its resolve no ``X-Xet-Hash``; a file in git-lfs has both."""
    with serving([f"{registry.host}/{unique_repo}"], tokens=TOKENS, publish=Publishing(), xet_min=1) as s:
        assert httpx.post(f"{s.url}/api/repos/create", json={"name": "x", "organization": "acme"},
                          headers=WRITE).status_code == 200
        weights = os.urandom(4096)
        assert commit(s, inline("notes.txt", b"notes\n") + lfs_line(s, "w.bin", weights, "acme/x"),
                      "acme/x").status_code == 200
        for path in ("notes.txt", "w.bin"):  # in the model cache: a blob there is offered at once
            assert resolve(s, path, "acme/x").status_code == 200
        tree = {e["path"]: e for e in httpx.get(f"{s.url}/api/models/acme/x/tree/main", headers=READ).json()}
        assert "xetHash" not in tree["notes.txt"] and "xetHash" in tree["w.bin"]
        assert "x-xet-hash" not in resolve(s, "notes.txt", "acme/x", "HEAD").headers
        assert "x-xet-hash" in resolve(s, "w.bin", "acme/x", "HEAD").headers


@pytest.fixture
def hub(served: Served, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> HfApi:
    """huggingface_hub pointed at serve, over LFS (HF_HUB_DISABLE_XET=1); its commits kept in
    ``hub.commits`` (path -> "file" or "lfsFile" as each commit sent it)."""
    from huggingface_hub import _commit_api

    point_hub_at(monkeypatch, served.url, tmp_path / "hub")
    sent: list[dict[str, str]] = []
    real = _commit_api._prepare_commit_payload

    def noted(*args: Any, **kwargs: Any) -> Any:
        lines = list(real(*args, **kwargs))
        sent.append({item["value"]["path"]: item["key"] for item in lines if item["key"] in ("file", "lfsFile")})
        return iter(lines)

    monkeypatch.setattr(_commit_api, "_prepare_commit_payload", noted)
    api = HfApi(endpoint=served.url, token="writer")
    api.commits = sent  # type: ignore[attr-defined]
    return api


def test_upload_file_of_small_text_is_regular_as_on_the_hub(hub, served):
    """upload_file of a text file, a 0-byte and a 2-byte file: preupload calls them regular, the
    client sends them inline, and list_repo_tree and get_paths_info give them back with no
    ``lfs`` and git's blob id; hf_hub_download caches them under that id (huggingface_hub's own
    test_upload_empty_lfs_file: ``lfs`` None for an empty file)."""
    for path, data in (("notes.txt", b"some notes\n"), ("empty.pkl", b""), ("two.txt", b"hi")):
        hub.upload_file(path_or_fileobj=data, path_in_repo=path, repo_id="acme/m")
        assert hub.commits[-1] == {path: "file"}, path
    files = listed(hub)
    for path, data in (("notes.txt", b"some notes\n"), ("empty.pkl", b""), ("two.txt", b"hi")):
        assert files[path].lfs is None and files[path].blob_id == git_hash_object(data), path
        got = Path(huggingface_hub.hf_hub_download("acme/m", path, token="reader"))
        assert got.read_bytes() == data and got.resolve().name == git_hash_object(data), path
    info = hub.repo_info("acme/m", files_metadata=True)
    assert {s.rfilename: s.lfs for s in info.siblings or []}["empty.pkl"] is None


def test_hub_attributes_size_and_binary_files_go_to_lfs(hub, served):
    """A branch without a .gitattributes (serve's commits, as push, leave it out) is read with the
    one the Hub gives a new model repository: a path its patterns match (by name at any depth,
    ``saved_model/**/*``) is LFS even as text, as are a binary file (a NUL in its first 512 bytes)
    and one of 10 MiB, their SHA-256 in ``lfs``; what no rule names stays regular. An empty file
    the patterns name is sent regular all the same (the client sends no empty LFS object)."""
    binary = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + b"p" * 100
    sent = {"model.safetensors": b'{"not": "really binary"}', "sub/x.safetensors": b"text\n",
            "saved_model/variables/v.index": b"text\n", "file-1.bin": b"Hello LFS" + b"a" * 2048,
            "image.png": binary, "big.txt": b"a" * (10 * MIB - 1) + b"\n", "config.json": b'{"a": 1}\n',
            "data/notes.txt": b"no rule names me\n", "empty.pkl": b""}
    from huggingface_hub import CommitOperationAdd

    hub.create_commit("acme/m", [CommitOperationAdd(p, d) for p, d in sent.items()], commit_message="kinds")
    in_lfs = {"model.safetensors", "sub/x.safetensors", "saved_model/variables/v.index", "file-1.bin", "image.png",
              "big.txt"}
    assert hub.commits[-1] == {p: "lfsFile" if p in in_lfs else "file" for p in sent}
    files = listed(hub)
    for path, data in sent.items():
        if path in in_lfs:
            assert files[path].lfs is not None and files[path].lfs.sha256 == hashlib.sha256(data).hexdigest(), path
        else:
            assert files[path].lfs is None and files[path].blob_id == git_hash_object(data), path


def layout_with(root: Path, files: dict[str, bytes]) -> None:
    """A layout holding ``acme/m:latest``: one raw layer a file, as a manifest made outside
    serve may hold them (push leaves a .gitattributes out; a hand-made manifest need not)."""
    from ocibridge.oci.mediatypes import OCI_MANIFEST, Family, Kind, Variant, layer_media_type
    from ocibridge.oci.models import Descriptor, Manifest
    from ocibridge.stores.layout import LayoutStore

    layout = LayoutStore(root, create=True)
    layers = []
    for path, data in files.items():
        desc = Descriptor.for_bytes(layer_media_type(Kind.DOC, Variant.RAW), data,
                                    annotations={Family.CNAI.filepath_key: path})
        layout.push_blob(desc, io.BytesIO(data))
        layers.append(desc)
    config = json.dumps({"descriptor": {"name": "m"}, "config": {},
                         "modelfs": {"type": "layers", "diffIds": [d.digest for d in layers]}}).encode()
    config_desc = Descriptor.for_bytes(Family.CNAI.config_media_type, config)
    layout.push_blob(config_desc, io.BytesIO(config))
    manifest = Manifest(artifactType=Family.CNAI.artifact_type, config=config_desc, layers=layers).to_json_bytes()
    layout.push_manifest(Descriptor.for_bytes(OCI_MANIFEST, manifest), manifest, "acme/m:latest")


def test_the_branchs_own_gitattributes_decides_in_place_of_the_hubs(tmp_path):
    """A branch whose head holds a .gitattributes is read by it, not the Hub's: its ``filter=lfs``
    patterns (a name at any depth, one anchored with a "/", ``**``), the last line that says
    something of the filter winning; a ``.safetensors`` it does not name is regular as text."""
    attributes = (b"*.txt filter=lfs diff=lfs merge=lfs -text\n"
                  b"keep.txt -filter\n"
                  b"/data/*.json filter=lfs\n"
                  b"logs/**/*.log filter=lfs\n")
    layout_with(tmp_path / "lay", {".gitattributes": attributes, "config.json": b"{}\n"})
    with serving([f"oci:{tmp_path}/lay"], tokens=TOKENS, publish=Publishing()) as s:
        asked = {"notes.txt": True, "deep/down/notes.txt": True, "keep.txt": False, "data/a.json": True,
                 "other/data/a.json": False, "logs/a.log": True, "logs/x/y/a.log": True, "a.log": False,
                 "model.safetensors": False, "config.json": False}
        sample = base64.b64encode(b"plain text\n").decode()
        answer = httpx.post(f"{s.url}/api/models/acme/m/preupload/main", headers=WRITE, json={
            "files": [{"path": p, "size": 11, "sample": sample} for p in asked]})
        assert answer.status_code == 200, answer.text
        assert {f["path"]: f["uploadMode"] == "lfs" for f in answer.json()["files"]} == asked


def test_preupload_draws_the_size_line_at_ten_mib(served):
    """A text file just under 10 MiB is regular, one of 10 MiB is LFS (the Hub's git refuses files
    larger than 10 MiB; huggingface_hub's own tests commit a 9 MiB text file as regular)."""
    sample = base64.b64encode(b"plain text\n").decode()
    files = [{"path": f"f{size}.txt", "size": size, "sample": sample} for size in (10 * MIB - 1, 10 * MIB)]
    answer = httpx.post(f"{served.url}/api/models/acme/m/preupload/main", json={"files": files}, headers=WRITE)
    assert [f["uploadMode"] for f in answer.json()["files"]] == ["regular", "lfs"]


def test_an_unchanged_file_is_neither_sent_nor_committed(hub, served, registry, unique_repo, tmp_path):
    """upload_folder of the same folder again: preupload names each file's oid (a regular file's
    git blob id, an LFS file's SHA-256), so nothing is sent and no commit is made; a file kept
    across the next commit keeps its kind. Over a manifest ``ocibridge push`` wrote (every file
    in LFS), the same small text file is answered as the LFS file it is: not sent either."""
    from ocibridge.cli import main

    src = tmp_path / "model"
    src.mkdir()
    (src / "config.json").write_text('{"model_type": "bert"}\n')
    (src / "weights.bin").write_bytes(b"\0\1\2" + os.urandom(1000))
    first = hub.upload_folder(repo_id="acme/m", folder_path=src)
    assert hub.commits[-1] == {"config.json": "file", "weights.bin": "lfsFile"}
    again = hub.upload_folder(repo_id="acme/m", folder_path=src)
    assert again.oid == first.oid and len(hub.commits) == 1  # nothing to send: no commit
    hub.upload_file(path_or_fileobj=b"more\n", path_in_repo="more.txt", repo_id="acme/m")
    files = listed(hub)
    assert files["config.json"].lfs is None and files["weights.bin"].lfs is not None  # kept: their kinds too

    assert main(["push", str(src), f"{registry.host}/{unique_repo}/acme/pushed:latest", "-q"]) == 0
    pushed = hub.upload_folder(repo_id="acme/pushed", folder_path=src)
    assert len(hub.commits) == 2 and pushed.oid == hub.model_info("acme/pushed").sha  # nothing sent, no commit
    assert all(f.lfs is not None for f in listed(hub, "acme/pushed").values())


def test_a_copy_keeps_the_kind_of_its_source(hub, served):
    """CommitOperationCopy: huggingface_hub reads a regular file's bytes and sends them inline
    (regular again, the same blob id), and names a file in git-lfs by its oid (LFS again)."""
    from huggingface_hub import CommitOperationAdd, CommitOperationCopy

    weights = b"\0weights" + os.urandom(500)
    hub.create_commit("acme/m", [CommitOperationAdd("config.json", b'{"a": 1}\n'),
                                 CommitOperationAdd("w.bin", weights)], commit_message="sources")
    hub.create_commit("acme/m", [CommitOperationCopy("config.json", "copy/config.json"),
                                 CommitOperationCopy("w.bin", "copy/w.bin")], commit_message="copies")
    assert hub.commits[-1] == {"copy/config.json": "file", "copy/w.bin": "lfsFile"}
    files = listed(hub)
    assert files["copy/config.json"].lfs is None and files["copy/config.json"].blob_id == files["config.json"].blob_id
    assert files["copy/w.bin"].lfs is not None and files["copy/w.bin"].lfs.sha256 == hashlib.sha256(weights).hexdigest()
