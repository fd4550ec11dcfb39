"""serve as a proxy of a hostile upstream (a loopback server of this test that answers as the test
says, recording what it receives): JSON nested 100,000 deep is the Hub's 503 for an upstream that
did not answer usably, never a 500; a tree listing whose next page is on another origin is not
followed, and serve's upstream token never reaches that origin (the proxy's fetch, and a mirror's
``hf://`` listing, which is the same listing)."""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from serving import serve_over

from ocibridge.core.addressrule import AddressRefused
from ocibridge.errors import OcibridgeError
from ocibridge.hubserver.upstream.session import UpstreamSession
from ocibridge.kinds.hf.commitdownload import CommitDownload, HubSource

UP_TOKEN = "hostile-up-token"
COMMIT = "d0" * 20
CONFIG = b'{"hostile": 1}\n'
WEIGHTS = b"\x05" * 4096
DEEP = b"[" * 100_000 + b"]" * 100_000


@functools.cache
def inflating(said: str) -> bytes:
    """``said`` (a JSON object or list) padded to 48 MiB with JSON's own whitespace, gzipped: 48 KiB."""
    return gzip.compress(said[:-1].encode() + b" " * (48 << 20) + said[-1:].encode(), compresslevel=9)


def git_blob(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # noqa: S324 - git's name


def entry(path: str, data: bytes) -> dict[str, object]:
    return {"type": "file", "path": path, "size": len(data), "oid": git_blob(data)}


@dataclass
class Recorder:
    """What a server received: (path, Authorization) of each request."""

    asked: list[tuple[str, str | None]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)  # the held weights' GET
    cut: threading.Event = field(default_factory=threading.Event)  # metacut's first GET: hang up now
    other: str = ""  # the second server's URL (a page link's other origin)
    cdn: str = ""  # a third server's URL (a redirect's other loopback port)


def elsewhere_handler(rec: Recorder) -> type[BaseHTTPRequestHandler]:
    """The other origin: records, and answers an empty page."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            rec.asked.append((self.path, self.headers.get("Authorization")))
            body = WEIGHTS if self.path.startswith("/cdn/") else b"[]"
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


def hostile_handler(rec: Recorder) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            rec.asked.append((self.path, self.headers.get("Authorization")))
            path, _, query = self.path.partition("?")
            parts = path.strip("/").split("/")
            name = parts[3] if path.startswith("/api/models/evil/") and len(parts) > 3 else ""
            if path.startswith("/api/models/evil/deep"):
                return self._send(200, DEEP)
            if path.startswith("/api/models/evil/huge/revision/"):  # a model_info of 48 MiB, sent as 48 KiB of gzip
                said = {"id": "evil/huge", "sha": COMMIT, "private": False, "siblings": [{"rfilename": "config.json"}]}
                return self._send(200, inflating(json.dumps(said)), headers={"Content-Encoding": "gzip"})
            if path.startswith("/api/models/evil/hugetree/tree/"):  # the fetch's listing: 48 MiB too
                return self._send(200, inflating(json.dumps([entry("config.json", CONFIG)])),
                                  headers={"Content-Encoding": "gzip"})
            if path.startswith("/api/models/evil/") and parts[4:5] == ["revision"]:
                return self._json({"id": f"evil/{name}", "sha": COMMIT, "private": False,
                                   "siblings": [{"rfilename": "config.json"}, {"rfilename": "w.safetensors"}]})
            if path.startswith("/api/models/evil/") and parts[4:5] == ["tree"]:
                if name == "flight" and "recursive=true" not in query.lower():  # a reader's tree page in flight
                    return self._send(200, DEEP)
                if name == "link":  # its next page: on another origin
                    link = f'<{rec.other}/api/models/evil/link/tree/{COMMIT}?recursive=true&cursor=2>; rel="next"'
                    return self._json([entry("config.json", CONFIG)], {"Link": link})
                return self._json([entry("config.json", CONFIG), entry("w.safetensors", WEIGHTS)])
            if path.startswith("/api/models/evil/") and parts[4:5] == ["commits"]:
                return self._json([])
            if path.startswith("/api/models/evil/tagged/refs"):  # read to tell a fetched name's kind
                return self._send(200, DEEP)
            if path.startswith("/api/models/evil/") and parts[4:5] == ["refs"]:
                return self._json({"branches": [{"name": "main", "targetCommit": COMMIT}], "tags": []})
            if path.startswith("/evil/") and path.endswith("/config.json"):
                return self._send(200, CONFIG, "application/octet-stream")
            if path.startswith(("/evil/metadata/", "/evil/metahub/")) and path.endswith("/w.safetensors"):
                # the cloud's metadata
                return self._send(302, b"", headers={"Location": "http://169.254.169.254/latest/w.safetensors"})
            if path.startswith("/evil/metacut/") and path.endswith("/w.safetensors"):
                if self.headers.get("Range"):  # the resumed fetch: to the cloud's metadata
                    return self._send(302, b"", headers={"Location": "http://169.254.169.254/latest/w.safetensors"})
                head = (f"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                        f"Content-Length: {len(WEIGHTS)}\r\n\r\n").encode()
                self.wfile.write(head + WEIGHTS[:len(WEIGHTS) // 2])  # half, then a hang-up
                rec.cut.wait(60)
                self.close_connection = True
                return None
            if path.startswith("/evil/tocdn/") and path.endswith("/w.safetensors"):  # another loopback port
                return self._send(302, b"", headers={"Location": f"{rec.cdn}/cdn/w.safetensors"})
            if path.startswith("/evil/") and path.endswith("/w.safetensors"):
                rec.release.wait(60)
                return self._send(200, WEIGHTS, "application/octet-stream")
            return self._json([] if "/tree/" in path else {"error": "no"}, status=404)

        def _json(self, said: object, headers: dict[str, str] | None = None, status: int = 200) -> None:
            self._send(status, json.dumps(said).encode(), "application/json", headers)

        def _send(self, status: int, body: bytes, kind: str = "application/json",
                  headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

    return Handler


@pytest.fixture(scope="module")
def hostile() -> Iterator[tuple[str, Recorder, Recorder]]:
    """The hostile upstream and a second recording server (another port: another origin)."""
    rec, elsewhere = Recorder(), Recorder()
    servers = [ThreadingHTTPServer(("127.0.0.1", 0), hostile_handler(rec)),
               ThreadingHTTPServer(("127.0.0.1", 0), elsewhere_handler(elsewhere))]
    for s in servers:
        s.daemon_threads = True
        threading.Thread(target=s.serve_forever, daemon=True).start()
    rec.other = f"http://127.0.0.1:{servers[1].server_address[1]}"
    try:
        yield f"http://127.0.0.1:{servers[0].server_address[1]}", rec, elsewhere
    finally:
        rec.release.set()
        for s in servers:
            s.shutdown()
            s.server_close()


@pytest.fixture(scope="module")
def cdn(hostile: tuple[str, Recorder, Recorder]) -> Iterator[tuple[str, Recorder]]:
    """A recording server on another loopback port the hostile upstream redirects to (a CDN's place)."""
    rec = Recorder()
    server = ThreadingHTTPServer(("127.0.0.1", 0), elsewhere_handler(rec))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    hostile[1].cdn = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield hostile[1].cdn, rec
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def proxy(hostile: tuple[str, Recorder, Recorder], registry,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """The proxy of the hostile upstream: (its URL, its folder, where its audit log is)."""
    root = tmp_path_factory.mktemp("hostile-proxy")
    (root / "up-token.txt").write_text(UP_TOKEN + "\n")
    flags = ["--upstream", hostile[0], "--upstream-token-file", str(root / "up-token.txt"),
             "--audit-log", str(root / "audit.jsonl")]
    with serve_over(registry, root, "anonymous read=*\n", lambda host: [f"{host}/hostile", "--plain-http", *flags],
                    HF_HUB_DISABLE_XET="1") as url:
        yield url, root


def test_upstream_json_nested_100000_deep_is_the_hubs_503_not_a_500(proxy: tuple[str, Path],
                                                                      hostile: tuple[str, Recorder, Recorder]):
    rec, (proxy_url, _) = hostile[1], proxy
    deep = httpx.get(f"{proxy_url}/api/models/evil/deep", timeout=60)
    assert deep.status_code == 503, (deep.status_code, deep.text[:300])
    assert "nested deeper" in deep.headers.get("x-error-message", deep.text)
    # a tree page asked while the commit is in flight: the upstream's deep answer, a 503 too
    started = httpx.get(f"{proxy_url}/evil/flight/resolve/main/config.json", timeout=60)
    assert started.status_code == 200 and started.content == CONFIG
    tree = httpx.get(f"{proxy_url}/api/models/evil/flight/tree/main", timeout=60)
    assert tree.status_code == 503, (tree.status_code, tree.text[:300])
    assert any("/tree/" in p and "recursive=false" in p for p, _ in rec.asked)  # it was the upstream's answer
    rec.release.set()
    # a tag's name fetched: the upstream's refs (read to tell a branch from a tag) nested too deep
    # is "not a branch", the name kept a tag, read again once landed
    first = httpx.get(f"{proxy_url}/api/models/evil/tagged/revision/v1", timeout=60)
    assert first.status_code == 200, (first.status_code, first.text[:300])
    until = time.monotonic() + 60
    while not any(p.startswith("/api/models/evil/tagged/refs") for p, _ in rec.asked):
        assert time.monotonic() < until, rec.asked
        time.sleep(0.1)
    again = httpx.get(f"{proxy_url}/api/models/evil/tagged/revision/v1", timeout=60)
    assert again.status_code == 200, (again.status_code, again.text[:300])
    assert again.json()["sha"] == COMMIT


def test_an_upstream_answer_that_inflates_past_the_cap_is_the_hubs_503_never_read_whole(
        proxy: tuple[str, Path], hostile: tuple[str, Recorder, Recorder]):
    rec, (proxy_url, root) = hostile[1], proxy
    answer = httpx.get(f"{proxy_url}/api/models/evil/huge", timeout=60)
    assert answer.status_code == 503, (answer.status_code, answer.text[:300])
    assert "larger than 16777216 bytes" in answer.headers["x-error-message"]
    assert not any(p.startswith("/api/models/evil/huge/tree/") for p, _ in rec.asked)  # nothing fetched past it
    # the fetch's own listing of the commit's files: refused past the cap too, nothing fetched
    read = httpx.get(f"{proxy_url}/evil/hugetree/resolve/main/config.json", timeout=60)
    assert read.status_code != 200, read.text[:300]
    until = time.monotonic() + 60
    while not _outcomes(root, "evil/hugetree"):
        assert time.monotonic() < until, rec.asked
        time.sleep(0.1)
    assert _outcomes(root, "evil/hugetree") == ["failed"], _audit(root, "evil/hugetree")
    assert "larger than 16777216 bytes" in _audit(root, "evil/hugetree")[0]["reason"]
    assert not any(p.startswith("/evil/hugetree/") for p, _ in rec.asked)


def test_a_tree_pages_link_to_another_origin_never_gets_the_upstream_token(
        proxy: tuple[str, Path], hostile: tuple[str, Recorder, Recorder], tmp_path: Path):
    url, rec, elsewhere = hostile
    proxy_url, root = proxy
    httpx.get(f"{proxy_url}/api/models/evil/link", timeout=60)  # the fetch begins: its listing's page 1
    until = time.monotonic() + 60
    while not any("/api/models/evil/link/tree/" in p for p, _ in rec.asked):
        assert time.monotonic() < until, rec.asked
        time.sleep(0.1)
    until = time.monotonic() + 60  # the proxy's fetch ended: its one audit line
    while not _outcomes(root, "evil/link"):
        assert time.monotonic() < until, (rec.asked, elsewhere.asked)
        time.sleep(0.1)
    assert [a for _, a in elsewhere.asked if a] == [], elsewhere.asked
    assert elsewhere.asked == []  # refused, not followed at all
    # a mirror's hf:// listing of the same commit: the same pages, refused the same
    download = CommitDownload(HubSource("evil/link", url, UP_TOKEN, None), COMMIT, 1, tmp_path / "hub")
    with pytest.raises(OcibridgeError, match="another origin"):
        download.listing()
    assert elsewhere.asked == []


def test_a_redirect_to_the_metadata_address_is_never_connected_and_the_fetch_fails_saying_why(
        proxy: tuple[str, Path], hostile: tuple[str, Recorder, Recorder]):
    rec, (proxy_url, root) = hostile[1], proxy
    # refused before the read's answer began: the Hub's 503 saying why, not a 200 cut after its headers
    read = httpx.get(f"{proxy_url}/evil/metadata/resolve/main/w.safetensors", timeout=60)
    assert read.status_code == 503, (read.status_code, read.headers)
    said = read.headers["x-error-message"]
    assert "169.254.169.254 resolves to 169.254.169.254, a link-local address: not connected" in said, said
    until = time.monotonic() + 60
    while not _outcomes(root, "evil/metadata"):
        assert time.monotonic() < until, rec.asked
        time.sleep(0.1)
    assert _outcomes(root, "evil/metadata") == ["failed"], _audit(root, "evil/metadata")
    reason = str(_audit(root, "evil/metadata")[0]["reason"])
    assert "169.254.169.254 resolves to 169.254.169.254, a link-local address: not connected" in reason, reason
    logged = (root / "serve.log").read_text()
    assert "not connected to 169.254.169.254" in logged and UP_TOKEN not in logged


def test_a_refusal_after_the_body_began_is_a_cut_the_client_detects_and_one_log_line_names_the_rule(
        proxy: tuple[str, Path], hostile: tuple[str, Recorder, Recorder]):
    rec, (proxy_url, root) = hostile[1], proxy
    before = len((root / "serve.log").read_text().splitlines())
    with httpx.stream("GET", f"{proxy_url}/evil/metacut/resolve/main/w.safetensors", timeout=60) as read:
        assert read.status_code == 200 and read.headers["content-length"] == str(len(WEIGHTS))
        rec.cut.set()  # the upstream hangs up half-way; the fetch's resumed ask is sent to the metadata address
        got = b""
        with pytest.raises(httpx.RemoteProtocolError, match="incomplete|without sending complete"):
            for chunk in read.iter_raw():
                got += chunk
    assert got == WEIGHTS[:len(got)] and len(got) < len(WEIGHTS)  # never a complete-looking short body
    until = time.monotonic() + 60
    while not _outcomes(root, "evil/metacut"):
        assert time.monotonic() < until, rec.asked
        time.sleep(0.1)
    assert _outcomes(root, "evil/metacut") == ["failed"], _audit(root, "evil/metacut")
    logged = (root / "serve.log").read_text().splitlines()[before:]
    named = [line for line in logged if "not connected to 169.254.169.254" in line]
    assert len(named) == 1 and "(the address rule: the upstream" in named[0], logged[-20:]
    cut = [line for line in logged if "cut short" in line and "evil/metacut" in line]
    assert len(cut) == 1 and "a link-local address: not connected" in cut[0], logged[-20:]
    assert not any(line.startswith("Traceback") for line in logged), logged[-40:]  # the cut said once, no traceback


def test_a_redirect_to_another_loopback_port_of_a_loopback_upstream_is_followed_without_the_token(
        proxy: tuple[str, Path], cdn: tuple[str, Recorder]):
    proxy_url, (_, seen) = proxy[0], cdn
    read = httpx.get(f"{proxy_url}/evil/tocdn/resolve/main/w.safetensors", timeout=60)
    assert read.status_code == 200 and read.content == WEIGHTS, (read.status_code, read.text[:300])
    assert ("/cdn/w.safetensors", None) in seen.asked, seen.asked


def test_the_address_rule_is_checked_on_the_address_connected(cdn: tuple[str, Recorder],
                                                              monkeypatch: pytest.MonkeyPatch):
    cdn_url, seen = cdn
    port = int(cdn_url.rsplit(":", 1)[1])
    real, asked_names, connected = socket.getaddrinfo, [], []

    def rebinding(host: str, *args: object, **kwargs: object) -> object:
        if host == "rebind.example":  # loopback the first time, the metadata address after
            asked_names.append(host)
            host = "127.0.0.1" if len(asked_names) == 1 else "169.254.169.254"
        return real(host, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    # a public upstream: another name on loopback is refused, before any connection
    public = UpstreamSession("https://hub.example", None, kinds=frozenset())
    real_connect = socket.socket.connect
    monkeypatch.setattr(socket.socket, "connect", lambda s, a: (connected.append(a), real_connect(s, a))[1])
    with pytest.raises(AddressRefused, match="a loopback address: not connected"):
        public.http.get(f"{cdn_url}/cdn/public")
    with pytest.raises(AddressRefused, match="a link-local address: not connected"):
        public.http.get("http://169.254.169.254/latest/meta-data")
    assert connected == [] and not any(p == "/cdn/public" for p, _ in seen.asked)
    # a loopback upstream: loopback followed, the name resolved once and connected where it was checked
    loopback = UpstreamSession("http://127.0.0.1:1", None)
    assert loopback.rule.allowed() == {"public", "loopback"}
    with pytest.raises(AddressRefused, match="a link-local address"):
        loopback.http.get("http://169.254.169.254/latest/meta-data")
    assert loopback.http.get(f"http://rebind.example:{port}/cdn/rebound").status_code == 200
    assert asked_names == ["rebind.example"] and connected == [("127.0.0.1", port)]
    assert ("/cdn/rebound", None) in seen.asked
    public.close()
    loopback.close()


def _audit(root: Path, repo_id: str) -> list[dict[str, object]]:
    audit = root / "audit.jsonl"
    lines = [json.loads(line) for line in audit.read_text().splitlines()] if audit.exists() else []
    return [e for e in lines if e.get("action") == "upstream_ingest" and e.get("repository") == repo_id]


def _outcomes(root: Path, repo_id: str) -> list[str]:
    audit = root / "audit.jsonl"
    lines = [json.loads(line) for line in audit.read_text().splitlines()] if audit.exists() else []
    return [e["outcome"] for e in lines if e.get("action") == "upstream_ingest" and e.get("repository") == repo_id]


@pytest.mark.parametrize(("spelled", "kind"), [
    ("::ffff:169.254.169.254", "link-local"), ("::ffff:127.0.0.1", "loopback"), ("fe80::1%eth0", "link-local"),
    ("0.0.0.0", "unspecified"), ("::", "unspecified"), ("100.64.0.1", "reserved"), ("fd00::1", "private"),
    ("8.8.8.8", "public"),
])
def test_the_address_rule_reads_each_spelling_of_an_address_as_its_kind(spelled: str, kind: str):
    from ocibridge.core.addressrule import kind_of

    assert kind_of(spelled) == kind


def test_a_host_with_one_refused_address_among_public_ones_is_refused_however_it_is_spelled():
    from ocibridge.core.addressrule import AddressRule, resolved

    rule = AddressRule("http://127.0.0.1:1", kinds={"loopback"})
    rule.check("cdn.example", ["8.8.8.8", "127.0.0.1"])
    with pytest.raises(AddressRefused, match="10.0.0.1, a private address"):
        rule.check("cdn.example", ["8.8.8.8", "10.0.0.1"])
    for numeric in ("2852039166", "0251.0376.0251.0376", "0xa9fea9fe"):  # 169.254.169.254, as inet_aton reads it
        with pytest.raises(AddressRefused, match="a link-local address"):
            rule.check(numeric, resolved(numeric, 80))



def test_huggingface_hubs_client_raises_the_address_rules_refusal_as_serve_said_it(
        proxy: tuple[str, Path], tmp_path: Path):
    import huggingface_hub

    with pytest.raises(huggingface_hub.errors.HfHubHTTPError) as raised:
        huggingface_hub.hf_hub_download("evil/metahub", "w.safetensors", endpoint=proxy[0], cache_dir=tmp_path)
    assert raised.value.response is not None and raised.value.response.status_code == 503
    assert "169.254.169.254 resolves to 169.254.169.254, a link-local address: not connected" in str(raised.value)
    assert not list(tmp_path.rglob("w.safetensors"))
