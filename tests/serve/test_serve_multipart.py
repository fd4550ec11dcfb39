"""LFS multipart through serve (issue 55): huggingface_hub with HF_HUB_DISABLE_XET=1 uploads a
file above ``--lfs-multipart-min`` in parts of ``--lfs-part-size`` (lfs.py's _upload_multi_part:
numbered part URLs and chunk_size in the batch answer, then the completion); serve joins them,
checks the SHA-256, and the commit is the file exactly. A part of the wrong size, a completion
naming a missing part or another ETag, and parts that are not the oid are refused, nothing kept."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import httpx
import huggingface_hub
import pytest
from huggingface_hub import HfApi, lfs
from serving import files_of, point_hub_at, published_files_of
from support.publishing import MIB, model_dir, serve_process

pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning")

HEADERS = {"authorization": "Bearer writer-token"}
PARTS = ("--lfs-multipart-min", "2M", "--lfs-part-size", "1M")


def batch(url: str, data: bytes) -> dict[str, object]:
    oid = hashlib.sha256(data).hexdigest()
    body = {"operation": "upload", "transfers": ["basic", "multipart"], "objects": [{"oid": oid, "size": len(data)}]}
    answer = httpx.post(f"{url}/acme/parts.git/info/lfs/objects/batch", json=body, headers=HEADERS)
    assert answer.status_code == 200 and answer.json()["transfer"] == "multipart", answer.text
    upload: dict[str, object] = answer.json()["objects"][0]["actions"]["upload"]
    return upload


def test_a_large_file_comes_in_parts_and_is_committed_exactly(tmp_path, registry, unique_repo, monkeypatch):
    src = model_dir(tmp_path / "model")  # model.safetensors: 3 MiB and its header, so 4 parts of 1 MiB
    root = Path(os.environ["OCIBRIDGE_CACHE"]) / "serve" / "staging"
    in_parts: list[tuple[str, int]] = []
    real = lfs._upload_multi_part

    def counted(operation, header, chunk_size, upload_url):  # type: ignore[no-untyped-def]
        in_parts.append((operation.path_in_repo, chunk_size))
        real(operation=operation, header=header, chunk_size=chunk_size, upload_url=upload_url)

    monkeypatch.setattr(lfs, "_upload_multi_part", counted)
    with serve_process(tmp_path, f"{registry.host}/{unique_repo}", *PARTS) as url:
        point_hub_at(monkeypatch, url, tmp_path / "hub")
        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)
        api = HfApi(endpoint=url, token="writer-token")
        api.create_repo("acme/parts")
        done = api.upload_folder(repo_id="acme/parts", folder_path=src)
        assert in_parts == [("model.safetensors", MIB)]  # the small files: one PUT each
        assert api.model_info("acme/parts").sha == done.oid
        got = huggingface_hub.snapshot_download("acme/parts", token="reader-token")
        assert published_files_of(Path(got)) == files_of(src)
        assert not any(p.is_file() for p in root.rglob("*") if "xorbs" not in p.parts)  # committed: nothing stays


def test_wrong_parts_and_completions_are_refused_and_nothing_kept(tmp_path, registry, unique_repo):
    data = os.urandom(2 * MIB + 1000)  # 3 parts: 1 MiB, 1 MiB, 1000 bytes
    oid = hashlib.sha256(data).hexdigest()
    root = Path(os.environ["OCIBRIDGE_CACHE"]) / "serve" / "staging"
    pieces = [data[:MIB], data[MIB:2 * MIB], data[2 * MIB:]]
    with serve_process(tmp_path, f"{registry.host}/{unique_repo}", *PARTS) as url:
        assert httpx.post(f"{url}/api/repos/create", json={"name": "parts", "organization": "acme"},
                          headers=HEADERS).status_code == 200
        upload = batch(url, data)
        header = upload["header"]
        assert isinstance(header, dict) and header["chunk_size"] == str(MIB)
        urls = [header[f"{n:05d}"] for n in (1, 2, 3)]
        assert set(header) == {"chunk_size", "00001", "00002", "00003"}

        # unsigned, or a part of the wrong size: refused, the part not received
        unsigned = urls[0].split("?")[0]
        assert httpx.put(unsigned, content=pieces[0]).status_code == 403
        for wrong in (pieces[0] + b"x", pieces[0][:-1]):
            answer = httpx.put(urls[0], content=wrong)
            assert answer.status_code == 400 and "part 1" in answer.json()["error"], answer.text
        assert not [part for folder in root.glob(f"parts/{oid}.*") for part in folder.glob("0000*")]

        # parts 1 and 3 only: a completion naming part 2 is refused, and every part goes
        etags = [httpx.put(urls[n], content=pieces[n]).headers["etag"] for n in (0, 2)]
        assert len(list(root.glob(f"parts/{oid}.*"))) == 1  # the folder of this upload (of this repository)
        completion = {"oid": oid, "parts": [{"partNumber": 1, "etag": etags[0]}, {"partNumber": 2, "etag": "x"},
                                            {"partNumber": 3, "etag": etags[1]}]}
        refused = httpx.post(str(upload["href"]), json=completion)
        assert refused.status_code == 400 and "part 2 was never received" in refused.json()["error"]
        assert not any(root.glob(f"parts/{oid}.*")) and not (root / "sha256" / oid).exists()

        # every part, but one ETag not serve's: refused
        etags = [httpx.put(u, content=p).headers["etag"] for u, p in zip(urls, pieces, strict=True)]
        completion = {"oid": oid, "parts": [{"partNumber": n, "etag": e} for n, e in enumerate(etags, 1)]}
        forged = {"oid": oid, "parts": [*completion["parts"][:2], {"partNumber": 3, "etag": "0" * 64}]}
        assert httpx.post(str(upload["href"]), json=forged).status_code == 400
        assert not any(root.glob(f"parts/{oid}.*")) and not (root / "sha256" / oid).exists()

        # parts of the right sizes whose bytes are not the oid: refused once joined
        other = [bytes(len(p)) for p in pieces]
        etags = [httpx.put(u, content=p).headers["etag"] for u, p in zip(urls, other, strict=True)]
        completion = {"oid": oid, "parts": [{"partNumber": n, "etag": e} for n, e in enumerate(etags, 1)]}
        wrong = httpx.post(str(upload["href"]), json=completion)
        assert wrong.status_code == 400 and "hash to" in wrong.json()["error"]
        assert not any(root.glob(f"parts/{oid}.*")) and not (root / "sha256" / oid).exists()

        # the right parts: staged, verified
        etags = [httpx.put(u, content=p).headers["etag"] for u, p in zip(urls, pieces, strict=True)]
        completion = {"oid": oid, "parts": [{"partNumber": n, "etag": e} for n, e in enumerate(etags, 1)]}
        assert httpx.post(str(upload["href"]), json=completion).status_code == 200
        assert (root / "sha256" / oid).read_bytes() == data and not any(root.glob(f"parts/{oid}.*"))
