"""JSON from a model file, a registry or a client is read with its nesting bounded (issue 85):
a safetensors header nesting 100,000 arrays is one clear error from load_tensors and the diff
behind serve's compare page, never a bare RecursionError; a commit line as deep is refused
saying why; the scan that measures nesting ignores brackets inside strings."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

import ocibridge
from ocibridge.core import boundedjson
from ocibridge.core.boundedjson import MAX_JSON_DEPTH, JsonTooDeep, depth_of
from ocibridge.errors import OcibridgeError, TooLarge
from ocibridge.hubserver.repo.catalog import Catalog
from ocibridge.hubserver.repo.commits import BadCommit, CommitRequest, read_line
from ocibridge.hubserver.repo.sources import parse_sources
from ocibridge.hubserver.web.compare import ClientReads, Compare
from tests.support.fixtures import new_repo

DEEP = 100_000


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize(("text", "depth"), [
    ("{}", 1), ("1", 0), ('"[[[[{{"', 0), ('["\\"[", "]"]', 1), ('[1, [2, {"a": [3]}]]', 4),
    ("[]" * 50, 1), (nested(MAX_JSON_DEPTH), MAX_JSON_DEPTH), ('{"a": ' * 70 + "1" + "}" * 70, 70),
    ("[" * 9 + "}", 9),  # unbalanced: as deep as the parser would go before it stops
])
def test_depth_counts_brackets_outside_strings(text, depth):
    assert depth_of(text) == depth
    assert depth_of(text.encode()) == depth


def test_loads_refuses_past_the_limit_with_one_line():
    assert boundedjson.loads(nested(MAX_JSON_DEPTH)) == json.loads(nested(MAX_JSON_DEPTH))
    with pytest.raises(JsonTooDeep) as caught:
        boundedjson.loads(nested(DEEP).encode(), "model.safetensors header")
    assert str(caught.value) == f"model.safetensors header nested deeper than {MAX_JSON_DEPTH} levels, refused"
    assert isinstance(caught.value, TooLarge) and isinstance(caught.value, ValueError)


def deep_header_file(path: Path, where: str) -> None:
    """A safetensors file written by the safetensors library, its header then given a value
    nesting 100,000 arrays: as ``__metadata__`` or as a tensor's entry."""
    save_file({"w": np.arange(16, dtype=np.float32)}, str(path), metadata={"format": "np"})
    raw = path.read_bytes()
    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + length])
    body = raw[8 + length:]
    text = json.dumps(header)[:-1] + f', "{where}": {nested(DEEP)}}}'
    text += " " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text.encode() + body)


@pytest.fixture(scope="module")
def deep_models(registry, tmp_path_factory):
    """One repository: v1 a sane model, v2 the same with a 100,000-deep ``__metadata__``, v3 with
    a 100,000-deep tensor entry."""
    work = tmp_path_factory.mktemp("deep")
    repo = new_repo("deep")
    for tag, where in (("v1", None), ("v2", "__metadata__"), ("v3", "x")):
        folder = work / tag
        folder.mkdir()
        (folder / "config.json").write_text('{"model_type": "test"}')
        if where is None:
            save_file({"w": np.arange(16, dtype=np.float32)}, str(folder / "model.safetensors"))
        else:
            deep_header_file(folder / "model.safetensors", where)
        ocibridge.push(str(folder), f"{registry.host}/{repo}:{tag}")
    return repo


@pytest.mark.parametrize("tag", ["v2", "v3"])
def test_load_tensors_refuses_a_deep_header_with_one_clear_error(registry, deep_models, tag):
    with pytest.raises(OcibridgeError) as caught:
        ocibridge.load_tensors(f"{registry.host}/{deep_models}:{tag}")
    assert f"nested deeper than {MAX_JSON_DEPTH} levels" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_the_compare_page_shows_a_deep_header_as_unread_not_a_crash(registry, deep_models):
    """The diff serve's compare page makes: the file's tensors not compared, saying why, where a
    RecursionError was a 500."""
    org, name = deep_models.split("/")
    catalog = Catalog(parse_sources([f"{registry.host}/{org}"]))
    compare = Compare(catalog, lambda old, new, budget: ocibridge.diff(old, new, max_read=budget),
                      page_budget=16 << 20, clients=ClientReads(budget=64 << 20))
    try:
        for tag in ("v2", "v3"):
            shown = compare(name, "v1", tag, "192.0.2.9")
            assert shown.diff is not None
            [weights] = [f for f in shown.diff.files if f.path == "model.safetensors"]
            assert weights.tensors is None
            assert weights.unread == ("no tensor compared: model.safetensors: bad safetensors header: "
                                      f"JSON nested deeper than {MAX_JSON_DEPTH} levels, refused")
    finally:
        catalog.close()


def test_a_deep_commit_line_is_refused_saying_why():
    line = ('{"key": "file", "value": ' + nested(DEEP) + "}").encode()
    with pytest.raises(BadCommit) as caught:
        read_line(CommitRequest(), 2, line)
    assert str(caught.value) == f"commit payload line 2 nested deeper than {MAX_JSON_DEPTH} levels, refused"
