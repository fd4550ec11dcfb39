"""One file, judged by its content, whatever its name: the first bytes say what it is (a zip, a
GGUF, a NumPy array, HDF5, safetensors, a compressed stream, ONNX, a pickle), and each kind gets
its check. A name only adds a finding when the content is not what it says (a ``.safetensors``
that is a zip: a loader by name misreads it, a loader by content unpickles it)."""

from __future__ import annotations

from ocibridge.lazyread.tensorfile import RangeReadable
from ocibridge.scanning import archives, headers, keras, numpyfiles, onnxfiles
from ocibridge.scanning.content import stream_of
from ocibridge.scanning.library import pickle_findings
from ocibridge.scanning.report import Finding
from ocibridge.scanning.sniff import compression_of, looks_like_pickle

HEAD = 16
#: the names that promise a format whose content is checked
_PROMISES = {".safetensors": "safetensors", ".gguf": "gguf", ".onnx": "onnx"}


def scan_content(path: str, content: RangeReadable, *, where: str = "", depth: int = 0) -> tuple[str, list[Finding]]:
    """The format ``content`` shows and what its check found. ``where``: inside ``path`` (a
    member of an archive, at nesting ``depth``)."""
    head = content.read(0, HEAD)
    kind, found = _judge(path, content, head, where, depth)
    promised = _promise(where or path)
    if promised and kind != promised:
        found.append(Finding(path, "high", f"named {promised} but its content is {kind}", where))
    return kind, found


def _judge(path: str, content: RangeReadable, head: bytes, where: str, depth: int) -> tuple[str, list[Finding]]:
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return "zip", archives.zip_findings(path, content, where, depth, scan_content)
    if head.startswith(headers.GGUF_MAGIC):
        return "gguf", headers.gguf_findings(path, content)
    if head.startswith(numpyfiles.NPY_MAGIC):
        return "npy", numpyfiles.npy_findings(path, content, where)
    if head.startswith(keras.HDF5_MAGIC):
        return "hdf5", keras.hdf5_findings(path, content, where)
    if headers.looks_like_safetensors(head, content.size):
        found = headers.safetensors_findings(path, content)
        if not found:
            return "safetensors", []
        return "safetensors", found + _pickle_too(path, content, head, where)
    packed = compression_of(head)
    if packed is not None:
        return f"{packed}-compressed", archives.compressed_findings(path, content, packed, where, depth, scan_content)
    if (head[:1] == b"\x08" or (where or path).endswith(".onnx")) and onnxfiles.is_model(content):
        return "onnx", onnxfiles.onnx_findings(path, content, where)
    if looks_like_pickle(head):
        return "pickle", pickle_findings(path, stream_of(content), where)
    if _promise(where or path) == "safetensors":  # say why it is not one
        return "unknown", headers.safetensors_findings(path, content)
    if head.lstrip()[:1] in (b"{", b"[") and content.size <= keras.MAX_CONFIG:
        return "json", keras.json_findings(path, content.read(0, content.size), where)
    return "unknown", []


def _pickle_too(path: str, content: RangeReadable, head: bytes, where: str) -> list[Finding]:
    """A file that looked like safetensors but is not one may be a pickle made to look so."""
    return pickle_findings(path, stream_of(content), where) if looks_like_pickle(head) else []


def _promise(name: str) -> str:
    for suffix, kind in _PROMISES.items():
        if name.lower().endswith(suffix):
            return kind
    return ""


__all__ = ["looks_like_pickle", "scan_content"]
