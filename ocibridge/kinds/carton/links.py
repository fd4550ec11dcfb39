"""Files a carton lists in ``LINKS`` instead of holding: fetched lazily, verified, cached by hash.

Nothing is downloaded to plan a build: a file's size comes from the cache, from a ``HEAD``
(with ``Accept-Encoding: identity``) or, where ``HEAD`` is refused (S3-style URLs signed for
``GET`` only), from a one-byte ranged ``GET`` whose body is not read. Only when no URL tells
the size, or the URLs disagree, is the file fetched up front. The content itself is fetched
when a layer is actually copied, so a destination that already holds the blob (a raw layer's
digest *is* the MANIFEST sha256) costs no download.
Each URL is tried in order; a download is written under a temporary name in the cache,
hashed while it streams, and renamed to ``<sha256>`` only when it matches.

Requests go through the registry client's stack (``RegistryClient``, anonymous): the same trust
(certs.d, ``--ca-file``, ``--insecure``), proxies, settings file, retries of a 5xx or a dropped
connection, redirects and ``--limit-rate`` as a pull, and each client is closed when its request
is done (a LINKS file is fetched once, so there is no pool worth keeping).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from ocibridge.core.environment import LINKS_MAX_BYTES as ENV_MAX_SIZE
from ocibridge.core.environment import cache_root
from ocibridge.core.fsutil import TEMP_PREFIX, write_sliced
from ocibridge.core.httpencodings import ACCEPT_ENCODING, DECODE_ERRORS, decoding_reader
from ocibridge.core.httpheaders import header_int
from ocibridge.core.streams import IterReader
from ocibridge.errors import RegistryError
from ocibridge.kinds.carton.errors import CartonLinkError
from ocibridge.oci.digest import CHUNK

if TYPE_CHECKING:  # httpx costs ~0.1-0.2 s to import: only cartons with LINKS pay it
    import httpx

    from ocibridge.stores.registry.client import RegistryClient
    from ocibridge.stores.registry.options import RegistryOptions

DEFAULT_MAX_SIZE = 64 << 30  # a LINKS file of unknown size: 64 GiB unless $OCIBRIDGE_LINKS_MAX_BYTES says more
DISK_RESERVE = 256 << 20  # a download never fills the disk: this much stays free


def max_download_size() -> int:
    """The cap on a LINKS download whose size no server told, raised with $OCIBRIDGE_LINKS_MAX_BYTES."""
    return header_int(os.environ.get(ENV_MAX_SIZE)) or DEFAULT_MAX_SIZE


def default_cache_dir() -> Path:
    return cache_root() / "carton-links"


class _Failed(Exception):
    pass


#: A ranged GET asking for one byte, unencoded, so Content-Range (or Content-Length) is the size.
_PROBE = {"Accept-Encoding": "identity", "Range": "bytes=0-0"}


def _identity_length(resp: httpx.Response) -> int | None:
    """Content-Length of a full, unencoded answer (200), which is the file's size."""
    encoding = resp.headers.get("content-encoding", "identity").lower()
    length = header_int(resp.headers.get("content-length"))
    if resp.status_code == 200 and encoding == "identity":
        return length
    return None


def _range_total(resp: httpx.Response) -> int | None:
    """The total of ``Content-Range: bytes 0-0/<total>`` in a 206 answer."""
    unit, _, rest = resp.headers.get("content-range", "").partition(" ")
    total = rest.rpartition("/")[2]
    encoding = resp.headers.get("content-encoding", "identity").lower()
    if resp.status_code == 206 and unit == "bytes" and encoding == "identity":
        return header_int(total)
    return None


