"""A Hub commit's files as its tree lists them (``GET /api/models/REPO/tree/COMMIT?recursive=true``),
page by page, the token kept to the endpoint's own origin: what a mirror's ``hf://`` source and
serve's ``--upstream`` fetch from.

A next page (``Link: <url>; rel="next"``) is more of the same listing from the same endpoint; one
on another scheme, host or port is refused with one line, never followed (huggingface_hub's
``list_repo_tree`` follows it with the token: the endpoint would hand serve's or the mirror's
token to whoever it names). Every page is read by the bounded JSON parser."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urljoin, urlsplit

from ocibridge.core import boundedjson
from ocibridge.errors import OcibridgeError
from ocibridge.stores.registry.bodies import read_bounded
from ocibridge.stores.registry.nextpage import next_link

if TYPE_CHECKING:
    import httpx

#: pages of one listing followed at most (the Hub's pages hold 1000 entries)
MAX_PAGES = 1000


def same_origin(a: str, b: str) -> bool:
    """Whether two URLs share scheme, host and port."""
    pa, pb = urlsplit(a), urlsplit(b)
    ports = {"http": 80, "https": 443}
    return (pa.scheme, (pa.hostname or "").lower(), pa.port or ports.get(pa.scheme)) == \
        (pb.scheme, (pb.hostname or "").lower(), pb.port or ports.get(pb.scheme))


def tree_entries(endpoint: str, repo_id: str, commit: str, token: str | None,
                 http: httpx.Client | None = None, repo_type: str = "model") -> Iterator[Any]:
    """Each entry of the commit's tree, as huggingface_hub's ``RepoFile``/``RepoFolder``; ``http``:
    the client to ask with (None: one made for the listing); ``repo_type``: ``model`` or ``dataset``
    (the Hub's ``/api/models/`` or ``/api/datasets/``)."""
    import httpx
    from huggingface_hub.hf_api import RepoFile, RepoFolder
    from huggingface_hub.utils import build_hf_headers  # type: ignore[attr-defined]

    base = endpoint.rstrip("/")
    repo = "/".join(quote(p, safe="") for p in repo_id.split("/"))
    url: str | None = f"{base}/api/{repo_type}s/{repo}/tree/{quote(commit, safe='')}?recursive=true&expand=false"
    headers = build_hf_headers(token=token or False, library_name="ocibridge")
    client = http or httpx.Client(timeout=httpx.Timeout(60.0, connect=10.0), follow_redirects=False)
    what = f"hf://{repo_id}@{commit}: {base}"
    try:
        for _ in range(MAX_PAGES):
            if url is None:
                return
            try:  # read whole, as a registry's answer: at most $OCIBRIDGE_MAX_RESPONSE_BYTES once decoded
                answer = client.send(client.build_request("GET", url, headers=headers), stream=True)
                read_bounded(answer, f"{what}'s tree listing")
            except httpx.HTTPError as e:
                raise OcibridgeError(f"{what} did not answer its tree listing ({e})") from None
            if answer.status_code != 200:
                raise OcibridgeError(f"{what} answered {answer.status_code} to its tree listing")
            try:
                page = boundedjson.loads(answer.content, "the tree listing")
            except ValueError as e:
                raise OcibridgeError(f"{what} answered no usable tree listing ({e})") from None
            if not isinstance(page, list):
                raise OcibridgeError(f"{what} answered no tree listing (not a list)")
            for item in page:
                try:
                    yield RepoFile(**item) if item["type"] == "file" else RepoFolder(**item)  # type: ignore[no-untyped-call]
                except (KeyError, TypeError, ValueError) as e:
                    raise OcibridgeError(f"{what} listed an entry that is no file nor folder ({e})") from None
            link = next_link(answer)
            url = None if link is None else urljoin(str(answer.url), link)
            if url is not None and not same_origin(url, base):
                shown = url if len(url) <= 200 else url[:200] + "…"
                raise OcibridgeError(f"{what}: its tree listing's next page is on another origin ({shown!r}): "
                                     "not followed (a listing's pages are the endpoint's own)")
        raise OcibridgeError(f"{what}: its tree listing goes on past {MAX_PAGES} pages: refused")
    finally:
        if http is None:
            client.close()
