"""Running the application with uvicorn: the listen address, TLS, the access log, and a
graceful stop on SIGTERM or Ctrl-C (uvicorn's: requests in flight are finished first, for up
to :data:`GRACE` seconds). The access log goes to stdout (uvicorn's), the rest to stderr."""

from __future__ import annotations

import contextlib
import importlib
import logging
import signal
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ocibridge.errors import UsageError
from ocibridge.hubserver import XET_MIN_SIZE
from ocibridge.hubserver.replicas.leasetimes import LeaseTimes
from ocibridge.hubserver.replicas.trusted import LOOPBACK
from ocibridge.hubserver.settings import COMPARE_BUDGET, MULTIPART_MIN, PAGE, PART_SIZE, ServeSettings
from ocibridge.hubserver.tlsfiles import load_tls
from ocibridge.hubserver.uploads.staging import ABANDONED_SECONDS as STAGING_EXPIRY  # noqa: N811 - the name serve gives it
from ocibridge.hubserver.uploads.staging import BUDGET as STAGING_BUDGET  # noqa: N811

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from ocibridge.hubserver.app import ServeApp
    from ocibridge.hubserver.lifetimes.sweepthread import Keeper
    from ocibridge.hubserver.repo.catalog import Catalog
    from ocibridge.hubserver.repo.publishing import Publishing
    from ocibridge.hubserver.repo.quarantined import TrustedKeys
    from ocibridge.hubserver.upstream.servingside import CatalogFor
    from ocibridge.hubserver.web.compare import Diff

#: seconds requests in flight get to finish after SIGTERM
GRACE = 30


@dataclass
class ServerSettings:
    """Everything the server is built from (:func:`build_app`, :func:`server`); the public,
    frozen form is :mod:`ocibridge.api.serve`'s ``ServeOptions`` and ``ListenOptions``."""

    listen: str = "127.0.0.1:8080"
    cert: str | None = None
    key: str | None = None
    tokens: Sequence[str] = ()
    token_file: str | None = None  # where tokens were read from: read again when it changes (tokenfile.py)
    audit_log: str | None = None  # where each write is recorded, one JSON line ("-": stdout; audit.py)
    metrics: bool = True  # GET /metrics (metrics.py)
    access_log: bool = True
    concurrency: int = 4
    page: int = PAGE
    xet_min: int | None = XET_MIN_SIZE  # files from this size are offered over Xet (None: none)
    public_url: str | None = None  # the URL clients reach serve at (the Xet URLs it hands out)
    send_timeout: float = 30.0  # seconds one write of an answer may take (guard.py)
    publish: Publishing | None = None  # how commits are written (repo/publishing.py); None: writes refused
    diff: Diff | None = None  # ocibridge.diff, for the compare pages (web/compare.py); None: no diffs
    staging_budget: int = STAGING_BUDGET  # bytes uploads not yet committed may take (staging.py)
    staging_expiry: float = STAGING_EXPIRY  # seconds an upload no commit names is kept
    lfs_multipart_min: int | None = MULTIPART_MIN  # LFS uploads from this size come in parts (None: never)
    lfs_part_size: int = PART_SIZE  # ... of this size
    compare_budget: int = COMPARE_BUDGET  # bytes one compare page's diff may read (web/compare.py)
    writer: str | None = None  # the serve writes are sent to (--writer); None: this one writes
    trust_forwarded: tuple[str, ...] = LOOPBACK  # peers whose X-Forwarded-Host/-Proto are believed
    peers: tuple[str, ...] = ()  # --peer: other serves a standby sends writes to while one holds the lease
    lease: LeaseTimes = field(default_factory=LeaseTimes)  # the writer lease's times (replicas/leasetimes.py)
    quotas: str | None = None  # --quotas FILE (quotas/quotafile.py)
    upstream_max_size: int | None = None  # --upstream-max-size (quotas/ingests.py)
    upstream_quota_namespace: str | None = None  # --upstream-quota-namespace
    quarantine: TrustedKeys | None = None  # --scan quarantine: the keys whose scan reports release

    def for_routes(self) -> ServeSettings:
        """What the routes read, frozen: made once, handed to every route set as it is."""
        return ServeSettings(tokens=tuple(self.tokens), token_file=self.token_file, audit_log=self.audit_log,
                             metrics=self.metrics, page=self.page, xet_min=self.xet_min, public_url=self.public_url,
                             lfs_multipart_min=self.lfs_multipart_min, lfs_part_size=self.lfs_part_size,
                             writer=self.writer, trust_forwarded=self.trust_forwarded, peers=self.peers,
                             compare_budget=self.compare_budget, lease=self.lease, quotas=self.quotas,
                             upstream_max_size=self.upstream_max_size,
                             upstream_quota_namespace=self.upstream_quota_namespace,
                             quarantine=self.quarantine)


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT``, ``[V6]:PORT`` or ``:PORT`` (every address). A URL (the one serve prints,
    pasted back) and a bare port are answered with the ``--listen`` to write."""
    if "://" in text:
        address = text.split("://", 1)[1].split("/", 1)[0]
        raise UsageError(f"--listen {text!r} is HOST:PORT, not a URL: --listen {address}")
    if text.isdigit():
        raise UsageError(f"--listen {text!r}: expected HOST:PORT: --listen 127.0.0.1:{text} (this machine only) "
                         f"or :{text} (every address)")
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise UsageError(f"--listen {text!r}: expected HOST:PORT")
    if not 0 <= int(port) <= 65535:
        raise UsageError(f"--listen {text!r}: the port is a number from 0 to 65535")
    host = host.strip("[]") or "0.0.0.0"  # noqa: S104 - asked for: ':PORT' listens everywhere
    return host, int(port)


def parse_public_url(text: str | None, flag: str = "--public-url") -> str | None:
    """``--public-url`` (or ``flag``: ``--writer``): ``http(s)://HOST[:PORT][/PATH]``, without a trailing slash."""
    if text is None:
        return None
    from urllib.parse import urlsplit

    parts = urlsplit(text)
    if "@" in parts.netloc:  # not echoed: serve names the URL in answers and logs, a password with it
        token = " (a token goes in --upstream-token-file)" if flag == "--upstream" else ""
        raise UsageError(f"{flag}: a user or password in the URL is refused: serve names the URL to its "
                         f"clients and in its log{token}")
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise UsageError(f"{flag} {text!r}: expected http(s)://HOST[:PORT][/PATH]")
    return text.rstrip("/")