class LinkFetcher:
    """Downloads LINKS files into a cache directory keyed by sha256; counts what it fetched."""

    def __init__(
        self,
        cache_dir: str | os.PathLike[str] | None = None,
        *,
        options: RegistryOptions | None = None,
        max_size: int | None = None,
    ):
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.options = options  # as a pull's: trust, proxies, retries, rate limit
        self.max_size = max_download_size() if max_size is None else max_size
        self.downloads = 0  # completed, verified downloads (tests assert on it)

    @contextlib.contextmanager
    def _client(self, url: str) -> Iterator[RegistryClient]:
        """A client for ``url``'s host, closed when the block ends."""
        import httpx

        from ocibridge.stores.registry.client import RegistryClient

        client = RegistryClient(httpx.URL(url).netloc.decode("ascii"), self.options)
        try:
            yield client
        finally:
            client.close()

    @contextlib.contextmanager
    def _get(self, url: str, headers: dict[str, str]) -> Iterator[httpx.Response]:
        """A streamed GET of ``url`` (retried as the registry client retries), closed after."""
        with self._client(url) as client:
            resp = client.send("GET", url, headers=headers, stream=True)
            try:
                yield resp
            finally:
                resp.close()

    def cached(self, sha256: str) -> Path | None:
        path = self.cache_dir / sha256
        return path if path.is_file() else None

    def size_of(self, sha256: str, urls: list[str]) -> int | None:
        """The file's size without downloading it: from the cache, or the length every URL that
        tells one agrees on. URLs that disagree (a mirror serving an error page with status 200,
        or another file) make it None, so the caller downloads and learns the true size."""
        if (path := self.cached(sha256)) is not None:
            return path.stat().st_size
        sizes = {size for url in urls if (size := self._probe_size(url)) is not None}
        return sizes.pop() if len(sizes) == 1 else None

    def _probe_size(self, url: str) -> int | None:
        import httpx

        with contextlib.suppress(httpx.HTTPError, RegistryError), self._client(url) as client:
            resp = client.send("HEAD", url, headers={"Accept-Encoding": "identity"})
            if (size := _identity_length(resp)) is not None:
                return size
        with contextlib.suppress(httpx.HTTPError, RegistryError), self._get(url, _PROBE) as resp:
            size = _range_total(resp)
            return size if size is not None else _identity_length(resp)  # the body is never read
        return None

    def fetch(self, sha256: str, urls: list[str], what: str, size: int | None = None) -> Path:
        """The cached, verified file: downloaded from the first URL that gives the right bytes."""
        if (path := self.cached(sha256)) is not None:
            return path
        reasons = []
        for url in urls:
            try:
                return self._download(url, sha256, size)
            except _Failed as e:
                reasons.append(f"{url}: {e}")
        raise CartonLinkError(f"LINKS: cannot fetch {what} (sha256 {sha256}): " + "; ".join(reasons))

    def open(self, sha256: str, urls: list[str], what: str, size: int | None = None) -> BinaryIO:
        return open(self.fetch(sha256, urls, what, size), "rb")  # noqa: SIM115 - caller closes

    def _download(self, url: str, sha256: str, size: int | None) -> Path:
        import httpx

        self.cache_dir.mkdir(parents=True, exist_ok=True)
        limit = size if size is not None else self.max_size
        room = shutil.disk_usage(self.cache_dir).free - DISK_RESERVE
        if size is not None and size > room:
            raise _Failed(f"{size} bytes would not fit: {max(room, 0)} bytes free in {self.cache_dir}")
        fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=self.cache_dir)
        try:
            digest = hashlib.sha256()
            count = 0
            headers = {"Accept-Encoding": ACCEPT_ENCODING}
            with os.fdopen(fd, "wb") as out, self._get(url, headers) as resp:
                if not resp.is_success:
                    raise _Failed(f"HTTP {resp.status_code}")
                try:
                    body = decoding_reader(IterReader(resp.iter_raw(CHUNK)), resp.headers.get("content-encoding"))
                    while data := body.read(CHUNK):
                        count += len(data)
                        if count > limit:
                            hint = "" if size is not None else f" (raise ${ENV_MAX_SIZE} if the file is that big)"
                            raise _Failed(f"more than the expected {limit} bytes{hint}")
                        if count > room:
                            raise _Failed(f"the disk of {self.cache_dir} is full but for {DISK_RESERVE} bytes")
                        digest.update(data)
                        write_sliced(out, data)
                except DECODE_ERRORS as e:
                    raise _Failed(f"cannot decode the response: {e}") from None
            if size is not None and count != size:
                raise _Failed(f"got {count} bytes, expected {size}")
            if digest.hexdigest() != sha256:
                raise _Failed(f"content has sha256 {digest.hexdigest()}")
            final = self.cache_dir / sha256
            os.replace(tmp, final)
            self.downloads += 1
            return final
        except httpx.HTTPError as e:
            raise _Failed(f"{type(e).__name__}: {e}") from None
        except RegistryError as e:  # the connection failed after the client's retries
            raise _Failed(str(e)) from None
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
