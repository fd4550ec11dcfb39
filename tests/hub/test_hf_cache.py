"""The Hugging Face Hub cache both ways (issue 28), checked with the real huggingface_hub and
transformers (no deep-learning framework needed): a pulled model is found by repo id offline,
and a cache written by huggingface_hub's own helpers pushes with its origin and comes back
byte for byte."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import huggingface_hub
import pytest
from huggingface_hub import file_download
from support.hubcache import offline_hub_cache

from ocibridge.cache.modelcache import ModelCache
from ocibridge.cli import main
from ocibridge.oci.digest import split_digest
from tests.modelgen import make_bert_model

COMMIT = "0123456789abcdef0123456789abcdef01234567"
#: a revision the cache lacks is blamed, not the repository (issue 53 item 11)
BAD_REVISION = "holds acme/source but no revision 'v9' (it holds main, 0123456789ab)"


@pytest.fixture(autouse=True)
def hub(tmp_path, monkeypatch) -> Path:
    return offline_hub_cache(tmp_path, monkeypatch)  # nothing here may reach the Hub


def files_of(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def git_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _pushed_bert(tmp_path, capsys, registry, unique_repo) -> tuple[Path, str]:
    """(a small BERT model's folder, the registry reference it was pushed to)."""
    src = make_bert_model(tmp_path / "src")
    ref = f"{registry.host}/{unique_repo}:v1"
    assert main(["push", str(src), ref, "-q"]) == 0
    capsys.readouterr()
    return src, ref


def test_a_pulled_model_is_found_by_repo_id_offline(tmp_path, capsys, hub, registry, unique_repo):
    from transformers import AutoConfig, AutoTokenizer

    src, ref = _pushed_bert(tmp_path, capsys, registry, unique_repo)
    assert main(["pull", ref, "hf:acme/tiny", "--json"]) == 0
    pulled = json.loads(capsys.readouterr().out)
    assert pulled["format"] == "hf"
    where = Path(huggingface_hub.snapshot_download("acme/tiny", local_files_only=True))
    assert files_of(where) == files_of(src)
    report = huggingface_hub.scan_cache_dir(hub)
    assert report.warnings == []
    (repo,) = report.repos
    assert repo.repo_id == "acme/tiny" and repo.repo_type == "model" and repo.nb_files == 5
    (revision,) = repo.revisions
    assert revision.refs == frozenset({"main"})
    blobs = {p.name for p in (hub / "models--acme--tiny" / "blobs").iterdir()}
    weights = (src / "model.safetensors").read_bytes()
    assert hashlib.sha256(weights).hexdigest() in blobs  # an LFS file: named by its sha256
    # a small text file too: by its sha256, the ETag serve answers (one rule, issue 53 item 9)
    assert hashlib.sha256((src / "config.json").read_bytes()).hexdigest() in blobs
    # one copy on disk: the Hub's blob is the model cache's
    in_cache = ModelCache().blobs.blob_path("sha256:" + hashlib.sha256(weights).hexdigest())
    hub_blob = hub / "models--acme--tiny" / "blobs" / hashlib.sha256(weights).hexdigest()
    assert hub_blob.stat().st_ino == in_cache.stat().st_ino
    config = AutoConfig.from_pretrained("acme/tiny", local_files_only=True)
    assert config.hidden_size == 32 and config.model_type == "bert"
    tokenizer = AutoTokenizer.from_pretrained("acme/tiny", local_files_only=True)
    assert tokenizer.tokenize("Hello world") == ["hello", "world"]
    # pulled again: the snapshot of that commit is replaced whole, nothing left beside it
    assert main(["pull", ref, "hf:acme/tiny", "-q"]) == 0
    assert [p.name for p in (hub / "models--acme--tiny" / "snapshots").iterdir()] == [revision.commit_hash]
    assert huggingface_hub.scan_cache_dir(hub).warnings == []
    assert files_of(Path(huggingface_hub.snapshot_download("acme/tiny", local_files_only=True))) == files_of(src)


def write_with_huggingface_hub(hub: Path, repo_id: str, src: Path, commit: str) -> None:
    """Lay ``src`` out as huggingface_hub does after a download, with its own helpers."""
    folder = hub / file_download.repo_folder_name(repo_id=repo_id, repo_type="model")
    for path in sorted(p for p in src.rglob("*") if p.is_file()):
        rel = path.relative_to(src).as_posix()
        data = path.read_bytes()
        etag = hashlib.sha256(data).hexdigest() if rel.endswith(".safetensors") else git_sha1(data)
        blob = folder / "blobs" / etag
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        pointer = Path(file_download._get_pointer_path(str(folder), commit, rel))
        pointer.parent.mkdir(parents=True, exist_ok=True)
        file_download._create_symlink(str(blob), str(pointer), new_blob=False)
    file_download._cache_commit_hash_for_specific_revision(str(folder), "main", commit)


def test_a_hub_cache_pushes_with_its_origin_and_pulls_back_byte_identical(tmp_path, capsys, hub, registry,
                                                                          unique_repo):
    src = make_bert_model(tmp_path / "src")
    write_with_huggingface_hub(hub, "acme/source", src, COMMIT)
    assert huggingface_hub.scan_cache_dir(hub).warnings == []
    ref = f"{registry.host}/{unique_repo}:hf"
    assert main(["push", "hf:acme/source", ref, "-q", "--json"]) == 0
    capsys.readouterr()
    assert main(["inspect", ref, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    annotations = info["annotations"]
    assert annotations["org.opencontainers.image.source"] == "https://huggingface.co/acme/source"
    assert annotations["org.opencontainers.image.revision"] == COMMIT
    out = tmp_path / "back"
    assert main(["pull", ref, str(out), "-q"]) == 0
    assert files_of(out) == files_of(src)
    # and into the Hub cache again under another name: the same commit, the same files
    assert main(["pull", ref, "hf:acme/copy", "-q"]) == 0
    assert (hub / "models--acme--copy" / "refs" / "main").read_text() == COMMIT
    where = Path(huggingface_hub.snapshot_download("acme/copy", local_files_only=True))
    assert where.name == COMMIT and files_of(where) == files_of(src)
    # by commit, the same artifact (pushes are reproducible)
    digest = info["digest"]
    capsys.readouterr()
    assert main(["push", f"hf:acme/source@{COMMIT}", f"{registry.host}/{unique_repo}:by-commit", "--json",
                 "-q"]) == 0
    assert json.loads(capsys.readouterr().out)["digest"] == digest
    assert split_digest(digest)[0] == "sha256"


@pytest.mark.parametrize("source, words", [("hf:acme/absent", "not in the Hugging Face cache"),
                                           ("hf:acme/source@v9", BAD_REVISION),
                                           ("hf:../etc", "not a Hugging Face repo id")])
def test_hub_cache_source_mistakes_are_one_line(tmp_path, capsys, hub, source, words):
    write_with_huggingface_hub(hub, "acme/source", make_bert_model(tmp_path / "src"), COMMIT)
    code = main(["push", source, f"oci:{tmp_path / 'layout'}:t", "-q"])
    err = capsys.readouterr().err
    assert code in (1, 2) and err.count("\n") == 1 and words in err, err
    assert not (tmp_path / "layout").exists()


def test_path_hf_lays_the_snapshot_out_in_the_hub_cache_too(tmp_path, capsys, hub, registry, unique_repo):
    from transformers import AutoConfig

    src, ref = _pushed_bert(tmp_path, capsys, registry, unique_repo)
    assert main(["path", ref, "--hf", "acme/via-path"]) == 0
    snapshot = Path(capsys.readouterr().out.strip())
    where = Path(huggingface_hub.snapshot_download("acme/via-path", local_files_only=True))
    assert files_of(where) == files_of(src) == files_of(snapshot)
    assert (where / "model.safetensors").resolve().stat().st_ino == (snapshot / "model.safetensors").stat().st_ino
    assert AutoConfig.from_pretrained("acme/via-path", local_files_only=True).hidden_size == 32
    assert main(["path", f"{registry.host}/{unique_repo}:absent", "--hf", "../bad"]) == 2  # before any request
    assert "not a Hugging Face repo id" in capsys.readouterr().err


def test_a_hub_snapshot_link_leaving_the_repo_folder_is_refused(tmp_path, capsys, hub):
    write_with_huggingface_hub(hub, "acme/source", make_bert_model(tmp_path / "src"), COMMIT)
    secret = tmp_path / "secret.txt"
    secret.write_text("not part of any model")
    (hub / "models--acme--source" / "snapshots" / COMMIT / "stolen.txt").symlink_to(secret)
    assert main(["push", "hf:acme/source", f"oci:{tmp_path / 'layout'}:t", "-q"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "stolen.txt does not lead to a file of the cache" in err
    assert not (tmp_path / "layout").exists()


def annotations_of(ref: str, capsys) -> tuple[str, dict[str, str]]:
    capsys.readouterr()
    assert main(["inspect", ref, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    return info["digest"], info["annotations"]


def test_copy_reads_the_hub_cache_as_push_does(tmp_path, capsys, hub, registry, unique_repo):
    """``copy hf:…`` stores the very artifact ``push hf:…`` builds: into a layout and into a
    registry, with its origin, and it pulls back byte for byte."""
    src = make_bert_model(tmp_path / "src")
    write_with_huggingface_hub(hub, "acme/source", src, COMMIT)
    pushed = f"{registry.host}/{unique_repo}:pushed"
    assert main(["push", "hf:acme/source", pushed, "-q"]) == 0
    digest, _ = annotations_of(pushed, capsys)
    layout = f"oci:{tmp_path / 'layout'}:copied"
    copied = f"{registry.host}/{unique_repo}:copied"
    for dest in (layout, copied):
        assert main(["copy", "hf:acme/source", dest, "-q"]) == 0
        got, annotations = annotations_of(dest, capsys)
        assert got == digest
        assert annotations["org.opencontainers.image.source"] == "https://huggingface.co/acme/source"
        assert annotations["org.opencontainers.image.revision"] == COMMIT
    assert main(["copy", f"hf:acme/source@{COMMIT}", f"{registry.host}/{unique_repo}:by-commit", "-q"]) == 0
    assert annotations_of(f"{registry.host}/{unique_repo}:by-commit", capsys)[0] == digest
    out = tmp_path / "back"
    assert main(["pull", copied, str(out), "-q"]) == 0
    assert files_of(out) == files_of(src)
    from signing_keys import key_pair

    _, public = key_pair(tmp_path / "k")
    capsys.readouterr()
    assert main(["copy", "hf:acme/source", f"{registry.host}/{unique_repo}:v", "--verify-key", str(public)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the Hugging Face cache has none" in err


def test_convert_reads_the_hub_cache(tmp_path, capsys, hub, registry, unique_repo):
    src = make_bert_model(tmp_path / "src")
    write_with_huggingface_hub(hub, "acme/source", src, COMMIT)
    kit = f"{registry.host}/{unique_repo}:kit"
    assert main(["convert", "hf:acme/source", kit, "--to", "modelkit", "-q"]) == 0
    capsys.readouterr()
    assert main(["inspect", kit, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert "kitops" in json.dumps(info).lower()  # a ModelKit now
    annotations = info["annotations"]
    assert annotations["org.opencontainers.image.source"] == "https://huggingface.co/acme/source"
    assert annotations["org.opencontainers.image.revision"] == COMMIT
    out = tmp_path / "back"
    assert main(["pull", kit, str(out), "-q"]) == 0
    assert {k: v for k, v in files_of(out).items() if k != "Kitfile"} == files_of(src)


@pytest.mark.parametrize("command", ["copy", "convert"])
@pytest.mark.parametrize("source, words", [("hf:acme/absent", "not in the Hugging Face cache"),
                                           ("hf:acme/source@v9", BAD_REVISION),
                                           (f"hf:acme/source@{'f' * 40}", f"no revision '{'f' * 40}'"),
                                           ("hf:../etc", "not a Hugging Face repo id")])
def test_copy_and_convert_hub_mistakes_are_one_line(tmp_path, capsys, hub, command, source, words):
    write_with_huggingface_hub(hub, "acme/source", make_bert_model(tmp_path / "src"), COMMIT)
    extra = ["--to", "modelkit"] if command == "convert" else []
    code = main([command, source, f"oci:{tmp_path / 'layout'}:t", "-q", *extra])
    err = capsys.readouterr().err
    assert code in (1, 2) and err.count("\n") == 1 and words in err, err
    assert not (tmp_path / "layout").exists()


def big_hub_model(hub: Path) -> None:
    """acme/big in the Hub cache, laid out by hand: a weights file one byte over push's chunk
    threshold (a cheap pattern: what matters is its size) and a config."""
    from ocibridge.chunks.chunktable import PUSH_THRESHOLD

    folder = hub / "models--acme--big"
    files = {"model.safetensors": bytes(range(256)) * (PUSH_THRESHOLD // 256) + b"!",
             "config.json": b'{"model_type": "bert"}'}
    for rel, data in files.items():
        blob = folder / "blobs" / hashlib.sha256(data).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        link = folder / "snapshots" / COMMIT / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(f"../../blobs/{blob.name}")
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text(COMMIT)


def stored_with_table(layout: Path, tag: str) -> tuple[str, str, str]:
    """(manifest digest, the chunk table it binds, its one chunk-table referrer) of ``layout``'s
    ``tag``, the table's blob there."""
    from ocibridge.chunks.chunktable import ANNOTATION_DIGEST, ANNOTATION_SIZE, ARTIFACT_TYPE
    from ocibridge.oci.models import Descriptor, parse_manifest_bytes
    from ocibridge.stores.layout import LayoutStore

    store = LayoutStore(layout)
    desc = store.resolve(tag)
    manifest = parse_manifest_bytes(store.fetch_bytes(desc), desc.mediaType)
    said = manifest.annotations or {}
    table = said.get(ANNOTATION_DIGEST, "")
    assert table and store.exists(Descriptor(mediaType="application/octet-stream", digest=table,
                                             size=int(said[ANNOTATION_SIZE])))
    subject = Descriptor(mediaType=desc.mediaType, digest=desc.digest, size=desc.size)
    (referrer,) = [r.digest for r in store.referrers(subject, ARTIFACT_TYPE)]
    return desc.digest, table, referrer


def pushed_big(tmp_path: Path, capsys, hub: Path) -> dict:
    """``push hf:acme/big`` into the layout ``pushed``: its --json, a chunk table bound."""
    big_hub_model(hub)
    assert main(["push", "hf:acme/big", f"oci:{tmp_path / 'pushed'}:v1", "--json", "-q"]) == 0
    pushed = json.loads(capsys.readouterr().out)
    assert pushed["chunks"]["layers"] == 1
    return pushed


def test_copy_of_a_large_hub_model_is_push_s_artifact_with_its_chunk_table(tmp_path, capsys, hub):
    """A file from push's chunk threshold: ``push hf:`` binds a chunk table and attaches its
    referrer; ``copy hf:`` wrote the manifest without them (another digest). Now the same
    manifest, table and referrer."""
    pushed = pushed_big(tmp_path, capsys, hub)
    assert main(["copy", "hf:acme/big", f"oci:{tmp_path / 'copied'}:v1", "--json", "-q"]) == 0
    copied = json.loads(capsys.readouterr().out)
    assert copied["digest"] == pushed["digest"] and copied["chunks"] == pushed["chunks"]
    found = stored_with_table(tmp_path / "pushed", "v1")
    assert found == (pushed["digest"], pushed["chunks"]["table"], pushed["chunks"]["referrer"])
    assert stored_with_table(tmp_path / "copied", "v1") == found


@pytest.mark.parametrize("to", [["modelpack"], ["modelpack", "--media-types", "cncf"], ["modelkit"],
                                ["docker-model"]], ids=lambda to: "-".join(to[::2]))
def test_convert_of_a_large_hub_model_is_convert_of_push_s_artifact(tmp_path, capsys, hub, to):
    """``convert hf:`` is convert of what ``push hf:`` stored: the same manifest, the table
    carried the same way (it read an artifact without the table before: other digests)."""
    pushed_big(tmp_path, capsys, hub)
    assert main(["convert", "hf:acme/big", f"oci:{tmp_path / 'from-hf'}:v1", "--to", *to, "--json", "-q"]) == 0
    from_hf = json.loads(capsys.readouterr().out)
    assert main(["convert", f"oci:{tmp_path / 'pushed'}:v1", f"oci:{tmp_path / 'from-push'}:v1", "--to", *to,
                 "--json", "-q"]) == 0
    from_push = json.loads(capsys.readouterr().out)
    assert from_hf["reference"].rsplit("@", 1)[1] == from_push["reference"].rsplit("@", 1)[1]
    assert from_hf["chunks"] == from_push["chunks"] and from_hf["chunks"] is not None
    assert stored_with_table(tmp_path / "from-hf", "v1") == stored_with_table(tmp_path / "from-push", "v1")
