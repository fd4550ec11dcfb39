"""Registry-behaviour profiles: quirks of the registries people push to, put on the fault proxy.

Every quirk reproduces one documented behaviour (docs/registry.md names the registry and the
source) in front of the real distribution registry, so the client is tested against real
storage with only the differing behaviour emulated:

    proxy.quirks[:] = profile("gar")                # no chunked (PATCH) uploads
    proxy.quirks[:] = [BodyCap(8 * MiB)]            # Cloudflare's request-body cap, scaled down

Sizes and lifetimes are scaled down (MiB for GB, seconds for minutes) so tests stay fast.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import threading
import time
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlencode, urlsplit

from .faultproxy import Action, CapBody, FaultProxy, RecordedRequest, Reroute, Serve, Status

MiB = 1024 * 1024
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
IMAGE_CONFIGS = frozenset({"application/vnd.oci.image.config.v1+json",
                           "application/vnd.docker.container.image.v1+json"})

_UPLOAD = re.compile(r"^/v2/(.+)/blobs/uploads/")
_MANIFEST = re.compile(r"^/v2/(.+)/manifests/([^/?]+)")
_REPO = re.compile(r"^/v2/(.+)/(?:blobs|tags|referrers)/")
_REFERRERS = re.compile(r"^/v2/(.+)/referrers/(sha256:[0-9a-f]{64})")


def _error(code: int, error: str, message: str, headers: dict[str, str] | None = None) -> Status:
    body = json.dumps({"errors": [{"code": error, "message": message}]}).encode()
    return Status(code, None, body, tuple((headers or {}).items()))


def _has_body(rec: RecordedRequest) -> bool:
    return "chunked" in rec.headers.get("transfer-encoding", "").lower() or \
        int(rec.headers.get("content-length") or 0) > 0


class Quirk:
    """No behaviour: subclasses override what they change."""

    def on_request(self, proxy: FaultProxy, rec: RecordedRequest) -> Action | None:
        return None

    def on_response(self, rec: RecordedRequest, status: int,
                    headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
        return headers


class NoChunkedPatch(Quirk):
    """Google Artifact Registry: no chunked uploads; a PATCH on an upload session is refused."""

    def on_request(self, proxy: FaultProxy, rec: RecordedRequest) -> Action | None:
        if rec.method == "PATCH" and _UPLOAD.match(rec.path):
            return _error(405, "UNSUPPORTED", "chunked uploads are not supported (profile gar)")
        return None


@dataclass
class BodyCap(Quirk):
    """A proxy in front (Cloudflare: ~100 MB): a request body over ``limit`` bytes is 413."""

    limit: int

    def on_request(self, proxy: FaultProxy, rec: RecordedRequest) -> Action | None:
        return CapBody(self.limit) if _has_body(rec) else None


@dataclass
class MaxMonolithicPut(Quirk):
    """Docker Hub / Quay: a blob's closing PUT carrying more than ``limit`` bytes is refused
    (Quay: 20 GB in one PUT); chunks (PATCH) of any size are taken."""

    limit: int
    code: int = 413

    def on_request(self, proxy: FaultProxy, rec: RecordedRequest) -> Action | None:
        if rec.method == "PUT" and _UPLOAD.match(rec.path) and \
                int(rec.headers.get("content-length") or 0) > self.limit:
            return _error(self.code, "SIZE_INVALID", f"a single PUT may carry at most {self.limit} bytes")
        return None


@dataclass
class ShortTokens(Quirk):
    """Bearer token auth whose tokens die after ``lifetime`` seconds (Docker Hub, GHCR: 300 s)
    although they claim ``advertised`` seconds: a request after that is 401 with a challenge,
    mid-upload and mid-download alike. The proxy is its own token server (``/token``)."""

    lifetime: float
    advertised: int = 300
    issued: dict[str, float] = field(default_factory=dict)
    refused: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def on_request(self, proxy: FaultProxy, rec: RecordedRequest) -> Action | None:
        if rec.path.startswith("/token"):
            token = secrets.token_hex(16)
            with self._lock:
                self.issued[token] = time.monotonic()
            body = json.dumps({"token": token, "expires_in": self.advertised}).encode()
            return Status(200, None, body)
        if not rec.path.startswith("/v2/"):
            return None
        sent = rec.headers.get("authorization", "")
        token = sent[7:] if sent.lower().startswith("bearer ") else ""
        with self._lock:
            born = self.issued.get(token)
        if born is not None and time.monotonic() - born < self.lifetime:
            return None
        if born is not None:
            self.refused += 1
        m = _UPLOAD.match(rec.path) or _MANIFEST.match(rec.path) or _REPO.match(rec.path)
        scope = f',scope="repository:{m.group(1)}:pull,push"' if m else ""
        challenge = f'Bearer realm="{proxy.url}/token",service="profile"{scope}'
        return _error(401, "UNAUTHORIZED", "token expired" if born else "authentication required",
                      {"WWW-Authenticate": challenge})


class NoMount(Quirk):
    """Amazon ECR: a mount POST opens an ordinary upload session (202), never mounts."""

    def on_request(self, proxy: FaultProxy, rec: RecordedRequest) -> Action | None:
        if rec.method != "POST" or "mount=" not in rec.path:
            return None
        parts = urlsplit(rec.path)
        query = [(k, v) for k, v in parse_qsl(parts.query) if k not in ("mount", "from")]
        return Reroute(parts.path + (f"?{urlencode(query)}" if query else ""))


class NoDigestOnHead(Quirk):
    """A HEAD on a manifest answered without ``Docker-Content-Digest``."""

    def on_response(self, rec: RecordedRequest, status: int,
                    headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
        if rec.method == "HEAD" and _MANIFEST.match(rec.path):
            return [(k, v) for k, v in headers if k.lower() != "docker-content-digest"]
        return headers


class RelativeLocation(Quirk):
    """``Location`` headers as a path without scheme and host (the spec allows either)."""

    def on_response(self, rec: RecordedRequest, status: int,
                    headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
        out = []
        for k, v in headers:
            if k.lower() == "location" and "://" in v:
                parts = urlsplit(v)
                v = parts.path + (f"?{parts.query}" if parts.query else "")
            out.append((k, v))
        return out


class RangeEndExclusive(Quirk):
    """Upload answers (a chunk's 202, a status GET's 204) with ``Range: 0-N`` for N bytes
    held, one past distribution's ``0-(N-1)``: the other of the two styles registries use."""

    def on_response(self, rec: RecordedRequest, status: int,
                    headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
        if rec.method not in ("PATCH", "GET") or status not in (202, 204) or not _UPLOAD.match(rec.path):
            return headers
        out = []
        for k, v in headers:
            m = re.fullmatch(r"0-([0-9]+)", v.strip()) if k.lower() == "range" else None
            out.append((k, f"0-{int(m.group(1)) + 1}" if m else v))
        return out


def fallback_tag(digest: str) -> str:
    return digest.replace(":", "-")


class ReferrersApi(Quirk):
    """The OCI 1.1 referrers API (Harbor, zot, ACR): ``GET /v2/<repo>/referrers/<digest>``
    answered from an index the proxy keeps under the fallback tag, and a manifest PUT with a
    ``subject`` answered with ``OCI-Subject`` after the proxy added it to that index (what a
    registry with the API does on its own: the client must not write the tag itself)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.client_tag_writes = 0  # PUTs of a fallback tag by the client (should stay 0)

    def on_request(self, proxy: FaultProxy, rec: RecordedRequest) -> Action | None:
        if rec.method == "GET" and _REFERRERS.match(rec.path):
            return Serve(self._list)
        m = _MANIFEST.match(rec.path)
        if rec.method == "PUT" and m:
            if re.fullmatch(r"sha256-[0-9a-f]{64}", m.group(2)):
                self.client_tag_writes += 1
            return Serve(self._put)
        return None

    def _index(self, proxy: FaultProxy, repo: str, digest: str) -> dict[str, object]:
        status, _, data = proxy.upstream("GET", f"/v2/{repo}/manifests/{fallback_tag(digest)}",
                                         {"Accept": OCI_INDEX})
        if status == 200:
            return dict(json.loads(data))
        return {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": []}

    def _list(self, proxy: FaultProxy, rec: RecordedRequest, body: bytes) -> Status:
        m = _REFERRERS.match(rec.path)
        assert m is not None
        index = self._index(proxy, m.group(1), m.group(2))
        wanted = dict(parse_qsl(urlsplit(rec.path).query)).get("artifactType")
        headers = {"Content-Type": OCI_INDEX}
        if wanted:
            index["manifests"] = [d for d in index["manifests"]  # type: ignore[attr-defined]
                                  if d.get("artifactType") == wanted]
            headers["OCI-Filters-Applied"] = "artifactType"
        return Status(200, None, json.dumps(index).encode(), tuple(headers.items()))

    def _put(self, proxy: FaultProxy, rec: RecordedRequest, body: bytes) -> Status:
        m = _MANIFEST.match(rec.path)
        assert m is not None
        kind = rec.headers.get("content-type", "")
        status, headers, data = proxy.upstream("PUT", rec.path, {"Content-Type": kind}, body)
        out = {k: v for k, v in headers if k.lower() in ("location", "docker-content-digest")}
        try:
            manifest = json.loads(body)
        except ValueError:
            manifest = {}
        subject = manifest.get("subject") if isinstance(manifest, dict) else None
        if status == 201 and isinstance(subject, dict):
            digest = "sha256:" + hashlib.sha256(body).hexdigest()
            self._add(proxy, m.group(1), subject["digest"], manifest, kind, digest, len(body))
            out["OCI-Subject"] = subject["digest"]
        return Status(status, None, data, tuple(out.items()))

    def _add(self, proxy: FaultProxy, repo: str, subject: str, manifest: dict[str, object],
             kind: str, digest: str, size: int) -> None:
        config = manifest.get("config")
        entry: dict[str, object] = {"mediaType": kind, "digest": digest, "size": size}
        artifact = manifest.get("artifactType") or (config.get("mediaType") if isinstance(config, dict) else None)
        if artifact:
            entry["artifactType"] = artifact
        if manifest.get("annotations"):
            entry["annotations"] = manifest["annotations"]
        with self._lock:
            index = self._index(proxy, repo, subject)
            entries = index["manifests"]
            assert isinstance(entries, list)
            if all(e.get("digest") != digest for e in entries):
                entries.append(entry)
            proxy.upstream("PUT", f"/v2/{repo}/manifests/{fallback_tag(subject)}",
                           {"Content-Type": OCI_INDEX}, json.dumps(index).encode())


@dataclass
class RejectManifests(Quirk):
    """An older registry's manifest validation: ``artifactType`` refused (registries before
    OCI 1.1), and/or a config media type other than an image's (GitLab's list of types)."""

    artifact_type: bool = True
    unknown_config: bool = False

    def on_request(self, proxy: FaultProxy, rec: RecordedRequest) -> Action | None:
        if rec.method == "PUT" and _MANIFEST.match(rec.path):
            return Serve(self._put)
        return None

    def _put(self, proxy: FaultProxy, rec: RecordedRequest, body: bytes) -> Status:
        try:
            manifest = json.loads(body)
        except ValueError:
            manifest = {}
        config = manifest.get("config") if isinstance(manifest, dict) else None
        if self.artifact_type and isinstance(manifest, dict) and "artifactType" in manifest:
            return _error(400, "MANIFEST_INVALID", "manifest invalid: unknown field artifactType")
        if self.unknown_config and isinstance(config, dict) and config.get("mediaType") not in IMAGE_CONFIGS:
            return _error(400, "MANIFEST_INVALID", f"unsupported config media type {config.get('mediaType')}")
        status, headers, data = proxy.upstream(
            "PUT", rec.path, {"Content-Type": rec.headers.get("content-type", "")}, body)
        keep = {"location", "docker-content-digest", "content-type"}
        return Status(status, None, data, tuple((k, v) for k, v in headers if k.lower() in keep))


@dataclass
class RateLimited(Quirk):
    """Docker Hub's limits: every ``every``-th request is 429 with ``RateLimit-*`` headers
    (``RateLimit-Limit: 100;w=21600``) and a short ``Retry-After``; past ``quota`` requests,
    every one, without ``Retry-After`` (the pull limit of a 6-hour window is spent)."""

    every: int = 5
    retry_after: float | None = 0  # a whole number of seconds: "0.2" is no Retry-After a client reads
    #: after this many requests every one is refused, with no Retry-After (quota spent)
    quota: int | None = None
    seen: int = 0
    limited: int = 0

    def on_request(self, proxy: FaultProxy, rec: RecordedRequest) -> Action | None:
        if not rec.path.startswith("/v2/") or rec.path == "/v2/":
            return None
        self.seen += 1
        spent = self.quota is not None and self.seen > self.quota
        if self.seen % self.every and not spent:
            return None
        self.limited += 1
        status = _error(429, "TOOMANYREQUESTS", "You have reached your pull rate limit.",
                        {"RateLimit-Limit": "100;w=21600", "RateLimit-Remaining": "0;w=21600"})
        return Status(429, None if spent else self.retry_after, status.body, status.headers)


def profile(name: str, *, scale: int = MiB) -> list[Quirk]:
    """The quirks of one public registry (docs/registry.md), limits scaled down: Cloudflare's
    100 MB cap becomes 8 × ``scale``, Quay's 20 GB PUT 2 × ``scale``, 300 s tokens 3 s."""
    profiles: dict[str, list[Quirk]] = {
        "distribution": [],
        "gar": [NoChunkedPatch()],
        "cloudflare": [BodyCap(8 * scale)],
        "dockerhub": [ShortTokens(lifetime=3.0), RateLimited(every=7)],
        "quay": [MaxMonolithicPut(2 * scale)],
        "ghcr": [ShortTokens(lifetime=3.0)],
        "ecr": [NoMount()],
        "harbor": [ReferrersApi(), RelativeLocation()],
        "old": [RejectManifests(artifact_type=True, unknown_config=False), NoDigestOnHead()],
        "gitlab": [RejectManifests(artifact_type=False, unknown_config=True)],
    }
    return profiles[name]


PROFILES = ("distribution", "gar", "cloudflare", "dockerhub", "quay", "ghcr", "ecr", "harbor",
            "old", "gitlab")
