"""A toy source format, registered by tests/test_formats_door.py only: a JSON file
``{"toy": NAME, "files": {PATH: BASE64}}``. It exists to show that a format is one module plus
one registration line: nothing else in ocibridge knows about it."""

from __future__ import annotations

import base64
import json
import tempfile
from pathlib import Path
from typing import ClassVar

from ocibridge.core.fsutil import atomic_write_bytes
from ocibridge.errors import SourceError
from ocibridge.model.classify import classify
from ocibridge.model.extract import extract
from ocibridge.model.package import ModelFile, ModelPackage
from ocibridge.oci.models import Descriptor
from ocibridge.stores.base import Store
from ocibridge.transfer.results import PullResult

MAGIC = b'{"toy":'


class ToyFormat:
    name: ClassVar[str] = "toy"
    picks_files: ClassVar[bool] = False
    shows_progress: ClassVar[bool] = False

    def sniff(self, path: Path) -> bool:
        with path.open("rb") as f:
            return f.read(len(MAGIC)) == MAGIC

    def read(self, source: str, request: object) -> ModelPackage:
        try:
            doc = json.loads(Path(source).read_bytes())
            files = {path: base64.b64decode(text) for path, text in doc["files"].items()}
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise SourceError(f"{source}: not a toy model ({e})") from None
        return ModelPackage(
            files=[ModelFile.from_bytes(p, data, classify(p, len(data))) for p, data in sorted(files.items())],
            descriptor={"name": doc["toy"]},
            source_format=self.name,
        )

    def export(self, store: Store, desc: Descriptor, dest: str, request: object) -> PullResult:
        with tempfile.TemporaryDirectory() as tmp:
            result = extract(store, desc.digest, tmp)
            files = {p: base64.b64encode((Path(tmp) / p).read_bytes()).decode() for p in result.files}
        doc = {"toy": "exported", "files": dict(sorted(files.items()))}
        atomic_write_bytes(Path(dest), json.dumps(doc).encode())
        return PullResult(desc.digest, dest, self.name)
