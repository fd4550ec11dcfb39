"""A whole model's tensors from the real registry straight into memory (issue 80): load_tensors
equals safetensors' own load of the pulled files, tensor for tensor, with a chunk table and
without, for one file and for two shards with their index; ``files=`` chooses; a tampered chunk
raises an error naming the file and the tensor and returns nothing; a policy refusing the model
fetches nothing past the manifest; iter_tensors holds a bounded working set."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file
from support.faultproxy import corrupt_at
from support.fixtures import new_repo

import ocibridge
from ocibridge.cli import main
from ocibridge.errors import NotFound, OcibridgeError, SignatureError
from tests.signing_keys import key_pair

CHUNK = 64 * 1024
#: a table for every file however small, in chunks of 64 KiB (the smallest a table takes)
TABLE = ocibridge.PushOptions(chunk_threshold=1, chunk_size=CHUNK)
#: requests of 4 chunks, 4 in flight: many ranges per file, landing in any order
SMALL_PARTS = ocibridge.TransferOptions(part_size=4 * CHUNK, parts_in_flight=4)


def several(seed: int) -> dict[str, np.ndarray]:
    """Tensors of most dtypes and shapes (a scalar, an empty one, odd byte counts), ~3 MiB."""
    rng = np.random.default_rng(seed)
    return {
        "embed.weight": rng.standard_normal((300, 256), dtype=np.float32),
        "layers.0.attn.q": rng.standard_normal((256, 256)).astype(np.float16),
        "layers.0.mlp.up": rng.standard_normal((512, 256)),
        "layers.0.norm": np.ones(256, np.float32),
        "positions": np.arange(1000, dtype=np.int64),
        "mask": rng.random(333) > 0.5,
        "bytes": rng.integers(0, 255, 1001, dtype=np.uint8),
        "small.i8": rng.integers(-100, 100, (7, 3), dtype=np.int8),
        "small.u16": rng.integers(0, 60000, 5, dtype=np.uint16),
        "scale": np.array(3.5, np.float32),
        "empty": np.zeros((0, 4), np.float32),
        "lm_head.weight": rng.standard_normal((700, 300), dtype=np.float32),
    }


def write_model(directory: Path, shards: list[dict[str, np.ndarray]]) -> Path:
    """A model folder: config.json and the tensors as one file, or as shards with their index."""
    directory.mkdir(parents=True)
    (directory / "config.json").write_text('{"model_type": "test"}')
    if len(shards) == 1:
        save_file(shards[0], str(directory / "model.safetensors"), metadata={"format": "np"})
        return directory
    weight_map = {}
    for i, tensors in enumerate(shards, 1):
        name = f"model-{i:05d}-of-{len(shards):05d}.safetensors"
        save_file(tensors, str(directory / name), metadata={"format": "np"})
        weight_map.update(dict.fromkeys(tensors, name))
    total = sum(a.nbytes for shard in shards for a in shard.values())
    (directory / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}))
    return directory


@pytest.fixture(scope="module")
def models(registry, tmp_path_factory):
    """One model of one file, pushed with a chunk table and without, and one of two shards with
    their index (with a table): name -> (reference, the files pulled back by ``ocibridge pull``)."""
    work = tmp_path_factory.mktemp("load")
    one = write_model(work / "one", [several(1)])
    two = write_model(work / "two", [several(2), {k + ".b": v for k, v in several(3).items()}])
    # beside the shards, the same weights under other names (as Mistral's repositories keep them):
    # the index says which files are the model's
    save_file({"consolidated." + k: v for k, v in several(2).items()}, str(two / "consolidated.safetensors"))
    out = {}
    for name, src, options in (("table", one, TABLE), ("plain", one, ocibridge.PushOptions(chunks=False)),
                               ("shards", two, TABLE)):
        repo = new_repo()
        pushed = ocibridge.push(str(src), f"{registry.host}/{repo}:v1", options=options)
        assert ("chunks" in pushed.extra) == options.chunks, name
        pulled = work / f"pulled-{name}"
        ocibridge.pull(pushed.reference, str(pulled))
        out[name] = (pushed.reference, pulled, repo)
    return out


def expected(pulled: Path, pattern: str = "model*.safetensors") -> dict[str, np.ndarray]:
    """What safetensors' own loader reads from the pulled files."""
    tensors: dict[str, np.ndarray] = {}
    for file in sorted(pulled.glob(pattern)):
        tensors.update(load_file(str(file)))
    return tensors


