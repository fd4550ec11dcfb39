"""ONNX models whose tensors keep their data in external files: the ``location`` of each is a
path the runtime opens relative to the model's directory, so one that is absolute or climbs out
of it (``../../etc/passwd``) reads, or with a writer writes, any file. The protobuf is walked
field by field by ranges: tensor bytes are skipped, never read.

A file is taken for a model when its top-level fields are ModelProto's and fill it exactly."""

from __future__ import annotations

import io
import posixpath
from collections.abc import Iterator

from ocibridge.lazyread.tensorfile import RangeReadable
from ocibridge.scanning.content import stream_of
from ocibridge.scanning.report import Finding

VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5
#: ModelProto's fields and their wire types (onnx.proto3)
_MODEL = {1: VARINT, 2: LENGTH, 3: LENGTH, 4: LENGTH, 5: VARINT, 6: LENGTH, 7: LENGTH, 8: LENGTH, 14: LENGTH,
          20: LENGTH, 25: LENGTH}
GRAPH = 7
# GraphProto: node 1, initializer 5, sparse_initializer 15; NodeProto: attribute 5;
# AttributeProto: t 5, g 6, tensors 10, graphs 11; SparseTensorProto: values 1, indices 2;
# TensorProto: name 8, external_data 13; StringStringEntryProto: key 1, value 2
MAX_FIELDS = 1 << 22
MAX_DEPTH = 16
MAX_STRING = 1 << 16


class NotProtobuf(ValueError):
    pass


class _Walker:
    def __init__(self, content: RangeReadable):
        self.content = content
        self.stream = stream_of(content)
        self.fields = 0

    def varint(self) -> int:
        shift = result = 0
        while True:
            byte = self.stream.read(1)
            if not byte:
                raise NotProtobuf("truncated varint")
            result |= (byte[0] & 0x7F) << shift
            if not byte[0] & 0x80:
                return result
            shift += 7
            if shift > 63:
                raise NotProtobuf("varint too long")

    def walk(self, start: int, end: int) -> Iterator[tuple[int, int, int, int]]:
        """(field, wire type, value start, value end) of each field in ``[start, end)``; a
        varint's value is in the start slot."""
        pos = start
        while pos < end:
            self.fields += 1
            if self.fields > MAX_FIELDS:
                raise NotProtobuf("too many fields")
            self.stream.seek(pos)
            key = self.varint()
            field, wire = key >> 3, key & 7
            if field == 0:
                raise NotProtobuf("field 0")
            if wire == VARINT:
                value = self.varint()
                pos = self.stream.tell()
                yield field, wire, value, value
                continue
            if wire == LENGTH:
                length = self.varint()
                begin = self.stream.tell()
            elif wire in (FIXED64, FIXED32):
                begin, length = self.stream.tell(), 8 if wire == FIXED64 else 4
            else:
                raise NotProtobuf(f"wire type {wire}")
            pos = begin + length
            if pos > end:
                raise NotProtobuf("a field runs past its message")
            yield field, wire, begin, pos

    def text(self, start: int, end: int) -> str:
        if end - start > MAX_STRING:
            raise NotProtobuf("a string too long for a path")
        self.stream.seek(start)
        return self.stream.read(end - start).decode("utf-8", "replace")


def is_model(content: RangeReadable) -> bool:
    """Whether ``content``'s top-level fields are all ModelProto's, fill it, and hold a graph."""
    walker = _Walker(content)
    seen = set()
    try:
        for field, wire, _, _ in walker.walk(0, content.size):
            if _MODEL.get(field) != wire:
                return False
            seen.add(field)
    except (NotProtobuf, io.UnsupportedOperation):
        return False
    return GRAPH in seen


def onnx_findings(path: str, content: RangeReadable, where: str = "") -> list[Finding]:
    """Each external data location of the model that is absolute or leaves its directory."""
    walker = _Walker(content)
    found: list[Finding] = []
    try:
        for field, wire, start, end in walker.walk(0, content.size):
            if field == GRAPH and wire == LENGTH:
                _graph(walker, start, end, 0, path, where, found)
    except NotProtobuf as e:
        found.append(Finding(path, "high", f"ONNX model does not parse: {e}", where))
    return found


def _graph(w: _Walker, start: int, end: int, depth: int, path: str, where: str, found: list[Finding]) -> None:
    if depth > MAX_DEPTH:
        raise NotProtobuf("graphs nested too deep")
    for field, wire, s, e in w.walk(start, end):
        if wire != LENGTH:
            continue
        if field == 5:
            _tensor(w, s, e, path, where, found)
        elif field == 15:
            for f2, w2, s2, e2 in w.walk(s, e):
                if f2 in (1, 2) and w2 == LENGTH:
                    _tensor(w, s2, e2, path, where, found)
        elif field == 1:
            for f2, w2, s2, e2 in w.walk(s, e):
                if f2 == 5 and w2 == LENGTH:
                    _attribute(w, s2, e2, depth, path, where, found)


def _attribute(w: _Walker, start: int, end: int, depth: int, path: str, where: str, found: list[Finding]) -> None:
    for field, wire, s, e in w.walk(start, end):
        if wire != LENGTH:
            continue
        if field in (5, 10):
            _tensor(w, s, e, path, where, found)
        elif field in (6, 11):
            _graph(w, s, e, depth + 1, path, where, found)


def _tensor(w: _Walker, start: int, end: int, path: str, where: str, found: list[Finding]) -> None:
    name = ""
    locations = []
    for field, wire, s, e in w.walk(start, end):
        if field == 8 and wire == LENGTH:
            name = w.text(s, e)
        elif field == 13 and wire == LENGTH:
            key = value = ""
            for f2, w2, s2, e2 in w.walk(s, e):
                if f2 == 1 and w2 == LENGTH:
                    key = w.text(s2, e2)
                elif f2 == 2 and w2 == LENGTH:
                    value = w.text(s2, e2)
            if key == "location":
                locations.append(value)
    for location in locations:
        why = escapes(location)
        if why:
            found.append(Finding(path, "high", f"ONNX external data path {location!r} of tensor {name!r} {why}",
                                 where))


def escapes(location: str) -> str:
    """Why a tensor's external data ``location`` is not a file inside the model's directory
    (empty when it is)."""
    if not location or "\x00" in location:
        return "is empty or holds a NUL"
    text = location.replace("\\", "/")
    if text.startswith("/") or (len(text) > 1 and text[1] == ":"):
        return "is absolute"
    if posixpath.normpath(text).split("/")[0] == ".." or ".." in text.split("/"):
        return "leaves the model's directory"
    return ""
