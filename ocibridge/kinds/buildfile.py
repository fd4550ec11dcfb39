"""Build files as push input (``push DIR -f FILE``): modctl's Modelfile and KitOps' Kitfile.

Each names the model's files by kind and sets metadata. Only the files a build file names are
packed, as its own tool does. The build file itself rides along as an annotation, as modctl
(``org.cncf.modctl.modelfile``) and kit (``ml.kitops.modelkit.kitfile``) keep it, so a
conversion to the other family keeps what only it can say. Field-by-field mapping:
docs/formats/modelfile.md and docs/formats/kitfile.md.
"""

from __future__ import annotations

import fnmatch
import json
import posixpath
import re
from pathlib import Path
from typing import Any

from ocibridge.core.limits import read_at_most
from ocibridge.errors import SourceError, TooLarge
from ocibridge.kinds.directory.source import read_directory
from ocibridge.model.package import ModelFile, ModelPackage
from ocibridge.oci.mediatypes import Kind

#: Names read as the build file when found at the top of a pushed directory, as ``kit pack .``
#: and ``modctl build .`` do (``--no-build-file`` packs them as plain files instead).
DEFAULT_NAMES = ("Kitfile", "Modelfile")
MODELFILE_ANNOTATION = "org.cncf.modctl.modelfile"
KITFILE_ANNOTATION = "ml.kitops.modelkit.kitfile"
MAX_BUILD_FILE = 1 << 20

#: Modelfile metadata commands → (section, ModelPack field)
MODELFILE_FIELDS = {
    "name": ("descriptor", "name"), "arch": ("config", "architecture"), "family": ("descriptor", "family"),
    "format": ("config", "format"), "paramsize": ("config", "paramSize"), "precision": ("config", "precision"),
    "quantization": ("config", "quantization"),
}
#: Modelfile file commands → kind
MODELFILE_KINDS = {"model": Kind.WEIGHT, "config": Kind.WEIGHT_CONFIG, "code": Kind.CODE,
                   "dataset": Kind.DATASET, "doc": Kind.DOC}
_WEIGHT_FILE = re.compile(r"\.(gguf|safetensors|bin|pt|pth|onnx|h5|ckpt|dduf|tflite|npz)$", re.I)


def read_build_file(file: str, context: str, *, excludes: tuple[str, ...] = (),
                    name: str | None = None) -> ModelPackage:
    """A Kitfile (YAML with ``manifestVersion``) or a Modelfile, over the directory ``context``."""
    path = Path(file)
    try:
        data = read_at_most(path, MAX_BUILD_FILE)  # a cap, not stat: /dev/zero or a FIFO states size 0
        if len(data) > MAX_BUILD_FILE:
            raise TooLarge(f"{file}: larger than {MAX_BUILD_FILE} bytes, too large for a build file")
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise SourceError(f"{file}: cannot read the build file ({getattr(e, 'strerror', None) or e})") from None
    if re.search(r"^manifestVersion\s*:", text, re.M):
        return read_kitfile(text, file, context, excludes=excludes, name=name)
    return read_modelfile(text, file, context, excludes=excludes, name=name)


def default_build_file(directory: str) -> str | None:
    """The ``Kitfile`` or ``Modelfile`` at the top of ``directory``, if exactly one is there."""
    root = Path(directory)
    if not root.is_dir():
        return None
    found = [name for name in DEFAULT_NAMES if (root / name).is_file()]
    if len(found) > 1:
        raise SourceError(f"{directory}: both a Kitfile and a Modelfile; name one with -f FILE, "
                          "or --no-build-file to pack both as plain files")
    return str(root / found[0]) if found else None


def read_default_build_file(file: str, context: str, *, excludes: tuple[str, ...] = (),
                            name: str | None = None) -> ModelPackage:
    """``read_build_file`` for a build file found by name: an error says how to pack it as a file."""
    try:
        return read_build_file(file, context, excludes=excludes, name=name)
    except SourceError as e:
        raise SourceError(f"{e} (a {Path(file).name} at the top of the directory is read as its build "
                          "file; --no-build-file packs it as a plain file)") from None


def _all_files(context: str, excludes: tuple[str, ...], name: str | None) -> ModelPackage:
    return read_directory(context, excludes=excludes, name=name)


def _matches(path: str, pattern: str) -> bool:
    return fnmatch.fnmatchcase(path, pattern) or fnmatch.fnmatchcase(posixpath.basename(path), pattern)


def read_modelfile(text: str, where: str, context: str, *, excludes: tuple[str, ...] = (),
                   name: str | None = None) -> ModelPackage:
    """modctl's Modelfile: ``COMMAND value`` lines (case-insensitive commands, ``#`` comments)."""
    descriptor: dict[str, Any] = {}
    config: dict[str, Any] = {}
    rules: list[tuple[int, Kind, str]] = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        command, _, value = line.partition(" ")
        command, value = command.lower(), value.strip()
        if not value:
            raise SourceError(f"{where}:{number}: {command.upper()} needs a value")
        if command in MODELFILE_FIELDS:
            section, key = MODELFILE_FIELDS[command]
            (descriptor if section == "descriptor" else config)[key] = value
        elif command in MODELFILE_KINDS:
            rules.append((number, MODELFILE_KINDS[command], value))
        else:
            raise SourceError(f"{where}:{number}: unknown Modelfile command {command.upper()!r} "
                              f"(known: {', '.join(c.upper() for c in [*MODELFILE_FIELDS, *MODELFILE_KINDS])})")
    if not rules:
        raise SourceError(f"{where}: the Modelfile names no files (MODEL, CONFIG, CODE, DATASET, DOC)")
    package = _all_files(context, excludes, name)
    chosen: list[ModelFile] = []
    used = {number: False for number, _, _ in rules}
    for f in package.files:
        for number, kind, pattern in rules:
            if _matches(f.path, pattern):
                f.kind = kind
                used[number] = True
                chosen.append(f)
                break
    for number, _, pattern in rules:
        if not used[number]:
            raise SourceError(f"{where}:{number}: {pattern!r} matches no file in {context}")
    package.files = chosen
    package.descriptor.update(descriptor)
    package.config.update(config)
    package.annotations[MODELFILE_ANNOTATION] = text
    return package