def assert_same(got: dict, want: dict[str, np.ndarray]) -> None:
    assert sorted(got) == sorted(want)
    for name, array in want.items():
        assert isinstance(got[name], np.ndarray), name
        assert got[name].dtype == array.dtype and got[name].shape == array.shape, name
        assert got[name].tobytes() == array.tobytes(), name


def layer_of(ref: str, path: str):
    with ocibridge.open_model(ref, warn=None, cache=False) as model:
        return model.file(path).layer


def offset_of(file: Path, tensor: str) -> int:
    """Where ``tensor``'s bytes start in the safetensors ``file``."""
    data = file.read_bytes()
    length = int.from_bytes(data[:8], "little")
    return 8 + length + json.loads(data[8:8 + length])[tensor]["data_offsets"][0]


def blob_gets(proxy, digest: str) -> list:
    return proxy.requests_matching("GET", f"/blobs/{digest}")


@pytest.mark.parametrize("which", ["table", "plain", "shards"])
def test_load_tensors_equals_safetensors_load_of_the_pulled_files(models, which):
    ref, pulled, _ = models[which]
    assert_same(ocibridge.load_tensors(ref, transfer=SMALL_PARTS), expected(pulled))
    assert_same(ocibridge.load_tensors(ref), expected(pulled))  # the defaults: one request per file here


def test_each_byte_moves_once_in_ranges_and_nothing_is_written(models, registry, fault_proxy, tmp_path):
    """With a table: the file in ranges of whole chunks (206s, several), each byte received
    once, nothing kept in the model cache; the process writes no more than its requests."""
    ref, pulled, repo = models["table"]
    layer = layer_of(ref, "model.safetensors")
    io = Path("/proc/self/io")
    written = _wchar(io)
    got = ocibridge.load_tensors(f"{registry.host}/{repo}:v1", transfer=SMALL_PARTS)
    if written is not None:  # the registry is another process: what this one wrote is its requests
        assert _wchar(io) - written < layer.size // 4
    assert_same(got, expected(pulled))
    assert not [p for p in Path(ocibridge.cache_dir()).rglob("*") if p.is_file() and p.stat().st_size >= CHUNK]
    ocibridge.load_tensors(f"{fault_proxy.host}/{repo}:v1", transfer=SMALL_PARTS)
    gets = blob_gets(fault_proxy, layer.digest)
    assert len(gets) > 4 and all(r.status == 206 for r in gets)
    ranges = [r.range.removeprefix("bytes=").split("-") for r in gets]  # ("N-": to the blob's end)
    asked = sorted((int(a), int(b) if b else layer.size - 1) for a, b in ranges)
    assert asked[0][0] == 0 and asked[-1][1] == layer.size - 1  # every byte asked once, in whole chunks
    assert all(a[1] + 1 == b[0] and b[0] % CHUNK == 0 for a, b in zip(asked, asked[1:], strict=False)), asked


def _wchar(io: Path) -> int | None:
    if not io.exists():
        return None
    return int(next(line for line in io.read_text().splitlines() if line.startswith("wchar:")).split()[1])


def test_files_globs_choose_and_the_index_chooses_by_default(models):
    ref, pulled, _ = models["shards"]
    first = ocibridge.load_tensors(ref, files="model-00001-*")
    assert_same(first, expected(pulled, "model-00001-*.safetensors"))
    consolidated = ocibridge.load_tensors(ref, files=["consolidated.safetensors"])
    assert sorted(consolidated) == sorted("consolidated." + k for k in several(2))
    everything = ocibridge.load_tensors(ref, files="*.safetensors")
    assert len(everything) == len(first) * 3
    with pytest.raises(NotFound, match=r"no safetensors file matches nope\*.*model-00001-of-00002"):
        ocibridge.load_tensors(ref, files="nope*")


def test_a_shard_the_index_misdescribes_and_a_name_in_two_files_are_refused(registry, tmp_path):
    src = write_model(tmp_path / "m", [several(4), {"other": np.zeros(3, np.float32)}])
    index = json.loads((src / "model.safetensors.index.json").read_text())
    index["weight_map"]["ghost"] = "model-00002-of-00002.safetensors"
    (src / "model.safetensors.index.json").write_text(json.dumps(index))
    ref = ocibridge.push(str(src), f"{registry.host}/{new_repo()}:v1").reference
    with pytest.raises(OcibridgeError, match=r"model-00002-of-00002.safetensors: the shard index names tensor\(s\) "
                                             r"'ghost' in this file, which does not hold them"):
        ocibridge.load_tensors(ref)
    save_file({"scale": np.zeros(1, np.float32)}, str(src / "model-00002-of-00002.safetensors"))
    (src / "model.safetensors.index.json").unlink()
    ref = ocibridge.push(str(src), f"{registry.host}/{new_repo()}:v1").reference
    with pytest.raises(OcibridgeError, match="tensor 'scale' is in both model-00001-of-00002.safetensors and "
                                             "model-00002-of-00002.safetensors: choose the files with files="):
        ocibridge.load_tensors(ref)


