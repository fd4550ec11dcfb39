"""A new repository's first commit, as the Hub makes it: ``create_repo`` commits a
``.gitattributes`` at once ("initial commit"), so that a repository exists with a ``main`` from
its creation (``model_info``, ``create_branch`` and ``create_tag`` on ``main`` answer), and its
commit count is the Hub's. The patterns are the Hub's own for a model repository: the files
that go to LFS whatever their size (huggingface_hub's preupload asks serve which mode a file
takes, and serve answers from this file of the branch). A create may send files of its own
(the JavaScript client's ``createRepo({files})``) and a license (``createRepo({license})``: the Hub
commits a model card saying it): they land in that same first commit (:func:`first_files`)."""

from __future__ import annotations

#: the first commit's summary, as the Hub writes it
SUMMARY = "initial commit"

_LFS_PATTERNS = (
    "*.7z", "*.arrow", "*.bin", "*.bz2", "*.ckpt", "*.ftz", "*.gz", "*.h5", "*.joblib", "*.lfs.*",
    "*.mlmodel", "*.model", "*.msgpack", "*.npy", "*.npz", "*.onnx", "*.ot", "*.parquet", "*.pb",
    "*.pickle", "*.pkl", "*.pt", "*.pth", "*.rar", "*.safetensors", "saved_model/**/*", "*.tar.*",
    "*.tar", "*.tflite", "*.tgz", "*.wasm", "*.xz", "*.zip", "*.zst", "*tfevents*",
)

#: the ``.gitattributes`` of a new model repository
GITATTRIBUTES = "".join(f"{p} filter=lfs diff=lfs merge=lfs -text\n" for p in _LFS_PATTERNS).encode()

#: bytes of the files a create sends together (``createRepo({files})``: "a few lightweight files";
#: the request body's own bound, guard.py's BODY_MAX, comes first where it is lower;
#: each a regular file: under the 10 MiB under which the Hub keeps a file in git)
FILES_MAX = 10 * 1024 * 1024


def license_card(license_id: str) -> bytes:
    """The model card the Hub commits for ``createRepo({license})``: front matter naming it."""
    return f"---\nlicense: {license_id}\n---\n".encode()


def first_files(body: dict[str, object]) -> dict[str, bytes]:
    """path -> bytes of the files a create asks in its first commit, besides the
    ``.gitattributes`` (which one of them replaces): its ``files`` (``[{path, content,
    encoding: "base64"}]``, checked as a commit's inline files are) and, for ``license``, a
    README.md saying it unless a file sent is one. :class:`.BadCommit` for a malformed one."""
    import json

    from ocibridge.hubserver.repo.commits import BadCommit, CommitRequest, clean_path, read_line

    sent = body.get("files")
    if sent is not None and not isinstance(sent, list):
        raise BadCommit("files: expected [{'path': ..., 'content': BASE64, 'encoding': 'base64'}, ...]")
    payload = CommitRequest()
    files: dict[str, bytes] = {}
    for number, item in enumerate(sent or [], 1):
        read = read_line(payload, number, json.dumps({"key": "file", "value": item}).encode())
        assert read is not None and isinstance(item, dict)  # a "file" line read: a dict with content
        files[clean_path(item["path"])] = read[1]
    if sum(len(content) for content in files.values()) > FILES_MAX:
        raise BadCommit(f"files: a create takes at most {FILES_MAX} bytes of files (commit larger ones after it)")
    license_id = body.get("license")
    if license_id is not None:
        if not isinstance(license_id, str) or not license_id.strip() or "\n" in license_id:
            raise BadCommit("license: expected a license id, such as 'mit'")
        files.setdefault("README.md", license_card(license_id.strip()))
    return files
