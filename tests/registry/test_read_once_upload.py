"""A large blob whose source is read once (serve's relay of an upload as it arrives) goes to the
registry as one PUT of its length, the form the registry ingests cheapest; one that can be read
again still goes in chunks kept for a later run."""

from __future__ import annotations

import io
import os
import uuid

import httpx

from ocibridge.oci.mediatypes import OCI_LAYER_TAR
from ocibridge.oci.models import Descriptor
from ocibridge.stores.registry import open_repository
from ocibridge.stores.registry import upload as upload_module

SIZE = 1024 * 1024


class _ReadOnce(io.RawIOBase):
    """A source read forward only, as a relay's is."""

    def __init__(self, data: bytes):
        super().__init__()
        self._raw = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        return self._raw.readinto(buffer)


def _pushed(fault_proxy, registry, reader_of) -> list:
    data = os.urandom(SIZE)
    desc = Descriptor.for_bytes(OCI_LAYER_TAR, data)
    repo = f"readonce/{uuid.uuid4().hex[:8]}"
    with open_repository(host=fault_proxy.host, repository=repo) as dst:
        dst.push_blob(desc, *reader_of(data))
    assert httpx.get(f"{registry.url}/v2/{repo}/blobs/{desc.digest}").content == data
    return [r for r in fault_proxy.requests if "/blobs/uploads/" in r.path and r.method in ("PATCH", "PUT")]


def test_a_large_blob_read_once_goes_as_one_put_of_its_length(registry, fault_proxy, monkeypatch):
    monkeypatch.setattr(upload_module, "RESUMABLE_MIN", SIZE // 4)  # the blob counts as large
    sent = _pushed(fault_proxy, registry, lambda data: (io.BufferedReader(_ReadOnce(data)),))
    assert [(r.method, r.headers.get("content-length"), r.request_bytes) for r in sent] == \
        [("PUT", str(SIZE), SIZE)]
    assert "transfer-encoding" not in sent[0].headers


def test_a_large_blob_that_can_be_read_again_still_goes_in_chunks(registry, fault_proxy, monkeypatch):
    monkeypatch.setattr(upload_module, "RESUMABLE_MIN", SIZE // 4)
    sent = _pushed(fault_proxy, registry, lambda data: (io.BytesIO(data),))
    assert [r.method for r in sent][-1] == "PUT" and "PATCH" in [r.method for r in sent]
    assert sum(r.request_bytes for r in sent) == SIZE