def test_a_tampered_chunk_names_the_file_and_the_tensor_and_returns_nothing(models, fault_proxy):
    _, pulled, repo = models["table"]
    layer = layer_of(f"{fault_proxy.host}/{repo}:v1", "model.safetensors")
    at = offset_of(pulled / "model.safetensors", "lm_head.weight") + 100_000  # inside it, past its first chunk
    fault_proxy.clear()
    fault_proxy.add("GET", f"/blobs/{layer.digest}", corrupt_at(at), times=None)
    returned = None
    with pytest.raises(ocibridge.TensorMismatch) as caught:
        returned = ocibridge.load_tensors(f"{fault_proxy.host}/{repo}:v1", transfer=SMALL_PARTS)
    assert returned is None
    error = caught.value
    assert error.file == "model.safetensors" and error.tensors == ("lm_head.weight",)
    assert f"model.safetensors: chunk {at // CHUNK} (bytes {at // CHUNK * CHUNK}-" in str(error)
    assert "does not match its digest in the chunk table; it holds tensor(s) 'lm_head.weight'" in str(error)
    assert isinstance(error, ocibridge.OcibridgeError)
    # iterated: the tensors verified before it came out, the tampered one never
    seen = []
    with pytest.raises(ocibridge.TensorMismatch, match="lm_head.weight"), \
            ocibridge.iter_tensors(f"{fault_proxy.host}/{repo}:v1", transfer=SMALL_PARTS) as stream:
        for name, _ in stream:
            seen.append(name)
    assert "lm_head.weight" not in seen


def test_without_a_table_a_wrong_byte_fails_the_file_and_says_why_no_tensor_is_named(models, fault_proxy):
    _, pulled, repo = models["plain"]
    layer = layer_of(f"{fault_proxy.host}/{repo}:v1", "model.safetensors")
    fault_proxy.clear()
    fault_proxy.add("GET", f"/blobs/{layer.digest}",
                    corrupt_at(offset_of(pulled / "model.safetensors", "positions") + 3), times=None)
    with pytest.raises(ocibridge.TensorMismatch, match="do not match its layer digest .* no one tensor can be named") \
            as caught:
        ocibridge.load_tensors(f"{fault_proxy.host}/{repo}:v1", transfer=SMALL_PARTS)
    assert caught.value.file == "model.safetensors" and "positions" in caught.value.tensors
    seen = []
    with pytest.raises(ocibridge.TensorMismatch):
        for name, _ in ocibridge.iter_tensors(f"{fault_proxy.host}/{repo}:v1", transfer=SMALL_PARTS):
            seen.append(name)
    assert seen == []  # checked whole: no tensor before its last byte matched


def test_a_policy_refusing_the_model_fetches_nothing_past_the_manifest(models, fault_proxy, tmp_path):
    _, _, repo = models["table"]
    ref = f"{fault_proxy.host}/{repo}:v1"
    key, pub = key_pair(tmp_path)
    signed_only = tmp_path / "policy.json"
    signed_only.write_text(json.dumps({"default": [{"type": "sigstoreSigned", "keyPath": str(pub),
                                                    "signedIdentity": {"type": "matchRepository"}}]}))
    fault_proxy.clear()
    with pytest.raises(SignatureError, match="refused"):
        ocibridge.load_tensors(ref, verify=ocibridge.verification(policy=signed_only))
    assert fault_proxy.requests_matching(None, "/manifests/")  # it did look at the model
    assert fault_proxy.requests_matching(None, "/blobs/") == []  # and read none of its blobs
    rejecting = tmp_path / "reject.json"
    rejecting.write_text(json.dumps({"default": [{"type": "reject"}]}))
    fault_proxy.clear()
    with pytest.raises(SignatureError, match="refused"):
        ocibridge.load_tensors(ref, verify=ocibridge.verification(policy=rejecting))
    assert fault_proxy.requests == []
    # signed by the key: loaded, the table trusted under the signature
    assert main(["sign", ref, "--key", str(key)]) == 0
    got = ocibridge.load_tensors(ref, verify=ocibridge.verification(keys=[pub], policy=signed_only), warn=None)
    assert sorted(got) == sorted(several(1))


