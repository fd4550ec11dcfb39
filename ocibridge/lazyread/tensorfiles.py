"""Which tensor files of a model a whole load reads.

``files=`` globs choose them (safetensors or GGUF files). Without, a model with no safetensors
file loads its ``*.gguf`` files; otherwise a folder with a shard index (``*.safetensors.index.json``,
as transformers writes it) contributes the files its ``weight_map`` names, and no other (a
repository may also hold a consolidated copy of the same weights, as Mistral's do); a folder
without one, every ``*.safetensors`` file in it. The index also says which tensors each shard
holds: the load checks each shard against it.
"""

from __future__ import annotations

import fnmatch
import posixpath
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ocibridge.core import boundedjson
from ocibridge.errors import NotFound, OcibridgeError
from ocibridge.lazyread.formats import SUFFIXES

INDEX_SUFFIX = ".safetensors.index.json"


@dataclass(frozen=True)
class Chosen:
    """A file to load, and the tensors an index says it holds (None: no index named it)."""

    path: str
    expected: frozenset[str] | None = None


def choose(paths: Iterable[str], patterns: tuple[str, ...] | None,
           read_index: Callable[[str], bytes]) -> list[Chosen]:
    """The tensor files among ``paths`` to load, in path order."""
    every = sorted(paths)
    tensors = [p for p in every if p.endswith(".safetensors")]
    if patterns is not None:
        either = [p for p in every if p.endswith(SUFFIXES)]
        chosen = [Chosen(p) for p in either if any(fnmatch.fnmatchcase(p, g) for g in patterns)]
        if not chosen:
            raise NotFound(f"no safetensors file matches {', '.join(patterns)}, nor any GGUF file (the model "
                           f"has: {', '.join(either) or 'none'})")
        return chosen
    if not tensors:
        return [Chosen(p) for p in every if p.endswith(".gguf")] or _none()
    indexed: dict[str, set[str]] = {}
    folders_with_index = set()
    for index in (p for p in every if p.endswith(INDEX_SUFFIX)):
        folder = posixpath.dirname(index)
        folders_with_index.add(folder)
        for name, shard in _weight_map(index, read_index(index)).items():
            path = posixpath.normpath(posixpath.join(folder, shard))
            if path not in tensors:
                raise NotFound(f"{index} names {shard!r}, which is not a file of the model")
            indexed.setdefault(path, set()).add(name)
    chosen = [Chosen(p, frozenset(indexed[p])) for p in tensors if p in indexed]
    chosen += [Chosen(p) for p in tensors if posixpath.dirname(p) not in folders_with_index]
    return sorted(chosen, key=lambda c: c.path) or _none()


def _none() -> list[Chosen]:
    raise NotFound("the model has no safetensors or GGUF file")


def _weight_map(index: str, data: bytes) -> dict[str, str]:
    try:
        doc = boundedjson.loads(data)
        weight_map = doc["weight_map"]
        if not isinstance(weight_map, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in weight_map.items()):
            raise ValueError("weight_map is not an object of names to files")
    except (ValueError, KeyError, TypeError) as e:
        raise OcibridgeError(f"{index}: not a shard index: {e}") from None
    return weight_map
