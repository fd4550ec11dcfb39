"""What the upstream Hub says a revision is: ``GET /api/models/REPO/revision/REV`` (model_info),
its commit and its files: the metadata the door's rules need, and all that is asked before a
repository is let in. The token is serve's (``--upstream-token-file``), never a client's."""

from __future__ import annotations

import functools
import re
import ssl
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from ocibridge.hubserver.repo.sources import RepoNotFound, RevisionNotFound
from ocibridge.hubserver.upstream.errors import UpstreamDown
from ocibridge.hubserver.upstream.tokenless import check_tokenless

#: seconds to connect, and to wait for each read of an answer
TIMEOUT = (10.0, 60.0)
_SHA = re.compile(r"[0-9a-f]{40}")


@dataclass(frozen=True)
class UpstreamRevision:
    """A revision as the upstream resolved it."""

    repo_id: str
    commit: str  # its 40 hex digits
    files: tuple[str, ...]  # every file's path (``siblings``)
    card: dict[str, Any] | None = None  # the card's metadata (``cardData``: the README's front matter)
    gated: str = ""  # "auto" or "manual" when the upstream gates it
    private: bool = False


@functools.cache
def upstream_tls() -> ssl.SSLContext:
    """The TLS context every client of the upstream shares (httpx's defaults: certifi, or
    ``SSL_CERT_FILE``/``SSL_CERT_DIR``): made once, where each new client would load the CA bundle
    again (~26 ms of CPU each; the proxy makes one for each metadata read it passes on)."""
    import httpx

    return httpx.create_ssl_context()


def not_found(repo_id: str, url: str) -> RepoNotFound:
    """A repository neither here nor at the upstream, in words that never say more: a private one
    a reader may not have is answered the same (upstream/proxy.py), its existence not told."""
    return RepoNotFound(f"{repo_id}: not here, nor at the upstream {url}")


class UpstreamHub:
    """The upstream's API, with serve's token."""

    def __init__(self, url: str, token: str | None):
        import httpx

        self.url = url.rstrip("/")
        self.token = token
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(headers=headers, timeout=httpx.Timeout(TIMEOUT[1], connect=TIMEOUT[0]),
                                  follow_redirects=False, verify=upstream_tls())

    def close(self) -> None:
        self._http.close()

    def revision(self, repo_id: str, revision: str) -> UpstreamRevision:
        """The commit and files of ``revision``; :class:`RepoNotFound`/:class:`RevisionNotFound`
        as the upstream says (a 401 is the Hub's answer for a repository a token may not see:
        not found here too), :class:`UpstreamDown` when it cannot be asked."""
        import httpx

        where = f"{self.url}/api/models/{repo_id}/revision/{quote(revision, safe='')}"
        try:
            answer = self._http.get(where)
        except httpx.HTTPError as e:
            raise UpstreamDown(f"{repo_id}@{revision}: the upstream {self.url} did not answer ({e}); "
                               "what was fetched from it before is still served") from None
        if answer.status_code in (401, 403, 404):
            code = answer.headers.get("X-Error-Code", "")
            if code == "RevisionNotFound":
                raise RevisionNotFound(f"{repo_id}: no revision {revision} here nor at the upstream {self.url}")
            check_tokenless(answer.status_code, code, self.token, self.url, f"{repo_id}@{revision}")
            raise not_found(repo_id, self.url)
        if answer.status_code != 200:
            raise UpstreamDown(f"{repo_id}@{revision}: the upstream {self.url} answered {answer.status_code}")
        try:
            info = answer.json()
            commit = info["sha"]
            files = tuple(str(s["rfilename"]) for s in info.get("siblings") or ())
            card = info.get("cardData") if isinstance(info.get("cardData"), dict) else None
            said = info.get("gated")
            gated = (said if isinstance(said, str) else "auto" if said is True else "").lower()
            private = info.get("private") is True
        except (ValueError, KeyError, TypeError):
            raise UpstreamDown(f"{repo_id}@{revision}: the upstream {self.url} answered no model_info") from None
        if not isinstance(commit, str) or not _SHA.fullmatch(commit):
            raise UpstreamDown(f"{repo_id}@{revision}: the upstream {self.url} named no commit ({commit!r})")
        return UpstreamRevision(repo_id, commit, files, card, gated if gated in ("auto", "manual") else "", private)

    def said(self, path: str, what: str) -> Any:
        """The upstream's JSON answer at ``path`` (under its URL); None for a 4xx (it does not
        say); :class:`UpstreamDown` when it cannot be asked or answers no JSON (``what``: the
        error's subject)."""
        import httpx

        url = f"{self.url}{path}"
        try:
            answer = self._http.get(url)
        except httpx.HTTPError as e:
            raise UpstreamDown(f"{what}: the upstream did not answer {url} ({e})") from None
        if 400 <= answer.status_code < 500:
            return None
        if answer.status_code != 200:
            raise UpstreamDown(f"{what}: the upstream answered {answer.status_code} to {url}")
        try:
            return answer.json()
        except ValueError:
            raise UpstreamDown(f"{what}: the upstream answered no JSON to {url}") from None

    def is_branch(self, repo_id: str, name: str) -> bool:
        """Whether ``name`` is a branch at the upstream (``GET /api/models/REPO/refs``, as
        list_repo_refs asks); False when it is not, or the upstream cannot say (it is kept a tag)."""
        import httpx

        try:
            answer = self._http.get(f"{self.url}/api/models/{repo_id}/refs")
            listed = answer.json().get("branches") if answer.status_code == 200 else None
        except (httpx.HTTPError, ValueError, AttributeError):
            return False
        return isinstance(listed, list) and any(isinstance(b, dict) and b.get("name") == name for b in listed)
