"""Metadata read from a model's own files is bounded in work, size and value range (issue 34,
item 7): hostile safetensors headers, config.json files and GGUF headers leave a field unknown
with a note on stderr, and never fail a push, nor cost more than a few seconds of CPU or much memory.
These files also come from ModelCar images built by other tools, so they are untrusted."""

from __future__ import annotations

import io
import json
import struct
import time
from pathlib import Path

import pytest

from ocibridge.errors import OcibridgeError, SourceError
from ocibridge.kinds.modelcar.image import image_config
from ocibridge.model import metadata
from ocibridge.model.gguf_header import MAX_VALUES, format_param_count, read_gguf_header
from ocibridge.oci.mediatypes import OCI_MANIFEST
from ocibridge.oci.models import Descriptor, Manifest
from ocibridge.stores.layout import LayoutStore
from tests.hostile_run import CLI_SECONDS, RSS_BOUND_MB, run_cli, snapshot, sparse
from tests.kinds.test_families_metadata import _config

PUSH_SECONDS = CLI_SECONDS  # a whole push in a child process; the unbounded readers took minutes


def safetensors(header: bytes | str, data: int = 0) -> bytes:
    raw = header.encode() if isinstance(header, str) else header
    return struct.pack("<Q", len(raw)) + raw + b"\0" * data


def _shape(shape: str) -> str:
    return '{"w": {"dtype": "F16", "shape": ' + shape + ', "data_offsets": [0, 0]}}'


SAFETENSORS = {
    "a dimension of 10^399": _shape("[" + "1" + "0" * 399 + "]"),
    "a dimension of 2^63": _shape(f"[{2**63}]"),
    "dimensions whose product passes 2^63": _shape(f"[{2**40}, {2**40}]"),
    "1.5M dimensions in a 3 MB header": _shape("[" + ",".join(["7"] * 1_500_000) + "]"),  # 7^1.5M: minutes of bigint
    "300,000 tensors of 4 dimensions": "{" + ",".join(
        f'"t{i}": {{"dtype": "F32", "shape": [2, 2, 2, 2], "data_offsets": [0, 0]}}' for i in range(300_000)) + "}",
    "tensors nested 100,000 deep": '{"w": ' + "[" * 100_000 + "]" * 100_000 + "}",
    "a 5,000-digit dimension": _shape("[" + "9" * 5000 + "]"),
    "dimensions that are not counts": _shape("[true, -1, 1.5e308, null]"),
}


@pytest.mark.parametrize("header", SAFETENSORS.values(), ids=SAFETENSORS.keys())
def test_a_hostile_safetensors_header_never_fails_a_push(tmp_path, header) -> None:
    model = tmp_path / "m"
    model.mkdir()
    (model / "model.safetensors").write_bytes(safetensors(header))
    ran = run_cli("push", str(model), f"oci:{tmp_path / 'out'}:v1", "-q")
    assert ran.code == 0, ran.err
    assert "Traceback" not in ran.err and "error" not in ran.err
    assert ran.cpu_seconds < PUSH_SECONDS and ran.peak_mb < RSS_BOUND_MB, (ran.cpu_seconds, ran.peak_mb)
    assert "paramSize" not in _config(tmp_path / "out", "v1")["config"]


def test_a_safetensors_header_beyond_the_metadata_cap_is_noted_not_read(tmp_path, caplog) -> None:
    model = tmp_path / "m"
    model.mkdir()
    head = safetensors(b'{"w": {"dtype": "F16", "shape": [1], "data_offsets": [0, 0]}}'
                       + b" " * metadata.MAX_METADATA_HEADER)
    path = sparse(model / "model.safetensors", len(head), head)
    started = time.thread_time()  # the CPU work of this thread: a loaded machine does not stretch it
    assert metadata.safetensors_header(_file(path)) is None
    assert time.thread_time() - started < 1
    assert "read for metadata; parameter count unknown" in caplog.text


def test_counting_stops_at_its_budget_in_linear_time(caplog) -> None:
    huge = [{"w": {"dtype": "F16", "shape": [1] * (metadata.MAX_DIMS + 1)}}]
    started = time.thread_time()
    assert metadata.count_parameters(huge) == {}
    assert time.thread_time() - started < 1
    assert f"more than {metadata.MAX_DIMS} tensor dimensions" in caplog.text
    assert metadata.count_parameters([{"w": {"dtype": "F16", "shape": [10**399]}}]) == {}
    assert metadata.count_parameters([{"a": {"dtype": "F16", "shape": [2**62]},
                                       "b": {"dtype": "F16", "shape": [2**62]}}]) == {}
    assert metadata.count_parameters([{"w": {"dtype": "BF16", "shape": [4096, 4096]}}]) == {"BF16": 4096 * 4096}


def test_param_counts_beyond_any_float_format_as_unknown() -> None:
    assert format_param_count(10**400) == "unknown"
    assert format_param_count(8030261248) == "8B"


CONFIGS = {
    "nested 100,000 deep": '{"architectures": ' + "[" * 100_000 + "]" * 100_000 + "}",
    "a 1 MB architecture": json.dumps({"architectures": ["A" * 1_000_000]}),
    "a 5,000-digit number": '{"model_type": "llama", "hidden_size": ' + "9" * 5000 + "}",
    "not an object": "[1, 2, 3]",
}