#: A Kitfile nests a few levels (package, model.parts[], parameters): deeper is refused, as is
#: any YAML alias, so what is read can never grow beyond the (capped) text itself.
MAX_YAML_DEPTH = 64


def load_plain_yaml(yaml: Any, text: str, where: str) -> Any:
    """``text`` as YAML without aliases (``*name``, the billion laughs: 637 bytes that expand to
    gigabytes once re-serialised) and nested at most MAX_YAML_DEPTH deep."""

    class Loader(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML is optional and untyped here
        depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                mark = self.peek_event().start_mark
                raise SourceError(f"{where}:{mark.line + 1}: YAML aliases are not accepted in a Kitfile")
            self.depth += 1
            if self.depth > MAX_YAML_DEPTH:
                raise TooLarge(f"{where}: nested more than {MAX_YAML_DEPTH} deep")
            try:
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    loader = Loader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def read_kitfile(text: str, where: str, context: str, *, excludes: tuple[str, ...] = (),
                 name: str | None = None) -> ModelPackage:
    """KitOps' Kitfile: package metadata and the model, its parts, code, datasets, docs, prompts."""
    import yaml  # a declared dependency: `push -f Kitfile` works after a plain install

    try:
        doc = load_plain_yaml(yaml, text, where)
    except yaml.YAMLError as e:
        raise SourceError(f"{where}: not valid YAML: {str(e).splitlines()[0]}") from None
    if not isinstance(doc, dict):
        raise SourceError(f"{where}: a Kitfile is a YAML mapping")
    package = _all_files(context, excludes, name)
    by_path = {f.path: f for f in package.files}
    chosen: dict[str, ModelFile] = {}

    def take(element: Any, kind: Kind, what: str) -> None:
        if not isinstance(element, dict) or not isinstance(element.get("path"), str):
            raise SourceError(f"{where}: {what} needs a path")
        prefix = posixpath.normpath(element["path"].strip("/"))
        found = [f for p, f in by_path.items() if prefix == "." or p == prefix or p.startswith(prefix + "/")]
        if not found:
            raise SourceError(f"{where}: {what} path {element['path']!r} matches no file in {context}")
        for f in found:
            if f.path not in chosen:
                f.kind = Kind.WEIGHT if kind is Kind.WEIGHT_CONFIG and _WEIGHT_FILE.search(f.path) else kind
                chosen[f.path] = f

    def listed(section: dict[str, Any], key: str) -> list[Any]:
        value = section.get(key) or []
        if not isinstance(value, list):
            raise SourceError(f"{where}: {key} must be a list")
        return value

    model = doc.get("model")
    if isinstance(model, dict):
        if model.get("path"):
            take(model, Kind.WEIGHT, "model")
        for part in listed(model, "parts"):
            take(part, Kind.WEIGHT_CONFIG, "model part")
    for section, kind in (("code", Kind.CODE), ("datasets", Kind.DATASET), ("docs", Kind.DOC),
                          ("prompts", Kind.WEIGHT_CONFIG)):
        for element in listed(doc, section):
            take(element, kind, section)
    if not chosen:
        raise SourceError(f"{where}: the Kitfile names no files")
    package.files = [chosen[p] for p in sorted(chosen, key=str.encode)]
    meta: dict[str, Any] = doc["package"] if isinstance(doc.get("package"), dict) else {}
    for key in ("name", "version", "description"):
        if isinstance(meta.get(key), str) and meta[key]:
            package.descriptor[key] = meta[key]
    if name:
        package.descriptor["name"] = name
    if isinstance(meta.get("authors"), list) and meta["authors"]:
        package.descriptor["authors"] = [str(a) for a in meta["authors"]]
    parts = listed(model, "parts") if isinstance(model, dict) else []
    licenses = sorted({e["license"] for e in [meta, model or {}, *parts, *listed(doc, "datasets"),
                                              *listed(doc, "code")]
                       if isinstance(e, dict) and isinstance(e.get("license"), str) and e["license"]})
    if licenses:
        package.descriptor["licenses"] = licenses
    if isinstance(model, dict) and isinstance(model.get("format"), str):
        package.config["format"] = model["format"]
    try:
        package.annotations[KITFILE_ANNOTATION] = json.dumps(doc, separators=(",", ":"), sort_keys=False,
                                                             default=str)
    except (TypeError, ValueError) as e:  # a key JSON cannot carry (a date, a float nan as key...)
        raise SourceError(f"{where}: cannot be kept as JSON: {e}") from None
    return package
