"""``ocibridge check-registry``: ask a registry what it supports, by trying it.

Registries differ in what they take (docs/registry.md); their answers, not their names, say it.
With a repository the probe writes there what a push would, but no manifest that stays and no
tag: two small random blobs (one sent in a PATCH chunk, one in a single PUT), a mount of one
into ``REPO-ocibridge-probe``, and an OCI 1.1 artifact manifest (``artifactType``, the empty
config) deleted again where the registry allows deletes. What stays (the mount's repository, a
manifest the registry would not delete) is named in the report's notes. The referrers API is asked with a
GET. What the uploads teach is remembered for the host, as a push would (uploadpolicy.py).
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass
from typing import Any

import httpx

from ocibridge.core.asdict import camel_key
from ocibridge.errors import OcibridgeError, RegistryError
from ocibridge.oci.digest import sha256_bytes
from ocibridge.oci.empty import EMPTY_JSON, empty_descriptor
from ocibridge.oci.mediatypes import OCI_INDEX, OCI_MANIFEST
from ocibridge.stores.registry.blobstream import pull_scope
from ocibridge.stores.registry.client import RegistryClient
from ocibridge.stores.registry.upload import push_scopes
from ocibridge.stores.registry.uploadpolicy import CONTENT_CODES

PROBE_ARTIFACT = "application/vnd.ocibridge.probe.v1"


@dataclass(frozen=True)
class RegistryReport:
    """What a registry was seen to support; None where the probe could not tell."""

    host: str
    repository: str | None
    api_version: str | None
    chunked_uploads: bool | None = None
    monolithic_uploads: bool | None = None
    mount: bool | None = None
    referrers_api: bool | None = None
    oci_1_1_artifacts: bool | None = None
    max_body: int | None = None  # the largest request body known to pass (settings file)
    #: upload answers' Range style: "inclusive" (0-(N-1) for N bytes, distribution) or "exclusive"
    range_end: str | None = None
    notes: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """camelCase keys, as every ``--json`` of ocibridge (``chunkedUploads``, ``oci11Artifacts``)."""
        out = {camel_key(key): value for key, value in asdict(self).items()}
        out["notes"] = list(self.notes)
        return out


def probe(client: RegistryClient, repository: str | None) -> RegistryReport:
    """Try each capability against ``client``'s registry (in ``repository`` when given)."""
    response = client.send("GET", "/v2/")
    if response.status_code == 401:  # even after the challenge was answered: nothing to learn without access
        raise client.error(response, "refused access to its API (/v2/)")
    if response.status_code != 200:
        raise client.error(response, "does not answer as an OCI registry")
    api_version = response.headers.get("docker-distribution-api-version")
    if repository is None:
        return RegistryReport(client.host, repository, api_version, notes=(
            "give HOST/REPO to try uploads, mounts, referrers and artifacts (it needs push rights)",))
    notes: list[str] = []
    scopes = push_scopes(repository)
    chunked = os.urandom(64)
    chunked_uploads = _upload(client, repository, chunked, scopes, chunk=True, notes=notes)
    whole = os.urandom(64)
    monolithic_uploads = _upload(client, repository, whole, scopes, chunk=False, notes=notes)
    blob = whole if monolithic_uploads else chunked
    mount = artifacts = None
    left: list[str] = []  # what stays in the registry, said in the notes
    if monolithic_uploads or chunked_uploads:
        left.append(f"unreferenced 64-byte blobs in {repository}")
        mount = _mount(client, repository, sha256_bytes(blob), notes)
        if mount:
            left.append(f"the repository {repository}-ocibridge-probe (the mounted blob)")
        artifacts = _artifact(client, repository, notes, left)
    referrers_api = _referrers(client, repository)
    if left:
        notes.append(f"left in the registry: {'; '.join(left)}; the distribution API deletes no "
                     "repository: the registry's admin or garbage collection removes them")
    return RegistryReport(client.host, repository, api_version, chunked_uploads=chunked_uploads,
                          monolithic_uploads=monolithic_uploads, mount=mount, referrers_api=referrers_api,
                          oci_1_1_artifacts=artifacts, max_body=client.uploads.max_body,
                          range_end=_range_style(client), notes=tuple(notes))


def _start(client: RegistryClient, path: str, scopes: tuple[str, ...],
           params: dict[str, str] | None = None) -> httpx.Response:
    return client.send("POST", path, scopes=scopes, content=b"", params=params)