@pytest.fixture(scope="module")
def many(registry, tmp_path_factory):
    """A model of 40 tensors of 32-256 KiB (~6 MiB) with a table: (reference, its tensors)."""
    rng = np.random.default_rng(5)
    tensors = {f"t{i:02d}": rng.standard_normal(8192 * (1 + i % 8), dtype=np.float32) for i in range(40)}
    src = write_model(tmp_path_factory.mktemp("many") / "m", [tensors])
    return ocibridge.push(str(src), f"{registry.host}/{new_repo()}:v1", options=TABLE).reference, tensors


def test_iter_tensors_holds_a_bounded_working_set(many):
    """Each tensor as it completes, while the tensors allocated and not yet handed over stay
    under max_bytes plus one tensor; measured too, as the memory the process holds
    (tracemalloc: numpy's buffers included), with the one tensor the caller has in hand."""
    ref, want = many
    largest = max(a.nbytes for a in want.values())
    total = sum(a.nbytes for a in want.values())
    bound = 1024 * 1024
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        seen = {}
        with ocibridge.iter_tensors(ref, max_bytes=bound, transfer=SMALL_PARTS) as stream:
            for name, array in stream:
                assert stream.held <= bound + largest
                seen[name] = (array.dtype, array.shape, hashlib.sha256(array).digest())
                del array
            peak = tracemalloc.get_traced_memory()[1] - base
            assert 0 < stream.peak_held <= bound + largest and stream.held == 0
    finally:
        tracemalloc.stop()
    assert seen == {n: (a.dtype, a.shape, hashlib.sha256(a).digest()) for n, a in want.items()}
    assert peak < bound + 2 * largest + 1024 * 1024 < total / 2, (peak, total)


def test_load_tensors_holds_the_tensors_and_little_more(models):
    ref, pulled, _ = models["shards"]
    total = sum(a.nbytes for a in expected(pulled).values())
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        got = ocibridge.load_tensors(ref, transfer=SMALL_PARTS)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert sum(a.nbytes for a in got.values()) == total
    assert peak < total + 1024 * 1024, (peak, total)


#: what a whole-model load has no use for, each loaded before the first byte otherwise (issue 91: 22
#: modules): the copy of push and pull (its sample index, progress), the lazy reader of
#: open_model's files with its cache code (the load reads its ranges itself), and the stored scan
#: reports (read only under a policy that asks for a clean scan)
LOAD_UNUSED = ("ocibridge.transfer.copy", "ocibridge.transfer.askfirst", "ocibridge.transfer.sampleindex",
               "ocibridge.lazyread.blobreader", "ocibridge.lazyread.keeper", "ocibridge.lazyread.layerfill",
               "ocibridge.chunks.delta", "ocibridge.stores.partial", "ocibridge.scanning.stored",
               "ocibridge.scanning.report")
LOAD_PROBE = """
import sys, ocibridge
tensors = ocibridge.load_tensors(sys.argv[1])
print(len(tensors), ",".join(sorted(m for m in {unused!r} if m in sys.modules)))
"""