def read_tokens(path: str) -> list[str]:
    """The token lines of ``--token-file``: ``TOKEN [read|write] [REPO-PREFIX] [NAME]`` (access.py),
    one a line; blank lines and ``#`` comments skipped; a line that is not UTF-8 or is malformed,
    or a token on two lines, is a UsageError naming the file and the line (tokenfile.py). Read
    with the core's modules only: without ``ocibridge[serve]``, serve says which extra it needs."""
    from ocibridge.hubserver.grants import parse_lines
    from ocibridge.hubserver.tokenfile import numbered_lines

    numbers, lines = numbered_lines(path)
    parse_lines(lines, numbers, f"--token-file {path}")
    return lines


def build_app(catalog: Catalog | CatalogFor, options: ServerSettings) -> Starlette:
    from ocibridge.cache.modelcache import ModelCache
    from ocibridge.hubserver.asgiapp import create_app
    from ocibridge.hubserver.guard import Limits
    from ocibridge.hubserver.reading.blobs import Blobs
    from ocibridge.hubserver.reading.ranges import ChunkRanges
    from ocibridge.hubserver.repo.files import FileLists
    from ocibridge.hubserver.uploads.staging import Staging

    cache = ModelCache()
    return create_app(catalog, FileLists(cache, options.concurrency), Blobs(cache), options.for_routes(),
                      ranges=ChunkRanges(cache), limits=Limits(send_timeout=options.send_timeout),
                      publish=options.publish, diff=options.diff,
                      staging=Staging(budget=options.staging_budget, expiry=options.staging_expiry))


def check_listening(options: ServerSettings) -> tuple[str, int]:
    """The address to listen at; the TLS files go together."""
    host, port = parse_listen(options.listen)
    if bool(options.cert) != bool(options.key):
        raise UsageError("--cert and --key go together")
    return host, port


def server(app: Starlette, options: ServerSettings, sock: socket.socket | None = None) -> Any:
    """A uvicorn server for ``app`` (``.run(sockets=[sock])`` to serve a socket bound already)."""
    import uvicorn

    host, port = check_listening(options)

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            super().handle_exit(sig, frame)
            if sig == signal.SIGTERM:  # a stop asked for, done gracefully: a clean exit, not re-raised
                self._captured_signals.remove(sig)

    http: Any = "h11"  # bounded by h11's own limit on the request head
    try:
        from ocibridge.hubserver.protocol import GuardedProtocol

        http = GuardedProtocol
    except ImportError:  # no httptools (installed with ocibridge[serve])
        pass
    from ocibridge.hubserver.guard import HEAD_MAX

    config = uvicorn.Config(
        app, host=host, port=port, http=http, h11_max_incomplete_event_size=HEAD_MAX,
        loop="auto",  # uvloop, which ocibridge[serve] installs (where it builds), else asyncio's own
        ssl_certfile=options.cert, ssl_keyfile=options.key,
        access_log=options.access_log, log_level="info", timeout_graceful_shutdown=GRACE,
        lifespan="off", server_header=False, proxy_headers=False,
        ws="none")  # the Hub's API has no websockets: wsproto is not loaded (3 MiB of idle memory)
    return Server(config)


#: modules the first read imported, each a lazy import of its own (anyio's backend at its first
#: worker-thread call, pull's extract for a manifest, sqlite3 for the blob index): imported
#: before the port opens, so the first reader neither waits for them nor pays their CPU (0.08 s
#: of a cold 1 GiB read's ~1.2 s where no bytecode is kept: docs/benchmarks.md)
FIRST_READ_MODULES = ("anyio._backends._asyncio", "anyio.streams.memory", "anyio.streams.stapled", "sqlite3",
                      "ocibridge.model.extract", "ocibridge.stores.forwarding")


