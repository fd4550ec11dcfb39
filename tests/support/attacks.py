"""Malicious model files made the way attackers make them, for the scanner's tests. Nothing
here is ever loaded: the pickles are written opcode by opcode (or by ``pickle.dumps`` of an
object whose ``__reduce__`` names the call, which pickling does not make), never unpickled."""

from __future__ import annotations

import io
import json
import pickle
import struct
import zipfile
import zlib
from pathlib import Path

COMMAND = "echo pwned > /tmp/ocibridge-scan-pwned"


def system_pickle(command: str = COMMAND) -> bytes:
    """Protocol 2, by hand: GLOBAL os.system, the command, TUPLE1, REDUCE, STOP."""
    text = command.encode()
    return (b"\x80\x02" + b"cos\nsystem\n" + b"X" + struct.pack("<I", len(text)) + text + b"\x85" + b"R" + b".")


def torch_zip(payload: bytes | None = None) -> bytes:
    """A PyTorch checkpoint as torch.save lays it out: archive/data.pkl (here the payload),
    archive/version, a storage under archive/data/, stored uncompressed."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", payload if payload is not None else system_pickle())
        z.writestr("archive/byteorder", "little")
        z.writestr("archive/data/0", struct.pack("<4f", 1, 2, 3, 4))
        z.writestr("archive/version", "3\n")
    return out.getvalue()


class _Reduce:
    """What an attacker pickles: its ``__reduce__`` names a call (made at load, never here)."""

    def __reduce__(self) -> tuple[object, tuple[str]]:
        import os

        return os.system, (COMMAND,)


def joblib_dump(compressed: bool = False) -> bytes:
    """What joblib.dump writes for such an object: a pickle (protocol 4), zlib-compressed by
    joblib's ``compress=True``."""
    data = pickle.dumps({"model": _Reduce()}, protocol=4)
    return zlib.compress(data, 3) if compressed else data


def npy_objects() -> bytes:
    """A NumPy .npy array of Python objects (np.save of dtype=object: its data is a pickle)."""
    import numpy as np

    out = io.BytesIO()
    np.save(out, np.array([{"a": 1}, "b"], dtype=object), allow_pickle=True)
    return out.getvalue()


def keras_lambda() -> bytes:
    """A Keras 3 ``.keras`` zip whose config.json holds a Lambda layer (its marshalled code)."""
    config = {"module": "keras", "class_name": "Sequential", "config": {"name": "seq", "layers": [
        {"module": "keras.layers", "class_name": "InputLayer", "config": {"batch_shape": [None, 4], "name": "in"}},
        {"module": "keras.layers", "class_name": "Lambda", "config": {
            "name": "evil", "function": {"class_name": "__lambda__", "config": {
                "code": "4wEAAAAAAAAAAAAAAAEAAAADAAAA8wwAAACXAHQAAAAAAAAAAABkAacBAAAAAAAAUwApAk7aBWVjaG8gcHduZWQpAdoC",
                "defaults": None, "closure": None}}}}]}}
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("metadata.json", json.dumps({"keras_version": "3.6.0"}))
        z.writestr("config.json", json.dumps(config))
        z.writestr("model.weights.h5", b"\x89HDF\r\n\x1a\n" + bytes(64))
    return out.getvalue()


def protobuf_varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def protobuf_field(number: int, value: bytes | int) -> bytes:
    if isinstance(value, int):
        return protobuf_varint(number << 3) + protobuf_varint(value)
    return protobuf_varint(number << 3 | 2) + protobuf_varint(len(value)) + value


def onnx_external(location: str = "../../etc/passwd") -> bytes:
    """An ONNX ModelProto, protobuf by hand: ir_version 8, opset 17, a graph with one
    initializer whose data is external, at ``location``."""
    entry = protobuf_field(1, b"location") + protobuf_field(2, location.encode())
    tensor = (protobuf_field(1, 4) + protobuf_field(2, 1) + protobuf_field(8, b"w") + protobuf_field(13, entry)
              + protobuf_field(14, 1))
    node = protobuf_field(1, b"w") + protobuf_field(2, b"y") + protobuf_field(4, b"Identity")
    graph = protobuf_field(1, node) + protobuf_field(2, b"g") + protobuf_field(5, tensor)
    return (protobuf_field(1, 8) + protobuf_field(8, protobuf_field(2, 17)) + protobuf_field(2, b"attacker")
            + protobuf_field(7, graph))


def lying_safetensors() -> bytes:
    """A safetensors file whose header says its tensor runs past the end of the file."""
    header = json.dumps({"w": {"dtype": "F32", "shape": [1024], "data_offsets": [0, 4096]}}).encode()
    return struct.pack("<Q", len(header)) + header + bytes(16)


#: every attack as the tests lay it out: relative path -> bytes, and the finding each must raise
def attack_tree() -> dict[str, bytes]:
    torch = torch_zip()
    return {
        "pytorch_model.bin": torch,
        "model.safetensors": torch,
        "flax_model.msgpack": torch,
        "weights.dat": torch,
        "sub/dir/pytorch_model.bin": torch,
        "raw.pkl": system_pickle(),
        "model.joblib": joblib_dump(),
        "compressed.joblib": joblib_dump(compressed=True),
        "objects.npy": npy_objects(),
        "model.keras": keras_lambda(),
        "model.onnx": onnx_external(),
        "lying.safetensors": lying_safetensors(),
    }


def write_tree(root: Path, files: dict[str, bytes]) -> Path:
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root
