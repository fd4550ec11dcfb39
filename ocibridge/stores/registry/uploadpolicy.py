"""What a registry takes for blob uploads, learnt from its refusals and remembered per host.

Registries differ: Google Artifact Registry refuses chunked (PATCH) uploads, Cloudflare in
front of a registry refuses request bodies over ~100 MB, Quay a single PUT over 20 GB (see
docs/registry.md). An upload starts with what the settings file (hostsettings.py) says about the host;
a refusal that names the form (405/501 on PATCH, 413 on a body) switches the upload to the
other form, or to chunks half the refused size, and what then works is written to the settings
file so the next push starts with it. Every choice is logged on ``ocibridge.http`` (``--debug``).
"""

from __future__ import annotations

import logging
import threading

from ocibridge.core.terminal import human_size
from ocibridge.errors import OcibridgeError, RegistryError
from ocibridge.stores.registry import errcodes, hostsettings

#: Chunks are not halved below this: a cap smaller than that is no cap a push can live with.
MIN_BODY = 256 * 1024
#: Error codes that refuse the content, not the form of the upload (never adapted to).
CONTENT_CODES = errcodes.CONTENT_CODES

log = logging.getLogger("ocibridge.http")


class UploadPolicy:
    """One host's upload form: chunked allowed or not, and the largest body known to pass."""

    def __init__(self, host: str, upload: str | None = None, max_body: int | None = None,
                 range_end: str | None = None):
        self.host = host
        self.upload = upload
        self.max_body = max_body
        self._lock = threading.Lock()
        self._unconfirmed: int | None = None  # a size picked after a 413, not yet seen passing
        #: upload answers say ``Range: 0-N`` for N bytes held (distribution: ``0-(N-1)``)
        self.range_exclusive = range_end == "exclusive"
        #: the style was seen in an answer of this run (not only read from the settings file)
        self.range_seen = False

    @classmethod
    def load(cls, host: str) -> UploadPolicy:
        saved = hostsettings.host_settings(host)
        policy = cls(host, saved.upload, saved.max_body, saved.range_end)
        if saved.upload or saved.max_body or saved.range_end:
            log.info("%s: upload settings from %s: %s%s%s", host, hostsettings.settings_path(),
                     saved.upload or "any form",
                     f", bodies up to {saved.max_body} bytes" if saved.max_body else "",
                     f", Range answers end-{saved.range_end}" if saved.range_end else "")
        return policy

    @property
    def chunked_allowed(self) -> bool:
        return self.upload != "monolithic"

    def no_chunks(self) -> None:
        """The registry refused a PATCH as a method: uploads go as one PUT from now on."""
        with self._lock:
            if self.upload == "monolithic":
                return
            self.upload = "monolithic"
        log.info("%s: the registry refuses chunked (PATCH) uploads: one PUT per blob from now on", self.host)
        self._remember(upload="monolithic")

    def exclusive_range_end(self) -> None:
        """An answer's Range ended one past the bytes sent: this registry's style, remembered
        so that a later process resuming a session reads the first status answer right."""
        with self._lock:
            self.range_seen = True
            if self.range_exclusive:
                return
            self.range_exclusive = True
        log.info("%s: upload answers give Range 0-N for N bytes held: read so from now on", self.host)
        self._remember(range_end="exclusive")

    def inclusive_range_end(self) -> None:
        """A remembered end-exclusive style read one byte short in an answer of this run: the
        registry (or what fronts it) changed; distribution's style from now on."""
        with self._lock:
            if not self.range_exclusive or self.range_seen:
                return
            self.range_exclusive = False
            self.range_seen = True
        log.info("%s: upload answers give Range 0-(N-1) for N bytes held (not as remembered)", self.host)
        self._remember(range_end="inclusive")

    def range_confirmed(self) -> None:
        """An answer matched the style in use: later mismatches are interruptions."""
        self.range_seen = True

    def body_refused(self, size: int) -> int:
        """A body of ``size`` bytes was refused as too large (413): the chunk size to try
        next, half of it (or the known limit, when smaller)."""
        with self._lock:
            new = size // 2
            if new < MIN_BODY:
                raise RegistryError(
                    f"registry {self.host} refuses request bodies of {human_size(size)} and more "
                    f"(HTTP 413) and smaller chunks than {human_size(MIN_BODY)} are not tried")
            self.max_body = self._unconfirmed = new
        log.info("%s: a body of %d bytes was refused as too large: chunks of %d bytes", self.host, size, new)
        return new

    def body_passed(self, size: int) -> None:
        """A body of ``size`` bytes went through: a limit picked after a refusal is kept."""
        with self._lock:
            picked = self._unconfirmed
            if picked is None or size < min(picked, MIN_BODY):
                return
            self._unconfirmed = None
        self._remember(max_body=picked)

    def fits_one_request(self, size: int) -> bool:
        return self.max_body is None or size <= self.max_body

    def cannot_fit(self, size: int, what: str) -> RegistryError:
        """The one-line error for a blob no upload form can bring to this registry."""
        return RegistryError(
            f"registry {self.host} takes no chunked uploads and refuses request bodies over "
            f"{human_size(self.max_body or 0)}: {what} ({human_size(size)}) cannot be pushed there")

    def _remember(self, **learnt: object) -> None:
        try:
            path = hostsettings.remember_upload(self.host, **learnt)  # type: ignore[arg-type]
        except (OSError, OcibridgeError) as e:  # a read-only home still pushes
            log.info("%s: could not remember the upload settings: %s", self.host, e)
            return
        log.info("%s: remembered %s in %s", self.host,
                 ", ".join(f"{k} = {v}" for k, v in learnt.items()), path)