def _upload(client: RegistryClient, repository: str, data: bytes, scopes: tuple[str, ...], *,
            chunk: bool, notes: list[str]) -> bool | None:
    """One small blob: POST, then a PATCH chunk and an empty PUT, or a single PUT."""
    response = _start(client, f"/v2/{repository}/blobs/uploads/", scopes)
    if response.status_code != 202 or not response.headers.get("location"):
        hint = client.error(response, "").credentials_hint
        notes.append(f"starting an upload: HTTP {response.status_code}" + (f" ({hint})" if hint else ""))
        return None
    location = str(response.url.join(response.headers["location"]))
    body = data
    if chunk:
        response = client.send("PATCH", location, scopes=scopes, content=data, retry=False,
                               headers={"Content-Type": "application/octet-stream",
                                        "Content-Range": f"0-{len(data) - 1}"})
        if response.status_code != 202:
            code = client.error(response, "").code
            if code in CONTENT_CODES:
                notes.append(f"a PATCH chunk: HTTP {response.status_code} {code}")
                return None
            client.uploads.no_chunks()
            with contextlib.suppress(RegistryError, httpx.HTTPError):
                client.send("DELETE", location, scopes=scopes, retry=False)
            return False
        _learn_range(client, response.headers.get("range"), len(data))
        location = str(response.url.join(response.headers.get("location") or location))
        body = b""
    url = str(httpx.URL(location).copy_merge_params({"digest": sha256_bytes(data)}))
    response = client.send("PUT", url, scopes=scopes, content=body, retry=False,
                           headers={"Content-Type": "application/octet-stream"})
    if response.status_code != 201:
        notes.append(f"closing a {'chunked' if chunk else 'single-PUT'} upload: HTTP {response.status_code}")
        return False
    return True


def _learn_range(client: RegistryClient, value: str | None, sent: int) -> None:
    """A chunk's answer names the Range style: ``0-(sent-1)`` distribution's, ``0-sent`` the other
    (remembered in the settings file, as an upload learns it)."""
    end = (value or "").strip().removeprefix("bytes=")
    if end == f"0-{sent}":
        client.uploads.exclusive_range_end()
    elif end == f"0-{sent - 1}":
        if client.uploads.range_exclusive:
            client.uploads.inclusive_range_end()
        client.uploads.range_confirmed()


def _range_style(client: RegistryClient) -> str | None:
    """The style seen in this probe, else what the settings file says, else unknown."""
    policy = client.uploads
    if policy.range_seen or policy.range_exclusive:
        return "exclusive" if policy.range_exclusive else "inclusive"
    return None


def _mount(client: RegistryClient, repository: str, digest: str, notes: list[str]) -> bool | None:
    """Mount the blob just sent into a sibling repository: 201 mounted, 202 not."""
    other = f"{repository}-ocibridge-probe"
    scopes = (*push_scopes(other), pull_scope(repository))
    response = _start(client, f"/v2/{other}/blobs/uploads/", scopes, {"mount": digest, "from": repository})
    if response.status_code == 201:
        return True
    if response.status_code == 202:
        if response.headers.get("location"):
            with contextlib.suppress(RegistryError, httpx.HTTPError):
                client.send("DELETE", str(response.url.join(response.headers["location"])),
                            scopes=scopes, retry=False)
        return False
    notes.append(f"mount into {other}: HTTP {response.status_code}")
    return None


def _artifact(client: RegistryClient, repository: str, notes: list[str], left: list[str]) -> bool | None:
    """PUT an OCI 1.1 artifact manifest (artifactType, empty config), by digest; delete it (what
    the registry does not let go is added to ``left``)."""
    scopes = push_scopes(repository)
    if not _upload(client, repository, EMPTY_JSON, scopes, chunk=False, notes=notes):
        return None
    descriptor = empty_descriptor().model_dump(exclude_none=True)
    manifest = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": PROBE_ARTIFACT,
                           "config": descriptor, "layers": [descriptor],
                           "annotations": {"org.opencontainers.image.title": os.urandom(8).hex()}},
                          separators=(",", ":")).encode()
    digest = sha256_bytes(manifest)
    response = client.send("PUT", f"/v2/{repository}/manifests/{digest}", scopes=scopes,
                           content=manifest, headers={"Content-Type": OCI_MANIFEST})
    if response.status_code in (400, 415):
        return False
    if response.status_code not in (200, 201):
        notes.append(f"an artifact manifest: HTTP {response.status_code}")
        return None
    deleted = None
    with contextlib.suppress(RegistryError, httpx.HTTPError):
        deleted = client.send("DELETE", f"/v2/{repository}/manifests/{digest}",
                              scopes=(f"repository:{repository}:delete",), retry=False)
    if deleted is None or deleted.status_code not in (200, 202, 204):
        left.append(f"the probe manifest {repository}@{digest} (untagged; deletes refused)")
    return True


def _referrers(client: RegistryClient, repository: str) -> bool | None:
    response = client.send("GET", f"/v2/{repository}/referrers/sha256:{'0' * 64}",
                           scopes=(pull_scope(repository),), headers={"Accept": OCI_INDEX})
    kind = (response.headers.get("content-type") or "").split(";")[0].strip()
    if response.status_code == 200:
        return kind == OCI_INDEX
    if response.status_code in (404, 405, 400):
        return False
    return None


def check_registry(target: str, client_for: Any) -> RegistryReport:
    """``HOST[/REPO]`` probed through the client ``client_for(host)`` builds."""
    host, _, repository = target.partition("/")
    if not host or "/" in host or any(c in target for c in " @"):
        raise OcibridgeError(f"check-registry takes HOST or HOST/REPO, not {target!r}")
    client = client_for(host)
    try:
        return probe(client, repository or None)
    finally:
        client.close()