def test_a_whole_model_load_imports_no_copy_and_no_lazy_reader(models):
    """Every module imported before the first byte is start-up time on the wire: a fresh
    process loading a model imports neither the copy nor the lazy reader's cache code."""
    ref, pulled, _ = models["table"]
    done = subprocess.run([sys.executable, "-c", LOAD_PROBE.format(unused=LOAD_UNUSED), ref],
                          cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    count, _, loaded = done.stdout.strip().partition(" ")
    assert int(count) == len(expected(pulled))  # it did load
    assert loaded == "", loaded


#: iter_tensors in a fresh process: whether numpy was imported once the stream was opened (its
#: headers asked for) and once its first tensor came, and what that tensor is
NUMPY_LATE_PROBE = """
import sys, ocibridge
stream = ocibridge.iter_tensors(sys.argv[1])
opened = "numpy" in sys.modules
name, tensor = next(stream)
first = "numpy" in sys.modules
rest = dict(stream)
print(opened, first, type(tensor).__module__, tensor.flags.writeable, len(rest) + 1)
"""


def test_numpy_is_imported_at_the_first_tensor_not_before_the_first_request(models):
    """numpy's import is start-up time on the wire when it comes before the first request (issue
    91): the tensors' memory needs no numpy, which is imported when the first tensor is handed over."""
    ref, pulled, _ = models["table"]
    done = subprocess.run([sys.executable, "-c", NUMPY_LATE_PROBE, ref],
                          cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True", "numpy", "True", str(len(expected(pulled)))]


def test_a_framework_that_is_missing_is_named_before_any_request(models, fault_proxy, monkeypatch):
    _, _, repo = models["table"]
    ref = f"{fault_proxy.host}/{repo}:v1"
    fault_proxy.clear()
    monkeypatch.setitem(sys.modules, "torch", None)  # (as if not installed)
    with pytest.raises(OcibridgeError, match=r"framework='torch' needs PyTorch, which is not installed: pip install"):
        ocibridge.load_tensors(ref, framework="torch")
    monkeypatch.setitem(sys.modules, "numpy", None)
    with pytest.raises(OcibridgeError, match=r"needs numpy for numpy arrays: pip install 'ocibridge\[tensors\]'"):
        ocibridge.load_tensors(ref)
    with pytest.raises(OcibridgeError, match="'numpy' or 'torch'"):
        ocibridge.load_tensors(ref, framework="jax")
    assert fault_proxy.requests == []


def test_a_dtype_numpy_lacks_is_refused_after_the_header_alone(registry, fault_proxy, tmp_path):
    src = tmp_path / "bf16"
    src.mkdir()
    header = json.dumps({"w": {"dtype": "BF16", "shape": [4096, 256], "data_offsets": [0, 2 * 4096 * 256]}}).encode()
    header += b" " * (-len(header) % 8)
    (src / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + bytes(2 * 4096 * 256))
    repo = new_repo()
    ocibridge.push(str(src), f"{registry.host}/{repo}:v1", options=TABLE)
    layer = layer_of(f"{registry.host}/{repo}:v1", "model.safetensors")
    with pytest.raises(OcibridgeError, match=r"model.safetensors: tensor 'w' is BF16, which numpy has no type for "
                                             r"\(framework='torch' has\)"):
        ocibridge.load_tensors(f"{fault_proxy.host}/{repo}:v1")
    assert [r.range for r in blob_gets(fault_proxy, layer.digest)] == [f"bytes=0-{CHUNK - 1}"]  # the header's chunk


def test_the_bytes_of_a_range_land_in_its_tensors_past_tensors_of_no_bytes():
    """Where a range lands (no registry: the map alone): a tensor of no bytes at the start of
    another, or inside it (the format allows its offsets anywhere), hides no tensor's bytes."""
    from ocibridge.lazyread.placement import Landing, Slot
    from ocibridge.lazyread.safetensors import TensorInfo

    def slot(name: str, start: int, end: int) -> Slot:
        made = Slot("f", TensorInfo(name, "U8", (end - start,), start, end))
        made.buffer = bytearray(end - start)
        made.view = memoryview(made.buffer)
        return made

    landing = Landing([slot("inside", 150, 150), slot("a", 100, 200), slot("at-a", 100, 100), slot("b", 210, 300)])
    assert [s.info.name for s in landing.overlapping(160, 170)] == ["a"]
    assert [s.info.name for s in landing.overlapping(100, 101)] == ["a"]
    assert [s.info.name for s in landing.overlapping(0, 1000)] == ["a", "b"]
    assert landing.overlapping(200, 210) == []
    views = landing.views(90, 250)  # 10 bytes of header, a's last 100, 10 of padding, b's first 40
    assert [len(v) for v in views] == [10, 100, 10, 40]
    data = bytes(range(160))
    at = 0
    for view in views:
        view[:] = data[at:at + len(view)]
        at += len(view)
    by_name = {s.info.name: s for s in landing.slots}
    assert bytes(by_name["a"].buffer) == data[10:110] and bytes(by_name["b"].buffer)[:40] == data[120:160]


def test_the_memory_tensors_land_in_is_private_and_asks_for_huge_pages():
    """A shared anonymous mapping is shmem: no transparent huge pages, many more page faults, and
    ~0.2 s more per GiB to free at exit (issue 91); numpy's tensors land in private mappings,
    madvised for huge pages as numpy's own memory is."""
    import ctypes

    from ocibridge.lazyread.frameworks import HUGE_PAGES_FROM, anonymous_memory

    buffer, view = anonymous_memory(HUGE_PAGES_FROM)
    view[:] = b"\x01" * len(view)
    at = ctypes.addressof(ctypes.c_char.from_buffer(buffer))
    mapping, flags = None, ""
    for line in Path("/proc/self/smaps").read_text().splitlines():
        first, _, rest = line.partition(" ")
        if "-" in first and all(c in "0123456789abcdef-" for c in first):
            low, high = (int(x, 16) for x in first.split("-"))
            mapping = rest.split()[0] if low <= at < high else None
        elif mapping is not None and first == "VmFlags:":
            flags = rest
            break
    assert mapping == "rw-p", mapping
    huge = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    if huge.exists() and "[never]" not in huge.read_text():
        assert "hg" in flags.split(), flags
    del view
