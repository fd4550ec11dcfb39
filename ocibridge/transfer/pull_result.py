"""``PullResult``, what ``pull`` returns, in a module of its own: a pull imports it without the
other results (a dozen frozen dataclasses, ~5 ms to create: a tenth of a small pull's CPU).
:mod:`ocibridge.transfer.results` re-exports it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any


@dataclass(frozen=True)
class PullResult:
    """What ``pull`` wrote: a directory (``files``, ``bytes``), an archive, the Ollama store, or
    another store (``format == "store"``, ``copy`` holds the copy's counts)."""

    digest: str
    output: str
    format: str  # directory, carton, mlarchive, ollama
    files: tuple[str, ...] = ()
    bytes: int = 0
    kept: tuple[str, ...] = ()  # existing files left as they were (-k/--keep-old-files)
    skipped: tuple[str, ...] = ()  # left out by --include/--exclude
    copy: dict[str, Any] | None = None  # a pull into a store: the copy's summary
    via: str | None = None  # a ModelKit, Docker model...: the digest of the ModelPack form read
    signature: str | None = None  # --with-signatures: the OMS signature file written beside the files
    attestations: tuple[str, ...] | None = None  # --with-attestations: the files written (relative to output)
    attestations_left_out: int = 0  # unsigned evidence not written (keys given: nothing vouches for it)
    delta: tuple[dict[str, Any], ...] = ()  # layers built partly from chunks held here (cache/deltas.py)
    #: a directory: path -> the digest its bytes were checked against as they landed (every raw
    #: layer's file; tar entries' with ``--with-signatures``; none for a file kept as it was), so
    #: model.sig's check reads no file again that the pull proved (signing/omstravel.py)
    landed: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), repr=False, compare=False)

    def as_dict(self) -> dict[str, Any]:
        if self.copy is not None:
            return dict(self.copy)
        out: dict[str, Any] = {"digest": self.digest, "output": self.output, "format": self.format}
        if self.via is not None:
            out["modelpackDigest"] = self.via
        if self.format == "directory":
            out.update(files=list(self.files), bytes=self.bytes, kept=list(self.kept),
                       skipped=list(self.skipped))
            if self.signature is not None:
                out["signature"] = self.signature
            if self.attestations is not None:
                out["attestations"] = list(self.attestations)
                out["attestationsLeftOut"] = self.attestations_left_out
            if self.delta:
                out["delta"] = [dict(d) for d in self.delta]
        return out
