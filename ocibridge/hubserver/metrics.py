"""``GET /metrics``: serve's counters in Prometheus' text format, made by prometheus-client (the
field's library; in the ``serve`` extra), each app with a registry of its own.

    ocibridge_serve_requests_total{method,route,status}   answers, by route template (never a repo id)
    ocibridge_serve_received_bytes_total                 request bodies read
    ocibridge_serve_sent_bytes_total                     answer bodies sent
    ocibridge_serve_uploads_in_flight                    LFS PUTs and Xet uploads being received
    ocibridge_serve_registry_errors_total                answers of 502: a registry did not answer as expected
    ocibridge_serve_staging_bytes                        bytes uploads not yet committed hold (and reserve)
    ocibridge_serve_xet_xorbs_reading                    Xet xorb bodies being read (the others wait their turn)
    ocibridge_serve_cache_hits_total                     blobs sent from serve's model cache
    ocibridge_serve_blob_fetches_total                   blobs fetched from a source (the cache's misses)

Labels hold route templates (``/api/models/{org}/{name}/tree/{revision}``), methods and
statuses only, so the page names no repository and its series stay few: like the metrics of
most servers it is open on the listen address (``--no-metrics`` turns it off; docs/security.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ocibridge.hubserver.answers import in_thread
from ocibridge.hubserver.guard import BODY_READ, UPLOAD_PATHS, UPLOADS
from ocibridge.hubserver.routing import route_path
from ocibridge.hubserver.zerocopy import BODY_SENT
from ocibridge.kinds.hf.repotype import REPO_TYPES

PATH = "/metrics"
_CONVERTER = re.compile(r":[a-z_]+}")


class Metrics:
    """The counters of one app, and the page that shows them. ``staging``: the bytes staging
    holds now; ``hits`` and ``fetches``: blobs sent from the cache, blobs fetched (read at each
    scrape, from what keeps them)."""

    def __init__(self, staging: Callable[[], int], hits: Callable[[], int], fetches: Callable[[], int]):
        self.registry = CollectorRegistry(auto_describe=True)
        self.xorbs_reading: Callable[[], int] = lambda: 0  # set once the Xet upload routes exist
        self.requests = Counter("ocibridge_serve_requests", "HTTP answers, by route template, method and status",
                                ("route", "method", "status"), registry=self.registry)
        self.received = Counter("ocibridge_serve_received_bytes", "Bytes of request bodies read",
                                registry=self.registry)
        self.sent = Counter("ocibridge_serve_sent_bytes", "Bytes of answer bodies sent", registry=self.registry)
        self.uploads = Gauge("ocibridge_serve_uploads_in_flight", "LFS PUTs and Xet uploads being received",
                             registry=self.registry)
        self.registry_errors = Counter("ocibridge_serve_registry_errors",
                                       "Answers of 502: a registry did not answer as expected", registry=self.registry)
        self.registry.register(_Held(staging, hits, fetches, lambda: self.xorbs_reading()))

    def route(self) -> BaseRoute:
        return Route(PATH, self.page, methods=["GET", "HEAD"])

    async def page(self, request: Request) -> Response:
        page = await in_thread(generate_latest, self.registry)  # staging's size is read from its files
        return Response(page, media_type=CONTENT_TYPE_LATEST)

    def middleware(self, app: ASGIApp) -> ASGIApp:
        """``app`` with every request counted (outside the guard: its refusals count too)."""

        async def counted(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            status = 500  # an answer never started: the server's error
            upload = _is_upload(scope)

            async def reading() -> Message:
                message = await receive()
                if message["type"] == "http.request":
                    self.received.inc(len(message.get("body", b"")))
                return message

            async def sending(message: Message) -> None:
                nonlocal status
                if message["type"] == "http.response.start":
                    status = int(message["status"])
                elif message["type"] == "http.response.body":
                    self.sent.inc(len(message.get("body", b"")))
                await send(message)

            if upload:
                self.uploads.inc()
            scope[BODY_READ] = self.received.inc  # a body read past this middleware (xet/diverted.py)
            scope[BODY_SENT] = self.sent.inc  # a body sent past it (by sendfile: zerocopy.py)
            try:
                await app(scope, reading, sending)
            finally:
                if upload:
                    self.uploads.dec()
                self.requests.labels(template(scope), scope["method"], str(status)).inc()
                if status == 502:
                    self.registry_errors.inc()

        return counted


def template(scope: Scope) -> str:
    """The route template the request matched, its converters left out (``{org}``, not
    ``{org:hub_part}``) and its repository type written out (``/api/models/{org}/{name}``,
    ``/datasets/{org}/{name}/resolve/...``); ``unmatched`` when none did (a 413 before routing)."""
    route = scope.get("route")
    if not isinstance(route, Route):
        return "unmatched"
    kind = (scope.get("path_params") or {}).get("repo_type")
    shown = _CONVERTER.sub("}", route.path)
    return shown.replace("{repo_type}", f"{kind}s") if kind in REPO_TYPES else shown


def _is_upload(scope: Scope) -> bool:
    path = route_path(scope)
    return (scope["method"] == "PUT" and path.startswith(UPLOADS)) or (scope["method"] == "POST"
                                                                         and path.startswith(UPLOAD_PATHS))


class _Held(Collector):
    """What other parts keep, read when scraped."""

    def __init__(self, staging: Callable[[], int], hits: Callable[[], int], fetches: Callable[[], int],
                 xorbs: Callable[[], int]):
        self.staging, self.hits, self.fetches, self.xorbs = staging, hits, fetches, xorbs

    def collect(self) -> Iterator[Metric]:
        staged = GaugeMetricFamily("ocibridge_serve_staging_bytes",
                                   "Bytes held (and reserved) by uploads not yet committed")
        staged.add_metric([], self.staging())
        yield staged
        reading = GaugeMetricFamily("ocibridge_serve_xet_xorbs_reading",
                                    "Xet xorb bodies being read (the others wait their turn)")
        reading.add_metric([], self.xorbs())
        yield reading
        yield CounterMetricFamily("ocibridge_serve_cache_hits", "Blobs sent from serve's model cache",
                                  value=self.hits())
        yield CounterMetricFamily("ocibridge_serve_blob_fetches", "Blobs fetched from a source (the cache's misses)",
                                  value=self.fetches())