def import_read_path() -> None:
    """Import :data:`FIRST_READ_MODULES` (serve's start, not its first reader); one that does not
    import (a Python built without sqlite3) fails where it is used, as before, not the start."""
    for name in FIRST_READ_MODULES:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


def run(app: Starlette, options: ServerSettings) -> None:
    """Serve ``app`` (:func:`build_app`'s) until SIGTERM or Ctrl-C, then close it."""
    logging.basicConfig(level=logging.INFO, format="ocibridge: %(message)s")
    from ocibridge.stores.registry.debuglog import REQUEST_LOGGERS

    for name in REQUEST_LOGGERS:  # the upstream request log: only with --debug (which sets its level)
        logger = logging.getLogger(name)
        if logger.level == logging.NOTSET:
            logger.setLevel(logging.WARNING)
    from ocibridge.hubserver.replicas.selfpeer import refuse_self
    from ocibridge.hubserver.starting import banner, bind, warn_when_silent

    host, port = check_listening(options)
    sock = bind(host, port)  # a port in use: one error line, before anything is started
    port = sock.getsockname()[1]  # the port given for ':0' (any free one), which the banner must name
    served = server(app, options)
    state = app.state.serve
    if options.cert and options.key:  # (together: check_listening)
        try:
            load_tls(served.config, options.cert, options.key)
        except BaseException:
            sock.close()
            state.close()  # as when uvicorn's own load failed, in the finally below
            raise
    from ocibridge.hubserver.accesslog import install

    # (after uvicorn's Config set up its loggers) signatures redacted, dedupe misses and uvicorn's
    # own process lines left out; with --debug (the request log's level) the misses are shown
    install(debug=logging.getLogger(REQUEST_LOGGERS[0]).isEnabledFor(logging.DEBUG))
    shown = f"[{host}]" if ":" in host else host
    scheme = "https" if options.cert else "http"
    url = options.public_url or f"{scheme}://{shown}:{port}"
    try:  # a peer (or writer) that is this serve would be sent its own writes, again and again
        for flag, urls in (("--peer", options.peers), ("--writer", [options.writer] if options.writer else [])):
            refuse_self(urls, flag, public_url=options.public_url, scheme=scheme, host=host, port=port)
    except BaseException:
        sock.close()
        state.close()
        raise
    writes = any(g.write for g in state.gate.grants)
    # the writer lease taken, or its holder known, before the start line says which; a proxy
    # (--upstream) writes what it fetches, so it leases even with read tokens only: of the proxies
    # over one prefix, the holder alone asks the upstream (app.fetches_here)
    if writes or state.catalog.upstream is not None:
        try:
            state.lease.start(url)
        except BaseException:
            sock.close()
            state.close()
            raise
    logging.getLogger("ocibridge.serve").info(banner(
        [s.shown for s in state.catalog.sources], url, writes=writes, tokens=bool(state.gate.grants),
        writer=options.writer, standing_by=state.standing_by()))
    if state.catalog.upstream is not None:  # --upstream: where a miss goes, and what is let in
        logging.getLogger("ocibridge.serve").info(state.catalog.upstream.describe() + fetched_by(state))
    warn_when_silent(state.catalog.sources[0].shown, state.catalog.sources[0].ready)
    import_read_path()

    keeper = keeper_of(state)  # --upstream-keep: reads recorded, unread fetched commits dropped
    try:
        with sock, state.staging.sweeping(), keeper.running() if keeper else contextlib.nullcontext():
            served.run(sockets=[sock])
    finally:
        state.close()  # the chunks verified so far are in the model cache when it returns


def fetched_by(state: ServeApp) -> str:
    """A proxy that does not fetch, for its start line: which serve does, and where its misses go."""
    if state.fetches_here():
        return ""
    holder = state.lease.holder()
    writer = state.writer_of_reads()
    by = holder.shown() if holder is not None else writer.writer if writer is not None else "the writer"
    goes = f"sent to {writer.writer}" if writer is not None else "answered 503 until it holds them"
    return f"; misses fetched by {by}, which holds the writer lease: {goes}"


def keeper_of(state: Any) -> Keeper | None:
    """The lifetime keeper of serve's app state (:class:`ocibridge.hubserver.app.ServeApp`); None without
    ``--upstream-keep``."""
    from ocibridge.hubserver.lifetimes.notes import ReadNotes
    from ocibridge.hubserver.lifetimes.sweepthread import Keeper
    from ocibridge.hubserver.upstream.proxy import UpstreamSource

    catalog = state.catalog
    upstream = catalog.upstream
    if not isinstance(upstream, UpstreamSource) or upstream.settings.keep is None \
            or not isinstance(upstream.notes, ReadNotes):
        return None
    return Keeper(catalog.sources[0], upstream.settings.keep, upstream.notes, state.fetches_here,
                  state.audit.record, catalog.forget)