@pytest.mark.parametrize("text", CONFIGS.values(), ids=CONFIGS.keys())
def test_a_hostile_config_json_never_fails_a_push(tmp_path, text) -> None:
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text(text[: metadata.MAX_CONFIG_JSON])
    (model / "model.safetensors").write_bytes(safetensors(_shape("[2, 2]")))
    ran = run_cli("push", str(model), f"oci:{tmp_path / 'out'}:v1", "-q")
    assert ran.code == 0, ran.err
    config = _config(tmp_path / "out", "v1")["config"]
    assert len(config.get("architecture", "")) <= metadata.MAX_NAME
    assert ran.cpu_seconds < PUSH_SECONDS and ran.peak_mb < RSS_BOUND_MB


# -- GGUF headers --------------------------------------------------------------------------------
def _gguf_kv(key: str, vtype: int, value: bytes, tensors: int = 0, kvs: int = 1) -> bytes:
    k = key.encode()
    return (b"GGUF" + struct.pack("<IQQ", 3, tensors, kvs) + struct.pack("<Q", len(k)) + k
            + struct.pack("<I", vtype) + value)


def _nested_arrays(depth: int) -> bytes:
    return _gguf_kv("a", 9, struct.pack("<IQ", 9, 1) * depth + struct.pack("<IQ", 0, 0))


def _tensor(dims: list[int]) -> bytes:
    return struct.pack("<Q", 1) + b"t" + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims) \
        + struct.pack("<IQ", 0, 0)


GGUFS = {
    "arrays nested 1,000 deep": lambda p: p.write_bytes(_nested_arrays(1000)),
    "2^24 empty arrays (sparse)": lambda p: sparse(p, 64 << 20, _gguf_kv("a", 9, struct.pack("<IQ", 9, 1 << 24))),
    "2^24 empty strings (sparse)": lambda p: sparse(p, 64 << 20, _gguf_kv("a", 9, struct.pack("<IQ", 8, 1 << 24))),
    "2^24 tensor infos (sparse)": lambda p: sparse(p, 64 << 20, b"GGUF" + struct.pack("<IQQ", 3, 1 << 24, 0)),
    "a tensor of 2^64^8 elements": lambda p: p.write_bytes(
        b"GGUF" + struct.pack("<IQQ", 3, 1, 0) + _tensor([2**64 - 1] * 8)),
    "two tensors passing 2^63 together": lambda p: p.write_bytes(
        b"GGUF" + struct.pack("<IQQ", 3, 2, 0) + _tensor([2**62]) + _tensor([2**62])),
}


@pytest.mark.parametrize("make", GGUFS.values(), ids=GGUFS.keys())
def test_a_hostile_gguf_header_is_one_error_in_bounded_time(tmp_path, make) -> None:
    path = tmp_path / "model.gguf"
    make(path)
    started = time.thread_time()
    with open(path, "rb") as f, pytest.raises(SourceError) as caught:
        read_gguf_header(f, where="model.gguf")
    assert time.thread_time() - started < 5
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("make", list(GGUFS.values())[:2], ids=list(GGUFS.keys())[:2])
def test_a_hostile_gguf_header_never_fails_a_push(tmp_path, make) -> None:
    model = tmp_path / "m"
    model.mkdir()
    make(model / "model.gguf")
    ran = run_cli("push", str(model), f"oci:{tmp_path / 'out'}:v1", "-q")
    assert ran.code == 0, ran.err
    assert "note:" in ran.err and "GGUF metadata unknown" in ran.err
    assert ran.cpu_seconds < PUSH_SECONDS and ran.peak_mb < RSS_BOUND_MB


def test_a_real_sized_tokenizer_is_within_the_value_budget() -> None:
    tokens = 262_144  # Gemma 3's vocabulary, as strings, plus as many merges
    assert 2 * tokens < MAX_VALUES


# -- ModelCar image configs built by other tools ---------------------------------------------------
@pytest.mark.parametrize("config", [b"[" * 100_000 + b"]" * 100_000, b'{"a": ' * 50_000 + b"1" + b"}" * 50_000])
def test_a_modelcar_config_nested_too_deeply_is_one_error(tmp_path, config) -> None:
    store = LayoutStore(tmp_path / "lay", create=True)
    desc = Descriptor.for_bytes("application/vnd.oci.image.config.v1+json", config)
    store.push_blob(desc, io.BytesIO(config))
    manifest = Manifest(config=desc, layers=[])
    before = snapshot(tmp_path)
    with pytest.raises(OcibridgeError, match="nested too deeply"):
        image_config(store, manifest)
    assert snapshot(tmp_path) == before
    assert OCI_MANIFEST  # the image's own type: nothing marks a ModelCar image


def _file(path: Path):
    from ocibridge.model.package import ModelFile

    return ModelFile.from_path(path.name, path, metadata_kind())


def metadata_kind():
    from ocibridge.oci.mediatypes import Kind

    return Kind.WEIGHT
